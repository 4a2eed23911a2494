/**
 * Workers as separate `svc worker` processes on loopback, joining a gateway through the worker
 * protocol: load spreads across them, a worker killed mid-stream costs the caller nothing and the
 * next request goes to a live one, a worker that is stopped finishes its job first, workers come
 * back after the gateway restarts, a silent one is dropped, and the model shows in /models exactly
 * while someone hosts it.
 */
import assert from "node:assert/strict";
import { jobConcluded } from "../support/eventually.ts";
import { after, before, test } from "node:test";
import { TRIGGER_WORD } from "../../src/inference/wiring-model.ts";
import { migratedTestDb, MODEL, startTestGateway, tempDir, type TestGateway } from "../support/service.ts";
import { killWorkers, spawnWorker, workerAddress, type WorkerProcess } from "../support/worker-process.ts";

/** Short enough to test a silent worker, long enough for busy processes on a small machine. */
const HEARTBEAT_TIMEOUT_MS = 3_000;

const dir = await tempDir("svc-workers-");
let gateway: TestGateway;
let workers: WorkerProcess[] = [];

after(async () => {
  // Runs even when an assertion failed: a live child would keep this test process running.
  killWorkers();
  await gateway?.close();
  await dir.remove();
});

let spawned = 0;
async function join(): Promise<WorkerProcess> {
  const keypair = `${dir.path}/worker-${spawned++}.json`;
  // The operator's own worker: sold at once, without a probation.
  gateway.service.trust.vouch(await workerAddress(keypair));
  const worker = await spawnWorker({ gateway: gateway.service.origin, keypair, modelsDir: `${dir.path}/models` });
  await worker.waitFor(/Connected to /);
  return worker;
}

async function get<T>(path: string): Promise<{ status: number; body: T }> {
  const response = await fetch(`${gateway.baseUrl}${path}`, { headers: { authorization: `Bearer ${gateway.apiKey}` } });
  return { status: response.status, body: (await response.json()) as T };
}

interface ModelList {
  data: { id: string; svc: { active_workers: number } }[];
}
async function activeWorkers(): Promise<number> {
  return (await get<ModelList>("/models")).body.data.find((m) => m.id === MODEL)?.svc.active_workers ?? 0;
}

/** /models follows the pool as soon as the gateway has seen a worker come or go. */
async function expectActiveWorkers(n: number, withinMs = 5_000): Promise<void> {
  const deadline = Date.now() + withinMs;
  while ((await activeWorkers()) !== n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  assert.equal(await activeWorkers(), n);
}

const banana = (maxTokens: number) => ({
  model: MODEL,
  messages: [{ role: "user" as const, content: `Say ${TRIGGER_WORD}` }],
  temperature: 0,
  max_tokens: maxTokens,
  stream: true as const,
});

before(async () => {
  gateway = await startTestGateway({ workers: [], db: await migratedTestDb(), credits: 1000, workerHeartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS });
  workers = await Promise.all([join(), join(), join()]);
});

test("three worker processes join: the model shows with three active workers", async () => {
  assert.equal(new Set(workers.map((w) => w.address)).size, 3);
  await expectActiveWorkers(3);
  for (const w of workers) assert.match(w.output(), new RegExp(`Serving ${MODEL} with the built-in wiring model`));
});

test("concurrent requests spread across all three", async () => {
  const served = await Promise.all(
    Array.from({ length: 6 }, async () => {
      const { data, response } = await gateway.client.chat.completions.create(banana(120)).withResponse();
      let text = "";
      for await (const chunk of data) text += chunk.choices[0]?.delta.content ?? "";
      assert.equal(text.length, " banana".length * 120);
      // Its worker signs its batch's settlement after the stream: the kill below finds none unsigned.
      await jobConcluded(gateway.service, response.headers.get("x-svc-job-id")!);
      return response.headers.get("x-svc-worker")!;
    }),
  );
  assert.deepEqual(new Set(served), new Set(workers.map((w) => w.address)));
});

test("kill -9 a worker mid-stream: that job fails, nothing is charged, the next request goes to a live worker", async () => {
  const balance = (await get<{ credits_remaining: number }>("/account")).body.credits_remaining;
  const { data: stream, response } = await gateway.client.chat.completions.create(banana(1900)).withResponse();
  const victim = workers.find((w) => w.address === response.headers.get("x-svc-worker"))!;
  let chunks = 0;
  await assert.rejects(async () => {
    for await (const _ of stream) if (++chunks === 5) victim.child.kill("SIGKILL");
  });
  assert.ok(chunks >= 5);
  await victim.exited();

  const job = (await get<{ status: string; credits_charged: number }>(`/jobs/${response.headers.get("x-svc-job-id")}`)).body;
  assert.equal(job.status, "failed");
  assert.equal(job.credits_charged, 0);
  assert.equal((await get<{ credits_remaining: number }>("/account")).body.credits_remaining, balance);

  const next = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }] }).withResponse();
  assert.equal(next.data.choices[0]!.finish_reason, "stop");
  assert.notEqual(next.response.headers.get("x-svc-worker"), victim.address);
  workers = workers.filter((w) => w !== victim);
  await expectActiveWorkers(2);
});

test("SIGTERM a worker mid-stream: it drains, finishes the job, and exits 0", async () => {
  const { data: stream, response } = await gateway.client.chat.completions.create(banana(400)).withResponse();
  const leaving = workers.find((w) => w.address === response.headers.get("x-svc-worker"))!;
  leaving.child.kill("SIGTERM");
  let text = "";
  let finish: string | null | undefined;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta.content ?? "";
    finish ??= chunk.choices[0]?.finish_reason;
  }
  assert.equal(text.length, " banana".length * 400);
  assert.equal(finish, "length");
  assert.equal(await leaving.exited(), 0);
  assert.match(leaving.output(), /Draining: finishing 1 running job/);
  assert.match(leaving.output(), /Stopped\. Earned this session/);
  assert.equal((await get<{ status: string }>(`/jobs/${response.headers.get("x-svc-job-id")}`)).body.status, "settled");
  workers = workers.filter((w) => w !== leaving);
  await expectActiveWorkers(1);
});

test("a worker reconnects after the gateway restarts", async () => {
  const [survivor] = workers;
  const printed = survivor!.output().length;
  const port = Number(new URL(gateway.service.origin).port);
  await gateway.close();
  assert.match((await survivor!.waitFor(/Disconnected from [^\n]*; retrying in/, { from: printed }))[0], /shutting down/);
  gateway = await startTestGateway({ workers: [], db: await migratedTestDb(), credits: 1000, workerHeartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS, port });
  // The operator's own worker, to the new gateway too.
  gateway.service.trust.vouch(survivor!.address);
  await survivor!.waitFor(/Connected to /, { from: printed });
  await expectActiveWorkers(1);
  const reply = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }] }).withResponse();
  assert.equal(reply.response.headers.get("x-svc-worker"), survivor!.address);
});

test("a worker that falls silent is dropped and the model vanishes; when it comes back the model returns", async () => {
  const [last] = workers;
  const printed = last!.output().length;
  // A stopped process keeps its socket open but sends nothing, like a machine that lost its network.
  last!.child.kill("SIGSTOP");
  const silentAt = Date.now();
  await expectActiveWorkers(0, HEARTBEAT_TIMEOUT_MS + 2_000);
  assert.ok(Date.now() - silentAt >= HEARTBEAT_TIMEOUT_MS - 100, "dropped for its silence, not before");
  assert.equal((await get<ModelList>("/models")).body.data.length, 0);
  assert.equal((await get(`/models/${MODEL}`)).status, 404);
  await assert.rejects(gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }] }), (error: { status: number; code: string }) => {
    assert.equal(error.status, 503);
    assert.equal(error.code, "no_workers_available");
    return true;
  });

  last!.child.kill("SIGCONT");
  await last!.waitFor(/Connected to /, { from: printed });
  await expectActiveWorkers(1);
  const reply = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }] }).withResponse();
  assert.equal(reply.response.headers.get("x-svc-worker"), last!.address);
});
