/**
 * A worker-side fuzz of the protocol: connected, registered workers send thousands of
 * generated and mutated messages, seeded and reproducible (FUZZ_SEED=<n> replays a run), bounded
 * in count and time. Asserted: nothing a worker sends crashes the gateway or disconnects another
 * worker, and paid requests keep being served while it runs. The fuzzing workers offer another
 * catalog model than the paid requests use, so those requests always reach the honest worker.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { WebSocket } from "ws";
import { prng } from "../../src/inference/wiring-model.ts";
import type { WorkerClientEvent } from "../../src/worker/worker-client.ts";
import { connectRawWorker, type RawWorker } from "../support/raw-worker.ts";
import { MODEL, type TestGateway } from "../support/service.ts";
import { startWorkerFixture, type WorkerFixture } from "../support/worker-fixture.ts";

const SEED = Number(process.env.FUZZ_SEED ?? 20261122);
const MESSAGES = 3_000;
const TIME_BUDGET_MS = 20_000;
const FUZZ_MODEL = "Qwen/Qwen3-1.7B";

let fixture: WorkerFixture;
let gateway: TestGateway;
const honestEvents: WorkerClientEvent[] = [];

before(async () => {
  // Handshake limits are another test's subject; here every fuzzing connection must get in.
  fixture = await startWorkerFixture({ credits: 1000, workerLimits: { handshakeBurstPerIp: 100_000, handshakesPerSecondPerIp: 10_000, handshakeBurstPerSubnet: 100_000, handshakesPerSecondPerSubnet: 10_000, pendingPerIp: 1_000 } });
  gateway = fixture.gateway;
  await fixture.attach({ onEvent: (e) => honestEvents.push(e) });
});
after(() => fixture.close());

/** The project's seeded generator, so a failing run can be replayed from its seed. */
function generator(seed: number) {
  const next = prng(seed);
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(items: readonly T[]): T => items[int(items.length)]!;
  return { next, int, pick };
}

type Random = ReturnType<typeof generator>;

const TYPES = ["hello", "delta", "done", "job_error", "count_result", "count_error", "drain", "heartbeat", "job", "registered", "sudo", ""];

/** Values that break parsers: wrong types, edges of ranges, huge and odd strings. */
function oddValue(r: Random): unknown {
  return r.pick<() => unknown>([
    () => r.int(10) - 5,
    () => 1e20,
    () => -1,
    () => Number.MAX_SAFE_INTEGER + 2,
    () => 0.5,
    () => null,
    () => true,
    () => "",
    () => "x".repeat(r.int(20_000)),
    () => "\u0000\ud800🍌",
    () => ({}),
    () => [],
    () => [1, "a", null],
    () => ({ promptTokens: 1, completionTokens: r.int(1e9) }),
    () => `job_${r.int(1e6)}`,
    () => "sha256:" + "0".repeat(64),
    () => Buffer.alloc(64, r.int(256)).toString("base64"),
  ])();
}

/** A message shaped like a real one, with some fields mutated. */
function shapedMessage(r: Random): Record<string, unknown> {
  const base: Record<string, unknown> = r.pick([
    { type: "delta", jobId: `job_${r.int(100)}`, text: "hi" },
    { type: "done", jobId: `job_${r.int(100)}`, finishReason: "stop", usage: { promptTokens: 1, completionTokens: 1 }, outputHash: "sha256:" + "a".repeat(64), signature: Buffer.alloc(64).toString("base64") },
    { type: "job_error", jobId: `job_${r.int(100)}`, message: "no", fault: r.pick(["request", "worker"]) },
    { type: "count_result", requestId: 1 + r.int(1000), tokens: r.int(100) },
    { type: "count_error", requestId: 1 + r.int(1000), message: "no" },
    { type: "heartbeat" },
    { type: "drain" },
  ]);
  // Most messages stay readable so a connection lives long enough to carry many of them.
  const mutations = r.next() < 0.75 ? 0 : 1 + r.int(2);
  const keys = [...Object.keys(base), "extra", "__proto__", "constructor"];
  for (let i = 0; i < mutations; i++) base[r.pick(keys)] = i === 0 && r.next() < 0.3 ? r.pick(TYPES) : oddValue(r);
  return base;
}

/** The text of one message: mostly JSON shaped like the protocol's, sometimes not JSON at all. */
function fuzzMessage(r: Random): string | Buffer {
  const roll = r.next();
  if (roll < 0.01) return Buffer.from([r.int(256), r.int(256), r.int(256)]);
  if (roll < 0.02) return JSON.stringify(shapedMessage(r)).slice(0, r.int(40));
  if (roll < 0.025) return "[".repeat(5_000) + "]".repeat(5_000);
  return JSON.stringify(shapedMessage(r));
}

async function fuzzConnection(r: Random, budget: { left: number }): Promise<{ delivered: number; code: number }> {
  const worker: RawWorker = await connectRawWorker(gateway.service.origin);
  await worker.register({ models: [{ id: FUZZ_MODEL, contextWindow: 4096 }], concurrency: 1 + r.int(8) });
  let delivered = 0;
  while (budget.left > 0 && worker.ws.readyState === WebSocket.OPEN) {
    // A few at a time, then the gateway (same process) acts on them before the next few.
    for (let i = 0; i < 4 && budget.left > 0; i++, budget.left--, delivered++) worker.ws.send(fuzzMessage(r));
    await new Promise((resolve) => setImmediate(resolve));
  }
  worker.close();
  const { code } = await worker.closed;
  return { delivered, code };
}

test(`${MESSAGES} fuzzed worker messages (seed ${SEED}) harm no other worker and no caller`, async () => {
  const r = generator(SEED);
  const budget = { left: MESSAGES };
  const started = Date.now();
  const paid: number[] = [];
  let fuzzing = true;
  const paying = (async () => {
    while (fuzzing) {
      const t = performance.now();
      const reply = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 5, temperature: 0 });
      assert.ok(reply.choices[0]!.message.content, "a paid request is served during the fuzz");
      paid.push(performance.now() - t);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();
  let connections = 0;
  let delivered = 0;
  try {
    while (budget.left > 0 && Date.now() - started < TIME_BUDGET_MS) {
      const result = await fuzzConnection(r, budget);
      connections++;
      delivered += result.delivered;
    }
  } finally {
    fuzzing = false;
    await paying;
  }
  paid.sort((a, b) => a - b);
  console.log(JSON.stringify({ seed: SEED, messages: delivered, connections, seconds: Math.round((Date.now() - started) / 1000), paidRequests: paid.length, paidP50Ms: Math.round(paid[paid.length >> 1] ?? 0), paidMaxMs: Math.round(paid.at(-1) ?? 0) }));
  // The count is bounded by time too, so a slow machine sends fewer; a thousand is the floor.
  assert.ok(delivered >= 1_000, `only ${delivered} messages in the time budget`);
  assert.ok(paid.length > 0);
  assert.deepEqual(honestEvents.filter((e) => e.type === "disconnected" || e.type === "refused"), [], "the honest worker kept its connection");
  assert.equal(gateway.service.pool.activeWorkers(MODEL), 1);
  const reply = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 5, temperature: 0 });
  assert.ok(reply.choices[0]!.message.content);
});
