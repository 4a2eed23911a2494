/**
 * A worker's memory across repeated load runs: a real `svc worker` process (`--concurrency 64`)
 * forwarding to the instant upstream, behind a gateway in this process (PGlite on disk). Each run
 * drives the gateway with autocannon at 32 connections for 10 s, waits for every job to settle,
 * and prints the worker's RSS then and 5 s later. Flat across runs is the target.
 *
 * Run: npm run bench:worker-memory [-- <runs, default 4>]
 */
import { execFileSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import autocannon from "autocannon";
import { startService } from "../src/service.ts";
import { startUpstream } from "../test/support/upstream-server.ts";
import { spawnWorker } from "../test/support/worker-process.ts";
import { fundedClient, settled } from "./support.ts";

const RUNS = Number(process.argv[2] ?? 4);
const MODEL = "Qwen/Qwen3-1.7B";

const upstream = await startUpstream("vllm", { model: MODEL, reply: ["Hello", " there", "."], contextWindow: 32_768, splitWrites: false });
const dir = await mkdtemp(join(tmpdir(), "svc-worker-memory-"));
const service = await startService({ port: 0, dataDir: join(dir, "gateway"), rateLimit: { ratePerSecond: 1e9, burst: 1e9 } });
const client = await fundedClient(service, 10_000_000);
const worker = await spawnWorker({ gateway: service.origin, keypair: join(dir, "worker.json"), modelsDir: join(dir, "models"), models: [`${MODEL}=${upstream.baseUrl}`], args: ["--concurrency", "64"] });
service.trust.vouch(worker.address);
await worker.waitFor(/Connected to /, { timeoutMs: 60_000 });
const workerRssMb = () => Math.round(Number(execFileSync("ps", ["-o", "rss=", "-p", String(worker.child.pid)]).toString()) / 1024);

console.log(`worker RSS once registered: ${workerRssMb()} MB`);
const body = JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Hello" }], max_tokens: 8 });
for (let run = 1; run <= RUNS; run++) {
  const headers = { "content-type": "application/json", authorization: `Bearer ${client.apiKey}` };
  const r = await autocannon({ url: `${service.baseUrl}/chat/completions`, method: "POST", body, headers, connections: 32, duration: 10 });
  await settled(service, 50);
  const afterMb = workerRssMb();
  await new Promise((resolve) => setTimeout(resolve, 5_000));
  console.log(`run ${run}: ${r.requests.total} requests, ${r.non2xx} non-2xx, ${r.errors} errors; worker RSS ${afterMb} MB once settled, ${workerRssMb()} MB 5 s later`);
}
worker.child.kill();
await service.close();
await upstream.close();
await rm(dir, { recursive: true, force: true });
process.exit(0);
