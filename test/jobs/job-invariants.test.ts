/**
 * The job invariants catch what they state: jobs whose rows and reservations agree pass, and each
 * kind of disagreement is named. Real database, the jobs' and the ledger's own tables.
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { newId } from "../../src/core/ids.ts";
import { checkJobInvariants } from "../../src/jobs/job-invariants.ts";
import { newPendingJob, type JobRecord } from "../../src/jobs/job-record.ts";
import { insertJob, mustMoveJob, updateJob } from "../../src/jobs/job-repo.ts";
import * as money from "../../src/jobs/money.ts";
import { deposit } from "../../src/wallets/index.ts";
import { JOBS_MIGRATIONS } from "../../src/jobs/schema.ts";
import { LEDGER_MIGRATIONS } from "../../src/ledger/index.ts";
import type { Db } from "../../src/store/index.ts";
import { testDatabases } from "../support/db.ts";

const [pglite] = testDatabases();

describe("job invariants", () => {
  let db: Db;
  const wallet = "wallet-of-a-test";
  beforeEach(async () => {
    db = await pglite!.open({ migrations: [...LEDGER_MIGRATIONS, ...JOBS_MIGRATIONS] });
    await deposit(db, wallet, 100, "deposit-signature");
  });
  afterEach(() => db.close());

  async function admitted(): Promise<JobRecord> {
    const job = newPendingJob({ id: newId("job"), wallet, model: "m", tier: "lite", creditsLocked: 4, maxTokens: 100, promptTokens: 5, escrowAddress: "e", escrowTx: "s" });
    await money.reserve(db, wallet, job.id, 4);
    await insertJob(db, job);
    await mustMoveJob(db, job, "worker_assigned", { workerAddress: "worker-1" });
    return job;
  }

  /** A job charged 2 credits as its settlement is recorded: the charge posted, the rest of its lock released. */
  async function charged(): Promise<JobRecord> {
    const job = await admitted();
    await mustMoveJob(db, job, "proof_recorded", { proofHash: "h", proofSignature: "sig", settlementTx: "settle", creditsCharged: 2 });
    assert.deepEqual(await money.chargeAll(db, [job]), [await money.availableCredits(db, wallet)]);
    return job;
  }

  test("a running job, a settling one, a settled one and refunded ones agree with the ledger", async () => {
    await admitted();
    await charged();
    const settled = await charged();
    await money.payOutAll(db, [{ ...settled, workerAddress: "worker-1" }]);
    await mustMoveJob(db, settled, "settlement_confirmed", { slot: 7, completedAt: new Date() });
    // The chain refused its settlement after the charge was posted: the refund gives the charge back.
    const returned = await charged();
    await mustMoveJob(db, returned, "refund_recorded", { refundTx: "refund", failureReason: "proof_rejected", creditsCharged: 0 });
    const before = await money.availableCredits(db, wallet);
    assert.equal(await money.refund(db, returned), before + 2);
    assert.equal(await money.refund(db, returned), before + 2, "a repeated refund gives nothing back twice");
    await updateJob(db, returned.id, { completedAt: new Date(), slot: 9 });
    const refunded = await admitted();
    await mustMoveJob(db, refunded, "timed_out", { refundTx: "refund", failureReason: "timeout" });
    await money.refund(db, refunded);
    await updateJob(db, refunded.id, { completedAt: new Date(), slot: 8 });
    assert.deepEqual(await checkJobInvariants(db), []);
  });

  test("each disagreement is named", async () => {
    const released = await admitted();
    await money.refund(db, released);
    const unpaid = await admitted();
    await mustMoveJob(db, unpaid, "proof_recorded", { proofHash: "h", proofSignature: "sig", settlementTx: "settle", creditsCharged: 2 });
    await mustMoveJob(db, unpaid, "settlement_confirmed", { slot: 7, completedAt: new Date() });
    const held = await admitted();
    await mustMoveJob(db, held, "refund_recorded", { refundTx: "refund" });
    await updateJob(db, held.id, { completedAt: new Date() });
    const uncharged = await admitted();
    await mustMoveJob(db, uncharged, "proof_recorded", { proofHash: "h", proofSignature: "sig", settlementTx: "settle", creditsCharged: 2 });
    await money.refund(db, uncharged);
    const found = await checkJobInvariants(db);
    const named = (jobId: string) => found.filter((v) => v.jobId === jobId).map((v) => v.invariant);
    assert.deepEqual(named(released.id), ["unfinished_holds_reservation"]);
    assert.deepEqual(named(unpaid.id), ["settled_is_charged"]);
    assert.deepEqual(named(held.id), ["completed_is_released"]);
    assert.deepEqual(named(uncharged.id), ["settling_holds_charge"]);
    assert.equal(found.length, 4);
  });
});
