/**
 * Memory of the gateway holding many open streams at once. The service runs alone in this
 * process (svc dev's defaults: PGlite on disk, the embedded chain); a child process runs the
 * callers and the workers. Each worker is a real WorkerClient over the worker protocol, whose
 * engine yields one token every few seconds (a bench engine: no upstream, so the child needs no
 * socket per stream to one). The callers open `count` streaming completions, a batch at a time, and
 * keep every one open; once each has its first token the bench reads this process's RSS, then
 * the callers hang up and every job settles for what it generated.
 *
 * The gateway's process runs a bundle of this file, built as `svc` builds its own (bin/build.js),
 * so its memory is that of the service as `svc serve` runs it, not of tsx loading the sources.
 * `sources` as the second argument runs it through tsx instead, loading the sources as the tests
 * do, which shows what tsx adds to the gateway's memory.
 *
 * Run: node --import tsx bench/streams.ts [count=10000] [sources]
 * A process may hold 20,000 descriptors on this machine (`ulimit -Hn`); the callers' and the
 * gateway's sockets are in different processes, so 10,000 fit.
 */
import { fork, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { request as httpRequest, Agent } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { bundle } from "../bin/build.js";
import { PACKAGE_ROOT } from "../src/core/index.ts";
import { generateKeypair } from "../src/core/keys.ts";
import type { Engine, GenerationEvent, GenerationRequest } from "../src/inference/engine.ts";
import { startService } from "../src/service.ts";
import { WorkerClient } from "../src/worker/worker-client.ts";
import { fundedClient, openJobCount, settled } from "./support.ts";

const MODEL = "Qwen/Qwen3-1.7B";
/** The worker protocol's most jobs at once per worker. */
const PER_WORKER = 1_000;
const TOKEN_EVERY_MS = 5_000;
const BATCH = 200;
/** At most what the gateway's probe of a worker asks for (network/worker-probe.ts). */
const PROBE_TOKENS = 8;

/**
 * One token every TOKEN_EVERY_MS until max_tokens or the caller's abort. A request for a few
 * tokens (the gateway's probe of a new worker) is answered at once, so workers register quickly.
 */
class TickingEngine implements Engine {
  readonly contextWindow = 32_768;
  async countPromptTokens(): Promise<number> {
    return 8;
  }
  async *generate(request: GenerationRequest, signal?: AbortSignal): AsyncIterable<GenerationEvent> {
    let tokens = 0;
    while (tokens < request.maxTokens && !signal?.aborted) {
      yield { type: "delta", text: " tick" };
      tokens++;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, request.maxTokens > PROBE_TOKENS ? TOKEN_EVERY_MS : 0);
        signal?.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
      });
    }
    yield { type: "done", finishReason: signal?.aborted ? "cancelled" : "length", usage: { promptTokens: 8, completionTokens: tokens } };
  }
  async close(): Promise<void> {}
}

type ToChild = { kind: "start"; gateway: string; apiKey: string; count: number } | { kind: "hang up" };
type FromChild = { kind: "workers ready"; addresses: string[] } | { kind: "progress"; opened: number; firstTokens: number; failed: number; rssMb: number };

/** The child: the workers, then the callers, reporting each second. */
async function runChild(): Promise<void> {
  const streams: { destroy(): void }[] = [];
  let opened = 0;
  let firstTokens = 0;
  let failed = 0;
  const agent = new Agent({ keepAlive: false, maxSockets: Infinity });
  const send = (message: FromChild) => process.send!(message);
  const openOne = (gateway: string, apiKey: string) =>
    new Promise<void>((resolve) => {
      const body = JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Hello" }], max_tokens: 60, stream: true });
      const req = httpRequest(`${gateway}/v1/chat/completions`, { method: "POST", agent, headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` } }, (res) => {
        opened++;
        if (res.statusCode !== 200) failed++;
        let seen = false;
        res.on("data", (chunk: Buffer) => {
          if (!seen && chunk.includes('"content":" tick"')) {
            seen = true;
            firstTokens++;
            resolve();
          }
        });
        res.on("error", () => undefined);
        res.on("end", () => resolve());
      });
      req.on("error", () => {
        failed++;
        resolve();
      });
      req.end(body);
      streams.push(req);
    });
  process.on("message", async (message: ToChild) => {
    if (message.kind === "hang up") {
      for (const s of streams) s.destroy();
      return;
    }
    const { gateway, apiKey, count } = message;
    const workers = Array.from({ length: Math.ceil(count / PER_WORKER) }, () =>
      new WorkerClient({ gateway, signer: generateKeypair(), engines: new Map([[MODEL, new TickingEngine()]]), concurrency: PER_WORKER }).start());
    await Promise.all(workers.map((w) => w.registered()));
    send({ kind: "workers ready", addresses: workers.map((w) => w.address) });
    const report = setInterval(() => send({ kind: "progress", opened, firstTokens, failed, rssMb: process.memoryUsage().rss / 2 ** 20 }), 1_000);
    for (let i = 0; i < count; i += BATCH) {
      await Promise.all(Array.from({ length: Math.min(BATCH, count - i) }, () => openOne(gateway, apiKey)));
    }
    send({ kind: "progress", opened, firstTokens, failed, rssMb: process.memoryUsage().rss / 2 ** 20 });
    clearInterval(report);
  });
}

const rssMb = () => process.memoryUsage().rss / 2 ** 20;

/** Where the memory is: V8's heap, and memory outside it that JavaScript objects hold (buffers). */
function breakdown(): string {
  const m = process.memoryUsage();
  const mb = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MB`;
  return `heap used ${mb(m.heapUsed)} of ${mb(m.heapTotal)}, external ${mb(m.external)} (array buffers ${mb(m.arrayBuffers)})`;
}

/** Resolves with the child's message that `until` accepts, printing each progress report. */
function follow(child: ChildProcess, until: (m: FromChild) => boolean, label: () => string): Promise<FromChild> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: FromChild) => {
      if (m.kind === "progress") console.log(`${label()}  opened ${m.opened}, first tokens ${m.firstTokens}, failed ${m.failed}, callers' and workers' process ${m.rssMb.toFixed(0)} MB`);
      if (until(m)) {
        child.off("message", onMessage);
        resolve(m);
      }
    };
    child.on("message", onMessage);
    child.once("exit", (code) => reject(new Error(`the callers' process exited (${code})`)));
  });
}

/**
 * A data dir's first start runs initdb, which grows PGlite's memory for good (docs/performance.md,
 * "Memory of an idle svc dev"); a process of its own makes the dir, so this one is a later start.
 */
async function initialized(dir: string): Promise<void> {
  const init = fork(fileURLToPath(import.meta.url), [], { execArgv: ["--import", "tsx"], env: { ...process.env, STREAMS_INIT: dir } });
  const code = await new Promise<number | null>((resolve) => init.once("exit", resolve));
  if (code !== 0) throw new Error(`initializing ${dir} failed (${code})`);
}

async function runParent(count: number): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "svc-streams-"));
  await initialized(dir);
  const service = await startService({ port: 0, dataDir: dir, rateLimit: { ratePerSecond: 1e9, burst: 1e9 } });
  const client = await fundedClient(service, 10_000_000);
  const idleMb = rssMb();
  const idleBreakdown = breakdown();
  const child = fork(fileURLToPath(import.meta.url), [], { execArgv: ["--import", "tsx"], env: { ...process.env, STREAMS_CHILD: "1" } });
  let peakMb = idleMb;
  const started = performance.now();
  const label = () => {
    peakMb = Math.max(peakMb, rssMb());
    return `${((performance.now() - started) / 1000).toFixed(1).padStart(6)} s  gateway ${rssMb().toFixed(0)} MB`;
  };
  child.send({ kind: "start", gateway: service.origin, apiKey: client.apiKey, count } satisfies ToChild);
  const ready = (await follow(child, (m) => m.kind === "workers ready", label)) as Extract<FromChild, { kind: "workers ready" }>;
  // The bench's own workers: the operator vouches for them, so callers' streams go to them at once.
  for (const address of ready.addresses) service.trust.vouch(address);
  console.log(`${label()}  workers registered`);
  const last = (await follow(child, (m) => m.kind === "progress" && m.firstTokens + m.failed >= count, label)) as Extract<FromChild, { kind: "progress" }>;
  const openMs = performance.now() - started;
  const allOpenMb = rssMb();
  const allOpenBreakdown = breakdown();
  const stillOpen = await openJobCount(service);
  child.send({ kind: "hang up" } satisfies ToChild);
  const settleMs = await settled(service, 200);
  child.kill();
  await service.close();
  await rm(dir, { recursive: true, force: true });
  console.log(`\n${count} streams: ${last.firstTokens} had their first token, ${last.failed} failed; all open after ${(openMs / 1000).toFixed(1)} s, ${stillOpen} jobs open then`);
  console.log(`gateway RSS: idle ${idleMb.toFixed(0)} MB, all open ${allOpenMb.toFixed(0)} MB (peak ${Math.max(peakMb, allOpenMb).toFixed(0)} MB), ${(((allOpenMb - idleMb) * 1024) / count).toFixed(1)} KB per stream`);
  console.log(`  idle: ${idleBreakdown}\n  all open: ${allOpenBreakdown}`);
  console.log(`after the callers hung up, every job settled within ${(settleMs / 1000).toFixed(1)} s`);
  process.exit(0);
}

if (process.env.STREAMS_INIT) {
  await (await startService({ port: 0, dataDir: process.env.STREAMS_INIT })).close();
  process.exit(0);
} else if (process.env.STREAMS_CHILD) {
  await runChild();
} else if (process.env.STREAMS_BUNDLED || process.argv[3] === "sources") {
  await runParent(Number(process.argv[2] ?? 10_000));
} else {
  await runBundled();
}

/** Runs the parent from a bundle: no tsx in the gateway's process. */
async function runBundled(): Promise<void> {
  const outdir = join(PACKAGE_ROOT, "dist", "bench-streams");
  await rm(outdir, { recursive: true, force: true });
  await bundle({ streams: fileURLToPath(import.meta.url), "chain-thread-main": join(PACKAGE_ROOT, "src", "chain", "chain-thread-main.ts") }, outdir);
  const parent = fork(join(outdir, "streams.js"), process.argv.slice(2), { execArgv: ["--enable-source-maps"], env: { ...process.env, STREAMS_BUNDLED: "1" } });
  process.exitCode = (await new Promise<number | null>((resolve) => parent.once("exit", resolve))) ?? 1;
}
