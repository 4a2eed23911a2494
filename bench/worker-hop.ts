/**
 * The cost of the worker hop: time to first token and whole request of the same streamed
 * completion through one gateway, served (a) by the engine in the gateway's process (a WorkerNode
 * in the pool) and (b) by a `svc worker` process connected over the worker protocol on loopback.
 * The engine alone is measured too, for reference. The paths are interleaved request by request,
 * so machine noise hits all alike.
 *
 *   node --import tsx bench/worker-hop.ts [requests=200]
 *
 * Both workers host the same model; to send each request down the path being measured, the bench
 * keeps only that path's worker in the gateway's pool (the other stays connected).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { WIRING_MODEL_ID } from "../src/catalog/catalog.ts";
import { generateKeypair } from "../src/core/keys.ts";
import { LlamaEngine } from "../src/inference/llama-engine.ts";
import { ensureWiringModel, KNOWN_REPLY } from "../src/inference/wiring-model.ts";
import type { WorkerHandle } from "../src/network/worker-handle.ts";
import { startService } from "../src/service.ts";
import { WorkerNode } from "../src/worker/worker-node.ts";
import { killWorkers, spawnWorker } from "../test/support/worker-process.ts";
import { BENCH_MAX_TOKENS, BENCH_MESSAGES, fundedClient, percentile, row, signedMs, timeEngine } from "./support.ts";

const requests = Number(process.argv[2] ?? 200);
const scratch = await mkdtemp(join(tmpdir(), "svc-bench-hop-"));
try {
  const engine = await LlamaEngine.load({ modelPath: await ensureWiringModel(join(scratch, "models")), threads: 1 });
  const local = new WorkerNode(generateKeypair(), new Map([[WIRING_MODEL_ID, engine]]));
  const service = await startService({ port: 0, seedWorkers: [local], rateLimit: { ratePerSecond: 1e6, burst: 1e6 } });
  const process_ = await spawnWorker({ gateway: service.origin, keypair: join(scratch, "worker.json"), modelsDir: join(scratch, "models") });
  await process_.waitFor(/Connected to /);
  service.trust.vouch(process_.address);
  const remote = service.pool.hosting(WIRING_MODEL_ID).find((w) => w.address === process_.address)!;

  const client = await fundedClient(service, requests * 10);
  const viaEngine = () => timeEngine(engine);

  function route(worker: WorkerHandle): void {
    for (const other of service.pool.hosting(WIRING_MODEL_ID)) if (other !== worker) service.pool.remove(other.address);
    if (!service.pool.hosting(WIRING_MODEL_ID).includes(worker)) service.pool.add(worker);
  }

  async function viaGateway(worker: WorkerHandle): Promise<[number, number]> {
    route(worker);
    const start = performance.now();
    let first = 0;
    let text = "";
    const { data, response } = await client.chat.completions.create({ model: WIRING_MODEL_ID, messages: BENCH_MESSAGES, max_tokens: BENCH_MAX_TOKENS, temperature: 0, stream: true }).withResponse();
    for await (const chunk of data) {
      const delta = chunk.choices[0]?.delta.content;
      if (delta && first === 0) first = performance.now() - start;
      text += delta ?? "";
    }
    const total = performance.now() - start;
    if (response.headers.get("x-svc-worker") !== worker.address || text !== KNOWN_REPLY) throw new Error("the request did not take the path being measured");
    return [first, total];
  }

  // Warm up every path (first-request JIT, PGlite caches, the worker process's engine).
  for (let i = 0; i < 10; i++) {
    await viaEngine();
    await viaGateway(local);
    await viaGateway(remote);
  }

  const samples = { engineFirst: [] as number[], engineTotal: [] as number[], localFirst: [] as number[], localTotal: [] as number[], remoteFirst: [] as number[], remoteTotal: [] as number[] };
  for (let i = 0; i < requests; i++) {
    const [ef, et] = await viaEngine();
    const [lf, lt] = await viaGateway(local);
    const [rf, rt] = await viaGateway(remote);
    samples.engineFirst.push(ef);
    samples.engineTotal.push(et);
    samples.localFirst.push(lf);
    samples.localTotal.push(lt);
    samples.remoteFirst.push(rf);
    samples.remoteTotal.push(rt);
  }

  const line = (name: string, values: number[]) => row(name, values, 52);
  console.log(`worker hop, ${requests} interleaved requests per path, streamed, completion: 7 tokens`);
  console.log(line("engine alone: time to first token", samples.engineFirst));
  console.log(line("gateway, engine in-process: time to first token", samples.localFirst));
  console.log(line("gateway, svc worker process: time to first token", samples.remoteFirst));
  console.log(line("engine alone: whole generation", samples.engineTotal));
  console.log(line("gateway, engine in-process: to [DONE]", samples.localTotal));
  console.log(line("gateway, svc worker process: to [DONE]", samples.remoteTotal));
  console.log(
    `worker hop (p50, worker process minus in-process): first token ${signedMs(percentile(samples.remoteFirst, 50) - percentile(samples.localFirst, 50))}, ` +
      `whole stream ${signedMs(percentile(samples.remoteTotal, 50) - percentile(samples.localTotal, 50))}`,
  );

  process_.child.kill("SIGTERM");
  await process_.exited();
  await service.close();
  await engine.close();
} finally {
  killWorkers();
  await rm(scratch, { recursive: true, force: true });
}
