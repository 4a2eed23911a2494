/**
 * What the gateway costs on top of the engine: time to first token and whole-request latency of
 * the same completion run (a) on the engine alone, in-process, and (b) through the gateway with
 * the `openai` SDK (auth, ledger reserve, escrow lock on the chain, routing, SSE, settlement
 * with the on-chain proof check). The two are interleaved request by request, so machine noise
 * hits both alike.
 *
 *   node --import tsx bench/gateway.ts [requests=200] [memory|disk|postgres]
 *
 * memory: the embedded database and the chain in memory; disk: both under a data dir (as `svc dev` runs);
 * postgres: the database at DATABASE_URL (a fresh schema, dropped afterwards), chain in memory.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { WIRING_MODEL_ID } from "../src/catalog/catalog.ts";
import { generateKeypair } from "../src/core/keys.ts";
import { LlamaEngine } from "../src/inference/llama-engine.ts";
import { ensureWiringModel } from "../src/inference/wiring-model.ts";
import { startService } from "../src/service.ts";
import { openDb, type Db } from "../src/store/index.ts";
import { WorkerNode } from "../src/worker/worker-node.ts";
import { BENCH_MAX_TOKENS, BENCH_MESSAGES, fundedClient, percentile, row, timeEngine } from "./support.ts";

const requests = Number(process.argv[2] ?? 200);
const storage = process.argv[3] ?? "memory";
if (!["memory", "disk", "postgres"].includes(storage)) throw new Error(`storage must be memory, disk or postgres, not ${storage}`);
if (storage === "postgres" && !process.env.DATABASE_URL) throw new Error("postgres needs DATABASE_URL");
const schema = `bench_gateway_${process.pid}`;

const scratch = await mkdtemp(join(tmpdir(), "svc-bench-gateway-"));
const engine = await LlamaEngine.load({ modelPath: await ensureWiringModel(scratch), threads: 1 });
let db: Db | undefined;
if (storage === "postgres") {
  db = await openDb({ databaseUrl: process.env.DATABASE_URL!, schema });
  await db.exec(`CREATE SCHEMA ${schema}`);
}
const service = await startService({
  port: 0,
  ...(storage === "disk" ? { dataDir: join(scratch, "data") } : {}),
  ...(db ? { db } : {}),
  seedWorkers: [new WorkerNode(generateKeypair(), new Map([[WIRING_MODEL_ID, engine]]))],
  rateLimit: { ratePerSecond: 1e6, burst: 1e6 },
});
const client = await fundedClient(service, requests * 10);
const viaEngine = () => timeEngine(engine);

async function viaGatewayStream(): Promise<[number, number]> {
  const start = performance.now();
  let first = 0;
  const stream = await client.chat.completions.create({ model: WIRING_MODEL_ID, messages: BENCH_MESSAGES, max_tokens: BENCH_MAX_TOKENS, temperature: 0, stream: true });
  for await (const chunk of stream) if (first === 0 && chunk.choices[0]?.delta.content) first = performance.now() - start;
  return [first, performance.now() - start];
}

async function viaGatewayJson(): Promise<number> {
  const start = performance.now();
  await client.chat.completions.create({ model: WIRING_MODEL_ID, messages: BENCH_MESSAGES, max_tokens: BENCH_MAX_TOKENS, temperature: 0 });
  return performance.now() - start;
}

// Warm up both paths (first-request JIT, database caches).
for (let i = 0; i < 10; i++) {
  await viaEngine();
  await viaGatewayStream();
  await viaGatewayJson();
}

const engineFirst: number[] = [];
const engineTotal: number[] = [];
const gatewayFirst: number[] = [];
const gatewayStreamTotal: number[] = [];
const gatewayJsonTotal: number[] = [];
for (let i = 0; i < requests; i++) {
  const [ef, et] = await viaEngine();
  const [gf, gt] = await viaGatewayStream();
  const jt = await viaGatewayJson();
  engineFirst.push(ef);
  engineTotal.push(et);
  gatewayFirst.push(gf);
  gatewayStreamTotal.push(gt);
  gatewayJsonTotal.push(jt);
}


console.log(`gateway vs engine, ${requests} interleaved requests each, storage: ${storage}, completion: 7 tokens`);
console.log(row("engine alone: time to first token", engineFirst));
console.log(row("gateway stream: time to first token", gatewayFirst));
console.log(row("engine alone: whole request", engineTotal));
console.log(row("gateway stream: to [DONE]", gatewayStreamTotal));
console.log(row("gateway JSON: whole request", gatewayJsonTotal));
console.log(
  `overhead (p50): first token +${(percentile(gatewayFirst, 50) - percentile(engineFirst, 50)).toFixed(2)} ms, ` +
    `JSON request +${(percentile(gatewayJsonTotal, 50) - percentile(engineTotal, 50)).toFixed(2)} ms`,
);

await service.close();
if (storage === "postgres") {
  const cleanup = await openDb({ databaseUrl: process.env.DATABASE_URL! });
  await cleanup.exec(`DROP SCHEMA ${schema} CASCADE`);
  await cleanup.close();
}
await engine.close();
await rm(scratch, { recursive: true, force: true });
