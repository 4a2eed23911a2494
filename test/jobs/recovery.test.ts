/**
 * Crash points of a job's money, rebuilt exactly as a crash leaves them (an intent recorded but
 * never sent, or executed on-chain but never marked); then the service is restarted on the same
 * data dir, which runs recovery: each job ends settled or refunded once, and the ledger and the
 * chain agree. On the embedded chain, and on a cluster over RPC (`svc chain serve` in its own
 * process, which lives on while the gateway restarts), where recovery reads signature statuses.
 */
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, test } from "node:test";
import { generateKeypair, type Keypair } from "../../src/core/keys.ts";
import { newId } from "../../src/core/ids.ts";
import { outputHash, proofMessage } from "../../src/core/proof.ts";
import { creditsToBaseUnits } from "../../src/core/units.ts";
import { prepareEscrow, prepareRefund, prepareSettlement } from "../../src/jobs/job-chain.ts";
import { newPendingJob, type JobRecord } from "../../src/jobs/job-record.ts";
import { getJob, insertJob, mustMoveJob } from "../../src/jobs/job-repo.ts";
import * as money from "../../src/jobs/money.ts";
import { checkInvariants, getAccount } from "../../src/ledger/index.ts";
import { startService, type Service, type ServiceOptions } from "../../src/service.ts";
import { startChainServer, type ChainServer } from "../support/chain-server.ts";
import { tempDir } from "../support/service.ts";

let service: Service;
let worker: Keypair;
let wallet: string;
let dir: { path: string; remove(): Promise<void> };
let chainOptions: Partial<ServiceOptions> = {};

async function open() {
  service = await startService({ port: 0, dataDir: dir.path, ...chainOptions });
}

/** What the next start after a crash does: open the same data dir, which runs recovery. */
async function restart() {
  await service.close();
  await open();
}


/** A job admitted with 4 credits locked; `sendEscrow` decides whether the lock reached the chain. */
async function admittedJob(sendEscrow: boolean): Promise<JobRecord> {
  const id = newId("job");
  const escrow = await prepareEscrow(service.chain, { jobId: id, tier: "lite", wallet, credits: 4 });
  const job = newPendingJob({
    id,
    wallet,
    model: "svc-dev/wiring-model",
    tier: "lite",
    creditsLocked: 4,
    maxTokens: 1500,
    promptTokens: 10,
    escrowAddress: escrow.escrowAddress,
    escrowTx: escrow.signature,
  });
  await service.db.transaction(async (tx) => {
    await money.reserve(tx, wallet, id, 4);
    await insertJob(tx, job);
    await service.journal.record(tx, escrow);
  });
  if (sendEscrow) await service.journal.send(escrow);
  await mustMoveJob(service.db, job, "worker_assigned", { workerAddress: worker.address });
  return (await getJob(service.db, id))!;
}

/** The worker finished with a genuine proof; the settlement is recorded, not yet sent. */
async function settlingJob() {
  const job = await admittedJob(true);
  const proofHash = outputHash("Hello from the svc wiring model.");
  const signature = worker.sign(proofMessage(job.id, proofHash));
  const changes = { proofHash, proofSignature: Buffer.from(signature).toString("base64"), creditsCharged: 2, completionTokens: 7 };
  const settlement = await prepareSettlement(service.chain, { ...job, ...changes });
  await service.db.transaction(async (tx) => {
    await mustMoveJob(tx, job, "proof_recorded", { ...changes, settlementTx: settlement.signature });
    await service.journal.record(tx, settlement);
  });
  return { job, settlement };
}

/**
 * A job charged in its admission's transaction (admission.ts, a JSON reply whose output was in
 * first): recorded, assigned and charged at once; `sendEscrow` decides whether its lock then
 * reached the chain. Its settlement comes later, in its worker's batch, which never happened.
 */
async function chargedAtAdmission(sendEscrow: boolean): Promise<JobRecord> {
  const id = newId("job");
  const escrow = await prepareEscrow(service.chain, { jobId: id, tier: "lite", wallet, credits: 4 });
  const job = newPendingJob({ id, wallet, model: "svc-dev/wiring-model", tier: "lite", creditsLocked: 4, maxTokens: 1500, promptTokens: 10, escrowAddress: escrow.escrowAddress, escrowTx: escrow.signature });
  const proofHash = outputHash("Hello from the svc wiring model.");
  const changes = { proofHash, proofSignature: Buffer.from(worker.sign(proofMessage(id, proofHash))).toString("base64"), creditsCharged: 2, completionTokens: 7 };
  await service.db.transaction(async (tx) => {
    await money.reserve(tx, wallet, id, 4);
    await insertJob(tx, job);
    await service.journal.record(tx, escrow);
    await mustMoveJob(tx, job, "worker_assigned", { workerAddress: worker.address });
    await money.chargeAll(tx, [{ ...job, ...changes }]);
    await mustMoveJob(tx, job, "proof_recorded", changes);
  });
  if (sendEscrow) await service.journal.send(escrow);
  return job;
}

/** After the restart: the job's lock never reached the chain, so it failed with nothing charged, on-chain or in the ledger. */
async function assertLockGivenUp(job: JobRecord) {
  const after = (await getJob(service.db, job.id))!;
  assert.equal(after.status, "failed");
  assert.equal(after.creditsCharged, 0);
  assert.equal(await service.chain.isProcessed(job.escrowTx!), false);
  await assertBooks(10);
}

/** After the restart: the job's escrow had landed with no settlement on its way, so a refund transaction sent it back. */
async function assertRefundedOnChain(job: JobRecord) {
  const after = (await getJob(service.db, job.id))!;
  assert.equal(after.status, "failed");
  assert.equal(after.failureReason, "interrupted");
  assert.ok(after.refundTx && (await service.chain.readTransaction(after.refundTx)).ok);
  await assertBooks(10);
}

async function assertBooks(expectedCredits: number) {
  assert.equal(await money.availableCredits(service.db, wallet), expectedCredits, "ledger");
  assert.equal(await service.chain.tokenBalance(service.chain.creditAccountAddress(wallet)), creditsToBaseUnits(expectedCredits), "chain");
  assert.deepEqual(await checkInvariants(service.db), []);
  const open = await service.db.query("SELECT signature FROM chain_actions WHERE state = 'sent'");
  assert.deepEqual(open, [], "no chain action left open");
}

for (const onCluster of [false, true]) describe(`recover() after a crash, ${onCluster ? "on a cluster over RPC" : "on the embedded chain"}`, () => {
  let server: ChainServer | undefined;
  before(async () => {
    dir = await tempDir("svc-recovery-");
    // 20 ms slots: a lock sent before the crash can land for 3 s, so recovery waits that long before giving it up.
    server = onCluster ? await startChainServer({ slotMs: 20 }) : undefined;
    chainOptions = server ? { chainUrl: server.url, keysDir: server.keysDir } : {};
    await open();
    worker = generateKeypair();
  });
  after(async () => {
    await service.close();
    await server?.close();
    await dir.remove();
  });
  beforeEach(async () => {
    wallet = generateKeypair().address;
    await service.deposits.deposit(wallet, 10);
  });

  test("escrow recorded but never sent: the reservation is released, nothing touched on-chain", async () => {
    const job = await admittedJob(false);
    await restart();
    await assertLockGivenUp(job);
  });

  test("crash mid-generation: the escrow goes back with a refund transaction", async () => {
    const job = await admittedJob(true);
    await restart();
    await assertRefundedOnChain(job);
  });

  test("settlement recorded but never sent: it is rebuilt, sent, and charged once", async () => {
    const { job, settlement } = await settlingJob();
    await restart();
    const after = (await getJob(service.db, job.id))!;
    assert.equal(after.status, "settled");
    assert.equal(after.creditsCharged, 2);
    // The embedded chain forgets recent blockhashes when it restarts with the gateway, so a fresh
    // copy replaces the settlement; a cluster lives on, and takes the original.
    assert.equal(after.settlementTx === settlement.signature, onCluster);
    assert.ok((await service.chain.readTransaction(after.settlementTx!)).ok);
    await assertBooks(8);
    const earned = await getAccount(service.db, money.workerAccount(worker.address));
    assert.equal(earned!.balance, 15_000n);
  });

  test("settlement executed on-chain but not marked: confirmed from the chain, not charged twice", async () => {
    const { job, settlement } = await settlingJob();
    await service.chain.send(settlement.wire); // the crash came right after the chain took it
    await restart();
    const after = (await getJob(service.db, job.id))!;
    assert.equal(after.status, "settled");
    assert.equal(after.settlementTx, settlement.signature);
    await assertBooks(8);
    await restart();
    await assertBooks(8);
  });

  test("charged with its admission, its lock never sent: the charge goes back, nothing touched on-chain", async () => {
    const job = await chargedAtAdmission(false);
    await restart();
    await assertLockGivenUp(job);
  });

  test("charged with its admission, its lock landed, no settlement: the escrow goes back with a refund", async () => {
    const job = await chargedAtAdmission(true);
    await restart();
    await assertRefundedOnChain(job);
  });

  test("refund recorded but never sent: it is sent on the next start", async () => {
    const job = await admittedJob(true);
    const refund = await prepareRefund(service.chain, job);
    await service.db.transaction(async (tx) => {
      await mustMoveJob(tx, job, "timed_out", { refundTx: refund.signature, failureReason: "timeout" });
      await service.journal.record(tx, refund);
    });
    await restart();
    const after = (await getJob(service.db, job.id))!;
    assert.equal(after.status, "refunded");
    assert.ok(after.completedAt);
    await assertBooks(10);
  });
});
