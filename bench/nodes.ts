/**
 * Several gateway nodes on one machine: what a cross-node hop adds to a request, and paid JSON
 * completions per second through one gateway process against two. Two `svc serve` processes
 * share a PostgreSQL database (a fresh one on DATABASE_URL's server), `svc chain serve` and the
 * machine's NATS; workers are `svc worker` processes forwarding to an instant OpenAI-compatible
 * upstream (the test upstream, vLLM dialect).
 *
 * 1. Hop: one worker, connected to node A. Sequential requests to A (the worker is local) and to
 *    B (it runs on A's worker through the bus), interleaved; p50 and p99 of each.
 * 2. Throughput: a second worker connects to B; autocannon at 32 connections against A alone,
 *    then 16 against each node at once, interleaved, each run followed by the settlement backlog.
 *
 * Run: DATABASE_URL=postgres://... node --import tsx bench/nodes.ts [seconds per run, default 8] [rounds, default 2]
 */
import { readdirSync, readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import autocannon from "autocannon";
import { openDb } from "../src/store/index.ts";
import { startGatewayProcesses } from "../test/support/gateway-processes.ts";
import { startUpstream } from "../test/support/upstream-server.ts";
import { percentile } from "./support.ts";

const SECONDS = Number(process.argv[2] ?? 8);
const ROUNDS = Number(process.argv[3] ?? 2);
const MODEL = "Qwen/Qwen3-1.7B";
const body = JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Hello" }], max_tokens: 8 });
const url = process.env.DATABASE_URL;
if (!url) throw new Error("bench/nodes.ts needs DATABASE_URL: the nodes share PostgreSQL");
const natsUrl = process.env.NATS_URL ?? "nats://127.0.0.1:4222";

/** CPU time (user + system) a process has used, in ms; 0 once it is gone. */
function cpuMs(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // utime, stime in 1/100 s ticks
  } catch {
    return 0;
  }
}

function postgresPids(): number[] {
  return readdirSync("/proc").filter((d) => /^\d+$/.test(d)).map(Number).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/comm`, "utf8").trim() === "postgres";
    } catch {
      return false;
    }
  });
}

/** Where the machine's CPU goes during a run: ms of CPU per process group. */
function cpuSnapshot(groups: Record<string, () => number[]>): Record<string, number> {
  const out: Record<string, number> = { "bench (autocannon, upstream)": (process.cpuUsage().user + process.cpuUsage().system) / 1000 };
  for (const [name, pids] of Object.entries(groups)) out[name] = pids().reduce((sum, pid) => sum + cpuMs(pid), 0);
  return out;
}

async function timedRequest(origin: string, apiKey: string): Promise<number> {
  const start = performance.now();
  const res = await fetch(`${origin}/v1/chat/completions`, { method: "POST", headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" }, body });
  if (res.status !== 200) throw new Error(`${origin}: ${res.status} ${await res.text()}`);
  await res.arrayBuffer();
  return performance.now() - start;
}

async function load(origins: string[], connections: number, apiKey: string): Promise<{ rps: number; p50: number; p99: number; failed: number }> {
  const runs = await Promise.all(
    origins.map((origin) =>
      autocannon({
        url: `${origin}/v1/chat/completions`,
        method: "POST",
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
        body,
        connections: connections / origins.length,
        duration: SECONDS,
      }),
    ),
  );
  return {
    rps: runs.reduce((sum, r) => sum + r.requests.average, 0),
    p50: Math.max(...runs.map((r) => r.latency.p50)),
    p99: Math.max(...runs.map((r) => r.latency.p99)),
    failed: runs.reduce((sum, r) => sum + r.non2xx + r.errors + r.timeouts, 0),
  };
}

async function main(): Promise<void> {
  const nodes = await startGatewayProcesses({ databaseUrl: url!, natsUrl, env: { LOG_LEVEL: "warn" } });
  const upstream = await startUpstream("vllm", { model: MODEL });
  try {
    const origins = [await nodes.startGateway("a"), await nodes.startGateway("b")];
    const { apiKey } = await nodes.fundedKey(10_000_000);
    const worker = (origin: string) => nodes.startWorker(origin, [`${MODEL}=${upstream.baseUrl}`], ["--concurrency", "64"]);
    const { gateways, chain, workerPids } = nodes;
    const groups = {
      "gateway A": () => [gateways[0]!.child.pid!],
      "gateway B": () => [gateways[1]!.child.pid!],
      "chain server": () => [chain.pid()],
      workers: () => workerPids,
      postgres: postgresPids,
    };
    await worker(origins[0]!);
    await new Promise((r) => setTimeout(r, 3_000)); // B hears A's announcement

    const local: number[] = [];
    const hop: number[] = [];
    for (let i = 0; i < 20; i++) await timedRequest(origins[i % 2]!, apiKey); // warm both paths
    for (let i = 0; i < 300; i++) (i % 2 === 0 ? local : hop).push(await timedRequest(origins[i % 2]!, apiKey));
    const p = (v: number[], q: number) => percentile(v, q).toFixed(2);
    console.log(`sequential JSON requests, one worker on node A (${local.length} each, interleaved):`);
    console.log(`  to A (worker local)          p50 ${p(local, 50)} ms  p99 ${p(local, 99)} ms`);
    console.log(`  to B (hop to A over NATS)    p50 ${p(hop, 50)} ms  p99 ${p(hop, 99)} ms  (hop adds ${(percentile(hop, 50) - percentile(local, 50)).toFixed(2)} ms at p50)`);

    await worker(origins[1]!);
    await new Promise((r) => setTimeout(r, 3_000));
    const db = await openDb({ databaseUrl: nodes.dbUrl });
    console.log(`\nthroughput, 32 connections, ${SECONDS} s per run, load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}:`);
    for (let round = 1; round <= ROUNDS; round++) {
      for (const [label, targets] of [["one gateway (A)", [origins[0]!]], ["two gateways (A+B)", origins]] as const) {
        const cpuBefore = cpuSnapshot(groups);
        const r = await load([...targets], 32, apiKey);
        const cpuAfter = cpuSnapshot(groups);
        const requests = r.rps * SECONDS;
        const perRequest = Object.entries(cpuAfter).map(([name, ms]) => `${name} ${((ms - cpuBefore[name]!) / requests).toFixed(1)}`);
        const busy = Object.entries(cpuAfter).reduce((sum, [name, ms]) => sum + ms - cpuBefore[name]!, 0) / (SECONDS * 1000);
        const settleStart = performance.now();
        while ((await db.query("SELECT 1 FROM jobs WHERE status NOT IN ('settled', 'failed', 'refunded') LIMIT 1")).length > 0) await new Promise((res) => setTimeout(res, 100));
        const settleMs = performance.now() - settleStart;
        console.log(`  round ${round} ${label.padEnd(20)} ${r.rps.toFixed(0).padStart(5)} req/s  p50 ${r.p50} ms  p99 ${r.p99} ms  failed ${r.failed}  backlog settled in ${settleMs.toFixed(0)} ms`);
        console.log(`    CPU ms per request: ${perRequest.join(", ")}; cores busy ${busy.toFixed(2)} of 2`);
      }
    }
    await db.close();
  } finally {
    await nodes.close();
    await upstream.close();
  }
}

await main();
