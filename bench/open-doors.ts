/**
 * An honest caller beside attacks on the doors `svc dev` opens: the gateway is `svc dev` in a
 * process of its own (its embedded chain, its RPC server, its worker running the wiring model);
 * the honest caller is a process of its own sending paid JSON completions back to back from
 * 127.0.0.1 (within its address's 50 a second); each attack runs in processes of its own from other loopback addresses (all of
 * 127/8 reaches this machine), as strangers acting together would. For each attack it prints the
 * honest caller's p50 and p99 and failures, the attack's own answers, and the gateway process's
 * resident memory before, at its peak during, and 5 s after the attack.
 *
 * Attacks: none; amplified reads (batches of getMultipleAccounts naming the program's 38 KB data
 * account, the most a body may hold, from 8 addresses); a subscription flood (16 addresses, each
 * with as many WebSockets and slot subscriptions as it may open, half of them never reading);
 * slow bodies (300 connections sending a body a byte a second, to the API and the RPC server);
 * uncharged work (3 MB single-word prompts and 2,048-message prompts from one address with a key,
 * each answered 400).
 *
 * Run: node --import tsx bench/open-doors.ts [seconds per attack = 15]
 */
import { fork } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { request as httpRequest } from "node:http";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { WebSocket } from "ws";
import { killDevs, startDev } from "../test/support/dev-process.ts";
import { percentile } from "./support.ts";

const SECONDS = Number(process.argv[2] ?? 15);
const MODEL = "svc-dev/wiring-model";

interface Target {
  baseUrl: string;
  rpcUrl: string;
  apiKey: string;
}

/** One POST from `localAddress`; resolves with the status (0 when the connection failed). */
function post(url: string, body: string, localAddress: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve) => {
    const req = httpRequest(url, { method: "POST", localAddress, headers: { "content-type": "application/json", ...headers } }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("error", () => resolve(0));
    req.end(body);
  });
}

/** A caller within its address's limit of 50 requests a second. */
const HONEST_EVERY_MS = 25;

/** The honest caller: paid completions back to back (at most one per HONEST_EVERY_MS) until `seconds` pass; prints its latencies. */
async function honest(target: Target, seconds: number): Promise<void> {
  const ms: number[] = [];
  let failed = 0;
  const body = JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Hello" }], max_tokens: 16 });
  const until = Date.now() + seconds * 1000;
  while (Date.now() < until) {
    const started = performance.now();
    const status = await post(`${target.baseUrl}/chat/completions`, body, "127.0.0.1", { authorization: `Bearer ${target.apiKey}` });
    const took = performance.now() - started;
    if (status === 200) ms.push(took);
    else failed++;
    if (took < HONEST_EVERY_MS) await new Promise((resolve) => setTimeout(resolve, HONEST_EVERY_MS - took));
  }
  console.log(JSON.stringify({ ms, failed }));
}

/** Loops `attack` until `seconds` pass, counting its answers by status. */
async function repeat(seconds: number, attack: () => Promise<number>): Promise<Record<string, number>> {
  const answers: Record<string, number> = {};
  const until = Date.now() + seconds * 1000;
  while (Date.now() < until) {
    const status = await attack();
    answers[status] = (answers[status] ?? 0) + 1;
  }
  return answers;
}

async function programDataAddress(rpcUrl: string): Promise<string> {
  const res = await fetch(rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "getAccountInfo", params: ["SvcEscrow1111111111111111111111111111111111", { encoding: "jsonParsed" }] }) });
  const { result } = (await res.json()) as { result: { value: { data: [string, string] } } };
  const { base58Encode } = await import("../src/core/index.ts");
  return base58Encode(Buffer.from(result.value.data[0], "base64").subarray(4, 36));
}

async function amplifiedReads(target: Target, seconds: number, address: string): Promise<unknown> {
  const code = await programDataAddress(target.rpcUrl);
  const batch = JSON.stringify(Array.from({ length: 9 }, (_, id) => ({ jsonrpc: "2.0", id, method: "getMultipleAccounts", params: [Array(100).fill(code), { encoding: "base64" }] })));
  return repeat(seconds, () => post(target.rpcUrl, batch, address));
}

/** As many WebSockets and slot subscriptions as one address may open; half never read. */
async function subscriptionFlood(target: Target, seconds: number, address: string): Promise<unknown> {
  const wsUrl = target.rpcUrl.replace(/^http/, "ws");
  const sockets: WebSocket[] = [];
  let subscribed = 0;
  let refused = 0;
  for (let i = 0; i < 16; i++) {
    const socket = new WebSocket(wsUrl, { localAddress: address });
    socket.on("error", () => undefined);
    socket.on("message", (data: Buffer) => {
      const reply = JSON.parse(data.toString()) as { result?: unknown; error?: unknown; id?: unknown };
      if (reply.id === undefined || reply.id === null) return;
      if (reply.error) refused++;
      else subscribed++;
    });
    await new Promise((resolve) => socket.once("open", resolve).once("close", resolve));
    if (socket.readyState !== WebSocket.OPEN) continue;
    for (let n = 0; n < 64; n++) socket.send(JSON.stringify({ jsonrpc: "2.0", id: n + 1, method: "slotSubscribe" }));
    if (i % 2 === 1) (socket as unknown as { _socket: { pause(): void } })._socket.pause();
    sockets.push(socket);
  }
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  const open = sockets.filter((s) => s.readyState === WebSocket.OPEN).length;
  for (const s of sockets) s.terminate();
  return { connections: sockets.length, subscribed, refused, openAtEnd: open };
}

/** Connections that send a request's headers, then its body a byte a second. */
async function slowBodies(target: Target, seconds: number, address: string): Promise<unknown> {
  const ends: number[] = [];
  const started = Date.now();
  const open = (url: string, path: string) =>
    new Promise<void>((resolve) => {
      const { hostname, port } = new URL(url);
      const socket = connect({ host: hostname, port: Number(port), localAddress: address }, () => {
        socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n`);
      });
      const drip = setInterval(() => socket.writable && socket.write("{"), 1000);
      socket.on("error", () => undefined);
      socket.on("close", () => {
        clearInterval(drip);
        ends.push(Date.now() - started);
        resolve();
      });
      setTimeout(() => socket.destroy(), seconds * 1000);
    });
  await Promise.all([...Array.from({ length: 150 }, () => open(target.baseUrl, "/v1/chat/completions")), ...Array.from({ length: 150 }, () => open(target.rpcUrl, "/"))]);
  const cut = ends.filter((ms) => ms < seconds * 1000 - 500);
  return { connections: ends.length, cutOff: cut.length, cutAfterMsP50: cut.length ? Math.round(percentile(cut, 50)) : null };
}

/** Requests the API refuses with 400 after reading them: a 3 MB single-word prompt, then 2,048 messages. */
async function unchargedWork(target: Target, seconds: number, address: string): Promise<unknown> {
  const headers = { authorization: `Bearer ${target.apiKey}` };
  const huge = JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "a".repeat(3_000_000) }] });
  const many = JSON.stringify({ model: MODEL, messages: Array.from({ length: 2_048 }, () => ({ role: "user", content: "hello there" })) });
  let turn = 0;
  return repeat(seconds, () => post(`${target.baseUrl}/chat/completions`, turn++ % 2 === 0 ? huge : many, address, headers));
}

const ATTACKS: Record<string, { processes: number; run(target: Target, seconds: number, address: string): Promise<unknown> }> = {
  "amplified reads": { processes: 8, run: amplifiedReads },
  "subscription flood": { processes: 16, run: subscriptionFlood },
  "slow bodies": { processes: 1, run: slowBodies },
  "uncharged 400s": { processes: 1, run: unchargedWork },
};

/** Runs `mode` in a child process (this file) and resolves with the JSON it prints. */
function child(mode: string, target: Target, seconds: number, address = "127.0.0.1"): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const proc = fork(fileURLToPath(import.meta.url), ["child", mode, JSON.stringify(target), String(seconds), address], { execArgv: ["--import", "tsx"], stdio: ["ignore", "pipe", "inherit", "ipc"] });
    let out = "";
    proc.stdout!.on("data", (d: Buffer) => (out += d.toString()));
    proc.on("exit", (code) => (code === 0 ? resolve(JSON.parse(out.trim().split("\n").at(-1)!)) : reject(new Error(`${mode} exited ${code}: ${out}`))));
  });
}

function rssMb(pid: number): number {
  const kb = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
  return Math.round(Number(kb) / 1024);
}

async function measure(target: Target, pid: number, name: string): Promise<string> {
  const before = rssMb(pid);
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, rssMb(pid))), 200);
  const attack = ATTACKS[name];
  const attackers = attack ? Array.from({ length: attack.processes }, (_, i) => child(name, target, SECONDS + 2, `127.0.${10 + i}.1`)) : [];
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const { ms, failed } = (await child("honest", target, SECONDS)) as { ms: number[]; failed: number };
  const outcomes = await Promise.all(attackers);
  clearInterval(sampler);
  await new Promise((resolve) => setTimeout(resolve, 5_000));
  const latency = ms.length ? `${percentile(ms, 50).toFixed(1).padStart(7)} ${percentile(ms, 99).toFixed(1).padStart(8)}` : "      -        -";
  return `${name.padEnd(20)} ${latency} ${String(ms.length).padStart(6)} ${String(failed).padStart(6)}   ${String(before).padStart(4)} ${String(peak).padStart(5)} ${String(rssMb(pid)).padStart(5)}   ${JSON.stringify(outcomes[0] ?? null)}`;
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "svc-open-doors-"));
  try {
    const dev = await startDev(dir, ["--rpc-port", "0", "--credits", "100000"]);
    const target: Target = { baseUrl: dev.baseUrl, rpcUrl: /Solana RPC: (\S+)/.exec(dev.output())![1]!, apiKey: dev.apiKey! };
    console.log(`honest caller: paid JSON completions back to back for ${SECONDS} s per attack, from its own process; svc dev in its own (pid ${dev.child.pid})`);
    console.log(`${"attack".padEnd(20)} ${"p50 ms".padStart(7)} ${"p99 ms".padStart(8)} ${"served".padStart(6)} ${"failed".padStart(6)}   RSS MB: before peak after   one attacker's outcome`);
    for (const name of ["none", ...Object.keys(ATTACKS)]) console.log(await measure(target, dev.child.pid!, name));
  } finally {
    killDevs();
    await rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === "child") {
  const [, , , mode, targetJson, seconds, address] = process.argv;
  const target = JSON.parse(targetJson!) as Target;
  const result = mode === "honest" ? await honest(target, Number(seconds)) : await ATTACKS[mode!]!.run(target, Number(seconds), address!);
  if (result !== undefined) console.log(JSON.stringify(result));
  process.exit(0);
} else {
  await main();
}
