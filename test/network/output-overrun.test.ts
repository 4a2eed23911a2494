/**
 * A worker that sends more than a job's max_tokens can make, on a real gateway on loopback: asked
 * for 10 tokens of the wiring model (whose longest token is 12 bytes), it streams a megabyte. The
 * gateway relays no more than 10 tokens could be, cuts the job there, charges nothing and strikes
 * the worker; a worker that stays within the bytes but not the tokens is charged for max_tokens
 * at most and struck too.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { outputHash, proofMessage } from "../../src/core/proof.ts";
import { creditsRemaining } from "../support/gateway-api.ts";
import { jobConcluded, until } from "../support/eventually.ts";
import { MODEL } from "../support/service.ts";
import { startWorkerFixture, type WorkerFixture } from "../support/worker-fixture.ts";

let fixture: WorkerFixture;
before(async () => {
  fixture = await startWorkerFixture({ credits: 500 });
});
after(() => fixture.close());

const WIRING_LONGEST_TOKEN_BYTES = 12;

test("a megabyte for max_tokens 10: the stream is cut at what 10 tokens can make, nothing is charged, the worker is struck", async () => {
  const { gateway } = fixture;
  const flooder = await fixture.raw({ vouched: true });
  await flooder.register();
  const flooding = (async () => {
    const job = await flooder.nextJob(5);
    const chunk = "x".repeat(64 * 1024);
    for (let i = 0; i < 16 && flooder.ws.readyState === flooder.ws.OPEN; i++) flooder.send({ type: "delta", jobId: job.jobId, text: chunk });
  })();
  const balance = await creditsRemaining(gateway);
  const res = await fetch(`${gateway.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${gateway.apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 10, stream: true }),
  });
  const body = await res.text();
  await flooding;
  assert.ok(body.length < 10 * WIRING_LONGEST_TOKEN_BYTES + 2_000, `relayed ${body.length} characters`);
  const last = JSON.parse(body.trim().split("\n\n").at(-1)!.replace(/^data: /, "")) as { error?: { code: string } };
  assert.equal(last.error?.code, "internal_error", "the stream ends with an error event");
  const job = await jobConcluded(gateway.service, res.headers.get("x-svc-job-id")!);
  assert.deepEqual([job.status, job.creditsCharged], ["failed", 0]);
  assert.equal(await creditsRemaining(gateway), balance);
  assert.equal(gateway.service.pool.health(flooder.signer.address)?.stats.overstated, 1);
  flooder.close();
});

test("within the bytes but past max_tokens by the gateway's count: charged for max_tokens at most, and struck", async () => {
  const { gateway } = fixture;
  const worker = await fixture.raw({ vouched: true });
  await worker.register();
  // Sixty one-byte tokens of the wiring model for max_tokens 10: within 10 * 12 bytes.
  const text = "o".repeat(60);
  const serving = (async () => {
    const job = await worker.nextJob(5);
    worker.send({ type: "delta", jobId: job.jobId, text });
    const hash = outputHash(text);
    worker.send({ type: "done", jobId: job.jobId, finishReason: "length", usage: { promptTokens: 5, completionTokens: 10 }, outputHash: hash, signature: Buffer.from(worker.signer.sign(proofMessage(job.jobId, hash))).toString("base64") });
  })();
  const { data, response } = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 10 }).withResponse();
  await serving;
  assert.equal(data.choices[0]!.message.content, text);
  assert.ok(data.usage!.completion_tokens <= 10);
  await jobConcluded(gateway.service, response.headers.get("x-svc-job-id")!);
  // The strike is recorded once the settlement's confirmation is back in the job's driver, a moment after its row reads concluded.
  await until(async () => gateway.service.pool.health(worker.signer.address)?.stats.overstated, (n) => n === 1, "the overstated claim to be struck");
  worker.close();
});
