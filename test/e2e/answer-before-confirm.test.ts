/**
 * A JSON reply is sent once the ledger has charged the job and its settlement transaction is
 * signed and recorded, before the chain confirms it (DECISIONS "Answering before the chain
 * confirms"). To read what the caller sees in between, the settlement is held at the chain's
 * door (FAULT INJECTION: a slow chain; the embedded one answers too fast to look). The jobs hold
 * escrow records of their own (`escrowTables: false`): a JSON reply on escrow tables leaves before
 * its settlement is even signed (test/e2e/escrow-tables.test.ts).
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type { Chain } from "../../src/chain/index.ts";
import { checkJobInvariants } from "../../src/jobs/job-invariants.ts";
import * as money from "../../src/jobs/money.ts";
import { checkInvariants, getAccount } from "../../src/ledger/index.ts";
import { assertChainAgrees, assertWorkerPaidOnChain } from "../support/chain-checks.ts";
import { jobConcluded, until } from "../support/eventually.ts";
import { ForgingWorker } from "../support/forging-worker.ts";
import { MODEL, migratedTestDb, startTestGateway, type TestGateway } from "../support/service.ts";
import { keepEvents } from "../support/kept-events.ts";

let gateway: TestGateway;
before(async () => {
  // One caller at a time may be answered before its settlement confirms (64 by default).
  gateway = await startTestGateway({ db: await migratedTestDb(), credits: 100, maxAnsweredUnconfirmed: 1, escrowTables: false });
  await keepEvents(gateway.service.db, gateway.wallet);
});
after(() => gateway?.close());

/** Holds the `nth` transaction sent from now on until `release()`; the others pass. */
function holdSend(chain: Chain, nth: number): { release(): void; held(): boolean } {
  const send = chain.send.bind(chain);
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let sends = 0;
  chain.send = async (wire) => {
    if (++sends === nth) await released;
    return send(wire);
  };
  return { release, held: () => sends >= nth };
}

async function jobOf(id: string) {
  const res = await fetch(`${gateway.baseUrl}/jobs/${id}`, { headers: { authorization: `Bearer ${gateway.apiKey}` } });
  assert.equal(res.status, 200);
  return (await res.json()) as { status: string; credits_charged: number; on_chain: { settlement_tx: string | null; slot: number | null } };
}

test("the caller is answered with its charge while the settlement is still on its way to the chain", async () => {
  const { db } = gateway.service;
  // The request's escrow is the first transaction, its settlement the second.
  const hold = holdSend(gateway.service.chain, 2);
  const { data, response } = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 600, temperature: 0 }, { timeout: 30_000 }).withResponse();
  assert.ok(data.choices[0]!.message.content);
  // The settlement is sent once the answer is out, and held.
  await until(async () => hold.held(), Boolean, "the settlement to be sent");
  const jobId = response.headers.get("x-svc-job-id")!;
  const settlementTx = response.headers.get("x-svc-settlement-tx");

  const settling = await jobOf(jobId);
  assert.equal(settling.status, "settling");
  assert.equal(settling.on_chain.settlement_tx, settlementTx);
  assert.equal(settling.credits_charged, 2);
  // The ledger charged it already, and gave back the rest of its 3-credit lock.
  assert.equal(Number(response.headers.get("x-svc-credits-remaining")), 98);
  assert.equal(await money.availableCredits(db, gateway.wallet), 98);
  assert.deepEqual(await checkInvariants(db), []);
  assert.deepEqual(await checkJobInvariants(db), []);
  const completed = () => db.query("SELECT 1 FROM events WHERE account = $1 AND name = 'job.completed'", [gateway.wallet]);
  assert.equal((await completed()).length, 0, "job.completed waits for the chain");
  assert.equal((await getAccount(db, money.workerAccount(response.headers.get("x-svc-worker")!)))?.balance ?? 0n, 0n, "the worker is paid only once the chain confirms");

  hold.release();
  const settled = await jobConcluded(gateway.service, jobId);
  assert.equal(settled.status, "settled");
  assert.ok(settled.slot !== null && settled.slot > 0);
  assert.equal((await completed()).length, 1);
  assert.equal(await money.availableCredits(db, gateway.wallet), 98);
  await assertChainAgrees(gateway.service, gateway.wallet);
  assert.ok((await assertWorkerPaidOnChain(gateway.service, settled.workerAddress!)) > 0n);
  assert.deepEqual(await checkInvariants(db), []);
  assert.deepEqual(await checkJobInvariants(db), []);
});

test("past the bound of callers answered before their settlements confirm, the next one waits for the chain", async () => {
  const ask = () => gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 600, temperature: 0 }, { timeout: 30_000 }).withResponse();
  // The first request's settlement is held; the second one's (its escrow, then its settlement) passes.
  const hold = holdSend(gateway.service.chain, 2);
  const first = (await ask()).response.headers.get("x-svc-job-id")!;
  assert.equal((await jobOf(first)).status, "settling");
  const second = (await ask()).response.headers.get("x-svc-job-id")!;
  assert.equal((await jobOf(second)).status, "settled", "answered only once its settlement confirmed");
  hold.release();
  assert.equal((await jobConcluded(gateway.service, first)).status, "settled");
  assert.deepEqual(await checkJobInvariants(gateway.service.db), []);
});

/** When the job's escrow confirmation and its settlement's record were written: equal when one transaction wrote both. */
async function escrowConfirmedAndSettlementRecorded(jobId: string): Promise<{ escrowConfirmedAt: Date; settlementRecordedAt: Date; escrowSlot: number; jobSlot: number }> {
  const [row] = await gateway.service.db.query<{ escrow_confirmed_at: Date; settlement_recorded_at: Date; escrow_slot: string; job_slot: string }>(
    `SELECT e.updated_at AS escrow_confirmed_at, s.created_at AS settlement_recorded_at, e.slot AS escrow_slot, j.slot AS job_slot
       FROM jobs j
       JOIN chain_actions e ON e.subject = j.id AND e.kind = 'escrow' AND e.state = 'confirmed'
       JOIN chain_actions s ON s.subject = j.id AND s.kind = 'settlement'
      WHERE j.id = $1`,
    [jobId],
  );
  assert.ok(row, "the job's escrow is confirmed and its settlement recorded");
  return { escrowConfirmedAt: new Date(row.escrow_confirmed_at), settlementRecordedAt: new Date(row.settlement_recorded_at), escrowSlot: Number(row.escrow_slot), jobSlot: Number(row.job_slot) };
}

test("an escrow that lands after the output is in has its confirmation written with the settlement's record", async () => {
  // The stream's escrow is held until the worker has finished (its last chunk is out).
  const hold = holdSend(gateway.service.chain, 1);
  const stream = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 600, temperature: 0, stream: true }, { timeout: 30_000 });
  let jobId = "";
  for await (const chunk of stream) {
    jobId = chunk.id.replace(/^chatcmpl-/, "");
    if (chunk.choices[0]?.finish_reason) hold.release();
  }
  const held = await escrowConfirmedAndSettlementRecorded(jobId);
  assert.equal(held.escrowConfirmedAt.getTime(), held.settlementRecordedAt.getTime(), "one transaction");
  assert.equal(held.jobSlot, held.escrowSlot);
  assert.equal((await jobConcluded(gateway.service, jobId)).status, "settled");

  // Landed while the worker still generates: confirmed at once, before the record.
  const { response } = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 600, temperature: 0 }, { timeout: 30_000 }).withResponse();
  const alone = await escrowConfirmedAndSettlementRecorded(response.headers.get("x-svc-job-id")!);
  assert.ok(alone.escrowConfirmedAt < alone.settlementRecordedAt, "two transactions");
  assert.equal(alone.jobSlot, alone.escrowSlot);
  assert.deepEqual(await checkInvariants(gateway.service.db), []);
  assert.deepEqual(await checkJobInvariants(gateway.service.db), []);
});

test("a forged proof whose escrow landed after the output: the escrow is confirmed on its own and refunded", async () => {
  const honest = gateway.service.pool.hosting(MODEL)[0]!;
  const hold = holdSend(gateway.service.chain, 1);
  // The escrow lands once the output and its forged proof are in.
  gateway.service.pool.add(new ForgingWorker(honest, () => hold.release()));
  let jobId = "";
  try {
    const stream = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 2, stream: true }, { timeout: 30_000 });
    // The caller has the text already, then the stream's error; what the charge found is the job's to tell.
    await assert.rejects(async () => {
      for await (const chunk of stream) jobId = chunk.id.replace(/^chatcmpl-/, "");
    });
  } finally {
    hold.release();
    gateway.service.pool.add(honest);
  }
  const failed = await jobConcluded(gateway.service, jobId);
  assert.equal(failed.status, "failed");
  assert.equal(failed.failureReason, "proof_rejected");
  assert.ok(failed.slot !== null && failed.refundTx !== null, "its escrow's slot recorded, and refunded");
  const [escrow] = await gateway.service.db.query<{ state: string }>("SELECT state FROM chain_actions WHERE subject = $1 AND kind = 'escrow'", [jobId]);
  assert.equal(escrow?.state, "confirmed");
  await assertChainAgrees(gateway.service, gateway.wallet);
  assert.deepEqual(await checkInvariants(gateway.service.db), []);
  assert.deepEqual(await checkJobInvariants(gateway.service.db), []);
});
