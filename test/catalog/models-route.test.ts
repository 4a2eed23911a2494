/**
 * GET /models answers as the contract writes it, against the real service: `median_latency_ms` is
 * an integer before any time to first token was measured (0), and a model whose only worker was
 * demoted stays listed with that worker counted in `active_workers` (the list holds a model while
 * a worker hosts it, and a demoted worker still serves it).
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { FailingWorker } from "../support/failing-worker.ts";
import { MODEL, migratedTestDb, startTestGateway, testWorker, type TestGateway } from "../support/service.ts";

interface ListedModel {
  id: string;
  svc: { active_workers: number; median_latency_ms: number; retires_at: string | null; retirement_reason: string | null };
}

let gateway: TestGateway;
let failing: FailingWorker;

before(async () => {
  failing = new FailingWorker(await testWorker());
  gateway = await startTestGateway({ db: await migratedTestDb(), workers: [failing], credits: 100 });
});
after(() => gateway?.close());

async function listed(): Promise<ListedModel | undefined> {
  const res = await fetch(`${gateway.baseUrl}/models`, { headers: { authorization: `Bearer ${gateway.apiKey}` } });
  assert.equal(res.status, 200);
  return ((await res.json()) as { data: ListedModel[] }).data.find((m) => m.id === MODEL);
}

test("median_latency_ms is the integer 0 until measured; a demoted only worker keeps its model listed and counted", async () => {
  const fresh = await listed();
  assert.ok(fresh, "listed while its worker hosts it");
  assert.equal(fresh.svc.median_latency_ms, 0, "an in-process worker joins unprobed: nothing measured yet");
  assert.deepEqual([fresh.svc.active_workers, fresh.svc.retires_at, fresh.svc.retirement_reason], [1, null, null]);

  for (let i = 0; i < 2; i++) await assert.rejects(gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }] }));
  assert.equal(gateway.service.pool.health(failing.address)?.standing, "demoted");
  const demoted = await listed();
  assert.ok(demoted, "a demoted worker still hosts and serves the model");
  assert.equal(demoted.svc.active_workers, 1);
  assert.ok(Number.isInteger(demoted.svc.median_latency_ms));

  // A good worker joins (staked, so sold without a probation) and serves a job: its time to first token is the median now.
  gateway.service.pool.add(await testWorker({ staked: true }));
  await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }] });
  const measured = await listed();
  assert.equal(measured?.svc.active_workers, 2);
  assert.ok(Number.isInteger(measured?.svc.median_latency_ms) && measured!.svc.median_latency_ms > 0, `measured: ${measured?.svc.median_latency_ms}`);
});
