/**
 * Stored `Idempotency-Key`s outlive the process: a completion and a webhook answered with keys,
 * the service closed and started again on the same data directory (PGlite and the chain on disk),
 * and the retries are answered from the stored outcomes, running and charging nothing.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { KNOWN_REPLY } from "../../src/inference/wiring-model.ts";
import { jobConcluded } from "../support/eventually.ts";
import { MODEL, startTestGateway, tempDir, testWorker } from "../support/service.ts";

async function post(baseUrl: string, path: string, apiKey: string, body: unknown, key: string) {
  const res = await fetch(`${baseUrl}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json", "idempotency-key": key },
    body: JSON.stringify(body),
  });
  return { status: res.status, replayed: res.headers.get("idempotent-replayed"), jobId: res.headers.get("x-svc-job-id"), body: (await res.json()) as Record<string, unknown> };
}

async function get<T>(baseUrl: string, path: string, apiKey: string): Promise<T> {
  return (await (await fetch(`${baseUrl}${path}`, { headers: { authorization: `Bearer ${apiKey}` } })).json()) as T;
}

test("a key stored before a restart replays after it", { timeout: 120_000 }, async (t) => {
  const dir = await tempDir("svc-idempotency-");
  t.after(() => dir.remove());
  const completion = { model: MODEL, messages: [{ role: "user", content: "Hi" }], temperature: 0 };
  const webhook = { url: "https://127.0.0.1:9/hook", events: ["job.completed"], secret: "a-secret-of-20-chars" };
  const options = { dataDir: dir.path, credits: 100, webhooks: { allowLoopback: true } };

  const first = await startTestGateway({ ...options, workers: [await testWorker()] });
  const { apiKey } = first;
  const answered = await post(first.baseUrl, "/chat/completions", apiKey, completion, "completion-key");
  const created = await post(first.baseUrl, "/webhooks", apiKey, webhook, "webhook-key");
  assert.deepEqual([answered.status, created.status], [200, 200]);
  const charged = (await jobConcluded(first.service, answered.jobId!)).creditsCharged;
  await first.close();

  const again = await startTestGateway({ ...options, credits: 0, workers: [await testWorker()] });
  try {
    const replayed = await post(again.baseUrl, "/chat/completions", apiKey, completion, "completion-key");
    assert.deepEqual([replayed.status, replayed.replayed, replayed.jobId, replayed.body], [200, "true", answered.jobId, answered.body]);
    assert.equal((replayed.body.choices as { message: { content: string } }[])[0]!.message.content, KNOWN_REPLY);
    const webhookAgain = await post(again.baseUrl, "/webhooks", apiKey, webhook, "webhook-key");
    assert.deepEqual([webhookAgain.replayed, webhookAgain.body], ["true", created.body]);
    const jobs = await get<{ data: unknown[] }>(again.baseUrl, "/jobs", apiKey);
    assert.equal(jobs.data.length, 1, "no second job");
    assert.equal((await get<{ credits_remaining: number }>(again.baseUrl, "/account", apiKey)).credits_remaining, 100 - charged, "no second charge");
    assert.equal((await get<{ data: unknown[] }>(again.baseUrl, "/webhooks", apiKey)).data.length, 1, "no second webhook");
  } finally {
    await again.close();
  }
});
