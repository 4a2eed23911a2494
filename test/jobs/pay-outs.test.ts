/**
 * What a settlement's confirmation pays, prepared by money.preparePayOuts: the worker's account
 * made sure of, the wallets' credits read with it, a charge its record posted paid from escrow,
 * and a reservation still pending (a settlement recorded before records posted charges) charged
 * and paid at once. Real database, the jobs' and the ledger's own tables.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { afterEach, beforeEach, describe, test } from "node:test";
import { newId } from "../../src/core/ids.ts";
import { checkJobInvariants } from "../../src/jobs/job-invariants.ts";
import { newPendingJob, type JobRecord } from "../../src/jobs/job-record.ts";
import { insertJob, mustMoveJob } from "../../src/jobs/job-repo.ts";
import * as money from "../../src/jobs/money.ts";
import { deposit } from "../../src/wallets/index.ts";
import { JOBS_MIGRATIONS } from "../../src/jobs/schema.ts";
import { getAccount, LEDGER_MIGRATIONS, TREASURY_ACCOUNT, workerAccountId } from "../../src/ledger/index.ts";
import type { Db } from "../../src/store/index.ts";
import { testDatabases } from "../support/db.ts";

for (const database of testDatabases({ sqlite: true })) {
  describe(`paying out a confirmed settlement (${database.name})`, () => {
    let db: Db;
    const wallet = `wallet-${randomUUID()}`;
    const worker = `worker-${randomUUID()}`;
    beforeEach(async () => {
      db = await database.open({ migrations: [...LEDGER_MIGRATIONS, ...JOBS_MIGRATIONS] });
      await deposit(db, wallet, 100, `deposit-${randomUUID()}`);
    });
    afterEach(() => db.close());

    /** A job holding 4 credits whose settlement is recorded for a charge of 2; `posted`: its record posted the charge. */
    async function recorded(posted: boolean): Promise<JobRecord> {
      const job = newPendingJob({ id: newId("job"), wallet, model: "m", tier: "lite", creditsLocked: 4, maxTokens: 100, promptTokens: 5, escrowAddress: "e", escrowTx: "s" });
      await money.reserve(db, wallet, job.id, 4);
      await insertJob(db, job);
      await mustMoveJob(db, job, "worker_assigned", { workerAddress: worker });
      await mustMoveJob(db, job, "proof_recorded", { proofHash: "h", proofSignature: "sig", settlementTx: randomUUID(), creditsCharged: 2 });
      if (posted) await money.chargeAll(db, [job]);
      return job;
    }

    async function confirm(jobs: JobRecord[], postedAtRecord: ReadonlySet<string>): Promise<Map<string, number>> {
      return db.transaction(async (tx) => {
        const { charged, available } = await money.preparePayOuts(tx, jobs, postedAtRecord);
        await money.payOuts(tx, charged);
        for (const job of jobs) await mustMoveJob(tx, job, "settlement_confirmed", { slot: 7, completedAt: new Date() });
        return available;
      });
    }

    test("a charge its record posted is paid out, the worker's account made on its first payout", async () => {
      const job = await recorded(true);
      assert.equal(await getAccount(db, workerAccountId(worker)), null);
      const available = await confirm([job], new Set([job.id]));
      assert.deepEqual([...available], [[wallet, 98]]);
      assert.equal(await money.availableCredits(db, wallet), 98);
      assert.ok((await getAccount(db, workerAccountId(worker)))!.creditsPosted > 0n);
      assert.ok((await getAccount(db, TREASURY_ACCOUNT))!.creditsPosted > 0n);
      assert.deepEqual(await checkJobInvariants(db), []);
    });

    test("a reservation still pending is charged and paid at once, and the credits reported are those after its charge", async () => {
      const earlier = await recorded(true);
      const unposted = await recorded(false);
      // Before: both locks of 4 held. After: each charged 2, the rest of its lock back.
      assert.equal(await money.availableCredits(db, wallet), 100 - 2 - 4);
      const available = await confirm([earlier, unposted], new Set([earlier.id]));
      assert.deepEqual([...available], [[wallet, 96]]);
      assert.equal(await money.availableCredits(db, wallet), 96);
      assert.deepEqual(await checkJobInvariants(db), []);
    });
  });
}
