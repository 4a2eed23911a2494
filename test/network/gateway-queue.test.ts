/**
 * The gateway owns its queue, on a real gateway on loopback with a protocol worker that declares
 * 4 job slots and takes 100 ms a job: a burst of 150 requests never puts more than 4 jobs on the
 * worker at once, every request is answered, and the worker is not blamed for the wait. A model
 * whose queue cannot drain in time is refused with 503 and a retry_after, charging nothing.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { generateKeypair } from "../../src/core/keys.ts";
import { creditsRemaining } from "../support/gateway-api.ts";
import { connectRawWorker, type RawWorker } from "../support/raw-worker.ts";
import { MODEL, migratedTestDb, startTestGateway, type TestGateway } from "../support/service.ts";

const SLOTS = 4;
const JOB_MS = 100;
const TEXT = "served after a while";

let gateway: TestGateway;
let worker: RawWorker;
/** Jobs the worker holds now, and the most it ever held. */
const load = { running: 0, most: 0, served: 0 };

before(async () => {
  gateway = await startTestGateway({ db: await migratedTestDb(), workers: [], credits: 5_000, rateLimit: false, queueWaitMs: 20_000 });
  const signer = generateKeypair();
  gateway.service.trust.vouch(signer.address);
  worker = await connectRawWorker(gateway.service.origin, signer);
  await worker.register({ concurrency: SLOTS });
  void serve(worker);
});
after(async () => {
  worker.close();
  await gateway.close();
});

/** Counts at once; each job after JOB_MS, keeping count of the jobs held at once. */
async function serve(raw: RawWorker): Promise<void> {
  for (;;) {
    const message = await raw.next(["count", "job"], 600_000).catch(() => undefined);
    if (message === undefined) return;
    if (message.type === "count") {
      raw.send({ type: "count_result", requestId: message.requestId, tokens: 5 });
      continue;
    }
    load.running++;
    load.most = Math.max(load.most, load.running);
    setTimeout(() => {
      load.running--;
      load.served++;
      raw.finish(message.jobId, TEXT, 4);
    }, JOB_MS);
  }
}

const ask = (maxTokens: number) => gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: maxTokens }, { timeout: 60_000 });

test("a burst of 150 on one worker: every request answered, never more jobs on it than its slots, the worker keeps its standing", async () => {
  const replies = await Promise.allSettled(Array.from({ length: 150 }, () => ask(2_000)));
  const failed = replies.filter((r) => r.status === "rejected").map((r) => String((r as PromiseRejectedResult).reason));
  assert.deepEqual(failed, [], "no request failed");
  assert.ok(replies.every((r) => r.status === "fulfilled" && r.value.choices[0]!.message.content === TEXT));
  assert.equal(load.most, SLOTS, `the worker never held more than its ${SLOTS} slots`);
  assert.equal(gateway.service.pool.health(worker.signer.address)?.standing, "good");
  assert.equal(gateway.service.pool.health(worker.signer.address)?.stats.stalled, 0, "waiting at the gateway is not stalling");
});

test("a queue that cannot drain in time: 503 no_workers_available with retry_after, nothing charged", async () => {
  const short = await startTestGateway({ db: await migratedTestDb(), workers: [], credits: 500, rateLimit: false, queueWaitMs: 150 });
  const slowKey = generateKeypair();
  short.service.trust.vouch(slowKey.address);
  const slow = await connectRawWorker(short.service.origin, slowKey);
  try {
    await slow.register({ concurrency: 1 });
    const before = await creditsRemaining(short);
    // The worker counts but never finishes: its one slot stays taken.
    void (async () => {
      for (;;) {
        const count = await slow.next("count", 600_000).catch(() => undefined);
        if (count === undefined) return;
        slow.send({ type: "count_result", requestId: count.requestId, tokens: 5 });
      }
    })();
    const held = short.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 5 }, { timeout: 60_000 }).catch((e: unknown) => e);
    await slow.next("job");
    const refused = await fetch(`${short.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${short.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 5 }),
    });
    const body = (await refused.json()) as { error: { code: string; details?: { retry_after: number } } };
    assert.equal(refused.status, 503);
    assert.equal(body.error.code, "no_workers_available");
    assert.ok((body.error.details?.retry_after ?? 0) >= 1, JSON.stringify(body));
    slow.close();
    await held;
    assert.equal(await creditsRemaining(short), before);
  } finally {
    slow.close();
    await short.close();
  }
});
