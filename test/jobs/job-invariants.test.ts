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
    await money.deposit(db, wallet, 100, "deposit-signature");
  });
  afterEach(() => db.close());

  async function admitted(): Promise<JobRecord> {
    const job = newPendingJob({ id: newId("job"), wallet, model: "m", tier: "lite", lockedCredits: 4, maxTokens: 100, promptTokens: 5, escrowAddress: "e", escrowTx: "s" });
    await money.reserve(db, wallet, job.id, 4);
    await insertJob(db, job);
    await mustMoveJob(db, job, "worker_assigned", { workerAddress: "worker-1" });
    return job;
  }

  test("a running job, a settled one and a refunded one agree with the ledger", async () => {
    await admitted();
    const settled = await admitted();
    await mustMoveJob(db, settled, "proof_recorded", { proofHash: "h", proofSignature: "sig", settlementTx: "settle", creditsCharged: 2 });
    await money.settle(db, settled);
    await mustMoveJob(db, settled, "settlement_confirmed", { slot: 7, completedAt: new Date() });
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
    const found = await checkJobInvariants(db);
    const named = (jobId: string) => found.filter((v) => v.jobId === jobId).map((v) => v.invariant);
    assert.deepEqual(named(released.id), ["unfinished_holds_reservation"]);
    assert.deepEqual(named(unpaid.id), ["settled_is_charged"]);
    assert.deepEqual(named(held.id), ["completed_is_released"]);
    assert.equal(found.length, 3);
  });
});
