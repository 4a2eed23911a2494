/**
 * A worker leaving gracefully: drain takes it out of routing at once, lets its running job finish
 * and settle, and stops a job that outlasts the drain's bound, which then charges nothing. And a
 * worker whose engine is an OpenAI-compatible server, as `--model <id>=<url>` sets it up.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { loopText, TRIGGER_WORD } from "../../src/inference/wiring-model.ts";
import { loadEngine, parseModelSpec } from "../../src/worker/engine-spec.ts";
import type { WorkerClient } from "../../src/worker/worker-client.ts";
import { attachProtocolWorker } from "../support/protocol-worker.ts";
import { startUpstream } from "../support/upstream-server.ts";
import { migratedTestDb, MODEL, startTestGateway, testEngine, type TestGateway } from "../support/service.ts";
import { jobConcluded } from "../support/eventually.ts";

let gateway: TestGateway;
const clients: WorkerClient[] = [];

before(async () => {
  // The database image loads while llama.cpp loads the model the protocol workers share.
  const [db] = await Promise.all([migratedTestDb(), testEngine()]);
  gateway = await startTestGateway({ workers: [], db: db });
});
after(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await gateway.close();
});

async function api<T>(path: string): Promise<T> {
  return (await (await fetch(`${gateway.baseUrl}${path}`, { headers: { authorization: `Bearer ${gateway.apiKey}` } })).json()) as T;
}

const longRequest = (maxTokens: number) => ({
  model: MODEL,
  messages: [{ role: "user" as const, content: `Say ${TRIGGER_WORD}` }],
  temperature: 0,
  max_tokens: maxTokens,
  stream: true as const,
});

test("drain: no new jobs at once, the running one finishes and settles", async () => {
  const client = await attachProtocolWorker(gateway.service);
  clients.push(client);
  const { data: stream, response } = await gateway.client.chat.completions.create(longRequest(300)).withResponse();
  const chunks = stream[Symbol.asyncIterator]();
  let text = (await chunks.next()).value?.choices[0]?.delta.content ?? "";
  assert.equal(client.runningJobs, 1);

  const drained = client.drain();
  // Out of routing while its job still runs.
  for (let i = 0; i < 100 && gateway.service.pool.hosting(MODEL).length > 0; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(gateway.service.pool.hosting(MODEL).length, 0);
  assert.equal(client.runningJobs, 1, "the job was still running when the worker left the pool");
  await assert.rejects(gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }] }), { status: 503 });

  let finish: string | null | undefined;
  for (let next = await chunks.next(); !next.done; next = await chunks.next()) {
    text += next.value.choices[0]?.delta.content ?? "";
    finish ??= next.value.choices[0]?.finish_reason;
  }
  assert.equal(text, loopText(300));
  assert.equal(finish, "length");
  await drained;
  await jobConcluded(gateway.service, response.headers.get("x-svc-job-id")!);
  const job = await api<{ status: string }>(`/jobs/${response.headers.get("x-svc-job-id")}`);
  assert.equal(job.status, "settled");
});

test("drain with a bound: a job that outlasts it is stopped and charges nothing", async () => {
  const client = await attachProtocolWorker(gateway.service);
  clients.push(client);
  const before = (await api<{ credits_remaining: number }>("/account")).credits_remaining;
  const request = gateway.client.chat.completions.create(longRequest(1900)).withResponse();
  // Drain while the worker generates: on a quiet machine the whole job can be done before the
  // caller sees the response's headers, and a finished job is settled, not stopped.
  while (client.runningJobs === 0) await new Promise((r) => setTimeout(r, 1));
  const drained = client.drain(0);
  await assert.rejects(async () => {
    for await (const _ of (await request).data);
  });
  await drained;
  const { data: jobs } = await api<{ data: { id: string }[] }>("/jobs?limit=1");
  const job = await api<{ status: string; credits_charged: number }>(`/jobs/${jobs[0]!.id}`);
  assert.equal(job.status, "failed");
  assert.equal(job.credits_charged, 0);
  assert.equal((await api<{ credits_remaining: number }>("/account")).credits_remaining, before);
});

test("a worker serving a catalog model from an OpenAI-compatible server", async () => {
  const upstream = await startUpstream("vllm", { model: "qwen3-small" });
  try {
    const spec = parseModelSpec(`Qwen/Qwen3-1.7B=${upstream.baseUrl}#qwen3-small`);
    const engine = await loadEngine(spec.engine, { modelsDir: "unused", maxSequences: 2 });
    const client = await attachProtocolWorker(gateway.service, { engines: new Map([[spec.modelId, engine]]) });
    clients.push(client);
    const { data, response } = await gateway.client.chat.completions.create({ model: "Qwen/Qwen3-1.7B", messages: [{ role: "user", content: "Hi" }] }).withResponse();
    assert.equal(data.choices[0]!.message.content, upstream.behaviour.reply.join(""));
    assert.equal(response.headers.get("x-svc-worker"), client.address);
    assert.equal(upstream.chatRequests()[0]!.body!.model, "qwen3-small");
    await client.close();
    await engine.close();
  } finally {
    await upstream.close();
  }
});
