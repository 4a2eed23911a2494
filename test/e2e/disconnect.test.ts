/**
 * A caller who reads part of a stream and hangs up pays for what was generated up to then: the
 * generation stops, the worker signs the partial output, the job settles cost(tokens generated)
 * in the ledger and on-chain, and the worker is paid its share. Once with the in-process seed
 * worker, once with a worker over the worker protocol.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { completionCost, TIERS } from "../../src/core/pricing.ts";
import { outputHash } from "../../src/core/proof.ts";
import { splitPayout } from "../../src/core/payout.ts";
import { LOOP_UNIT, TRIGGER_WORD } from "../../src/inference/wiring-model.ts";
import { checkJobInvariants } from "../../src/jobs/job-invariants.ts";
import * as money from "../../src/jobs/money.ts";
import { checkInvariants } from "../../src/ledger/index.ts";
import type { WorkerClient } from "../../src/worker/worker-client.ts";
import { assertChainAgrees, assertWorkerPaidOnChain } from "../support/chain-checks.ts";
import { attachProtocolWorker } from "../support/protocol-worker.ts";
import { MODEL, migratedTestDb, startTestGateway, testWorker, type TestGateway } from "../support/service.ts";

/** The looping reply would run to 1,900 tokens (lite: cost 4 locked); the caller leaves after 700. */
const MAX_TOKENS = 1900;
const CHUNKS_READ = 700;

interface Job {
  status: string;
  credits_charged: number;
  worker_address: string;
  usage: { completion_tokens: number };
  on_chain: { settlement_tx: string | null; proof_hash: string | null; refund_tx: string | null };
}

let gateway: TestGateway;
let seedAddress: string;
let remote: WorkerClient;

before(async () => {
  const seed = await testWorker();
  seedAddress = seed.address;
  gateway = await startTestGateway({ db: await migratedTestDb(), workers: [seed], credits: 100 });
  remote = await attachProtocolWorker(gateway.service);
});
after(async () => {
  await remote?.close();
  await gateway?.close();
});

async function jobOf(id: string): Promise<Job> {
  const res = await fetch(`${gateway.baseUrl}/jobs/${id}`, { headers: { authorization: `Bearer ${gateway.apiKey}` } });
  assert.equal(res.status, 200);
  return (await res.json()) as Job;
}

/** Streams the looping reply, reads CHUNKS_READ chunks and disconnects; returns the settled job. */
async function readPartlyAndLeave(): Promise<{ jobId: string; job: Job; text: string }> {
  const controller = new AbortController();
  const { data: stream, response } = await gateway.client.chat.completions
    .create(
      { model: MODEL, messages: [{ role: "user", content: `Say ${TRIGGER_WORD}` }], temperature: 0, max_tokens: MAX_TOKENS, stream: true },
      { signal: controller.signal },
    )
    .withResponse();
  const jobId = response.headers.get("x-svc-job-id")!;
  let chunks = 0;
  let text = "";
  try {
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      if (++chunks === CHUNKS_READ) controller.abort();
    }
  } catch {
    // Depending on timing the SDK ends the iteration or throws its abort error.
  }
  assert.equal(chunks, CHUNKS_READ);
  const deadline = Date.now() + 15_000;
  let job = await jobOf(jobId);
  while (job.status !== "settled" && job.status !== "failed" && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 25));
    job = await jobOf(jobId);
  }
  return { jobId, job, text };
}

for (const kind of ["in-process seed worker", "worker over the protocol"] as const) {
  test(`a caller who leaves mid-stream pays for what was generated (${kind})`, async () => {
    const before = await money.availableCredits(gateway.service.db, gateway.wallet);
    const { job, text } = await readPartlyAndLeave();
    // Idle workers take turns: the seed worker serves the first of these, the remote one the second.
    assert.equal(job.worker_address, kind === "in-process seed worker" ? seedAddress : remote.address);
    assert.equal(job.status, "settled");

    const generated = job.usage.completion_tokens;
    assert.ok(generated >= CHUNKS_READ && generated < MAX_TOKENS, `${generated} tokens generated: what was read, and not the whole reply`);
    assert.ok(text === LOOP_UNIT.repeat(text.length / LOOP_UNIT.length), "the caller read the loop");
    // The proof covers exactly the text generated up to the stop, one loop unit per token.
    assert.equal(job.on_chain.proof_hash, outputHash(LOOP_UNIT.repeat(generated)));
    assert.ok(job.on_chain.settlement_tx);
    assert.equal(job.on_chain.refund_tx, null);

    const charged = completionCost(TIERS.lite, generated);
    assert.equal(job.credits_charged, charged);
    assert.ok(charged > TIERS.lite.creditsPerRequest && charged < completionCost(TIERS.lite, MAX_TOKENS), "more than the flat rate, less than the lock");
    assert.equal(await money.availableCredits(gateway.service.db, gateway.wallet), before - charged);
    await assertChainAgrees(gateway.service, gateway.wallet);
    assert.deepEqual(await checkInvariants(gateway.service.db), []);
    assert.deepEqual(await checkJobInvariants(gateway.service.db), []);

    const settlement = await gateway.service.chain.readTransaction(job.on_chain.settlement_tx!);
    assert.ok(settlement.ok);
    const share = splitPayout(charged, false).worker;
    const paid = settlement.innerInstructions.find((i) => i.kind === "transfer" && i.to === gateway.service.chain.workerTokenAccount(job.worker_address))?.amount;
    assert.equal(paid, share, "the worker's 75% of the charge");
    assert.equal(await assertWorkerPaidOnChain(gateway.service, job.worker_address), share);
    if (kind === "worker over the protocol") {
      // The settlement notice reaches the worker, which counts the payment as earned.
      const deadline = Date.now() + 5_000;
      while (remote.earnedBaseUnits !== share && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      assert.equal(remote.earnedBaseUnits, share);
    }
  });
}
