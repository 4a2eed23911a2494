/**
 * The queues that stand in for indexes on the jobs table's changing columns (job-repo.ts,
 * migration jobs/005_job_queues): a job is in each queue exactly while the reads that use it
 * (recovery, arbitration at start, the sweeps past the dispute window) must find it, and a
 * database written before the queues gets them filled. Real database: PGlite, and PostgreSQL
 * with DATABASE_URL.
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { newId } from "../../src/core/ids.ts";
import { parseChatRequest } from "../../src/http/chat-request.ts";
import { newPendingJob, type JobRecord } from "../../src/jobs/job-record.ts";
import {
  disputedJobs,
  forgetRequests,
  getJob,
  insertJob,
  jobsWithEscrowToClose,
  markEscrowsClosed,
  moveJob,
  mustMoveJob,
  unfinishedJobs,
} from "../../src/jobs/job-repo.ts";
import { JOBS_MIGRATIONS } from "../../src/jobs/schema.ts";
import { migrate, type Db } from "../../src/store/index.ts";
import { testDatabases } from "../support/db.ts";

/** A request as the gateway keeps it, parsed from the caller's body. */
const request = parseChatRequest({ model: "m", messages: [{ role: "user", content: "Hello" }], max_tokens: 100, seed: 7 });
const later = () => new Date(Date.now() + 60_000);

for (const backend of testDatabases({ sqlite: true })) {
  describe(`job queues on ${backend.name}`, () => {
    let db: Db;
    beforeEach(async () => {
      db = await backend.open({ migrations: JOBS_MIGRATIONS });
    });
    afterEach(() => db.close());

    const queuesOf = async (id: string) =>
      (await db.query<{ queue: string }>("SELECT queue FROM job_queues WHERE job_id = $1 ORDER BY queue", [id])).map((r) => r.queue);

    async function running(nodeId = "node_a"): Promise<JobRecord> {
      const job = newPendingJob({ id: newId("job"), wallet: "w", model: "m", tier: "lite", creditsLocked: 4, maxTokens: 100, promptTokens: 5, escrowAddress: "e", escrowTx: "s", request });
      await insertJob(db, job, nodeId);
      return job;
    }

    test("a job is in the queues its life puts it in, and the reads find it there", async () => {
      const job = await running();
      assert.deepEqual(await queuesOf(job.id), ["unfinished"]);
      await mustMoveJob(db, job, "worker_assigned", { workerAddress: "worker-1" });
      await mustMoveJob(db, job, "proof_recorded", { settlementTx: "settle", creditsCharged: 2 });
      assert.deepEqual(await queuesOf(job.id), ["unfinished"]);
      assert.deepEqual((await unfinishedJobs(db, { nodeId: "node_a", orUnowned: false })).map((j) => j.id), [job.id]);
      assert.deepEqual(await unfinishedJobs(db, { nodeId: "node_b", orUnowned: true }), [], "another node's job is not this one's");

      await mustMoveJob(db, job, "settlement_confirmed", { completedAt: new Date(), lastTokenAt: new Date() });
      assert.deepEqual(await queuesOf(job.id), ["escrow_to_close", "request_kept"]);
      assert.deepEqual(await unfinishedJobs(db), []);
      assert.deepEqual(await jobsWithEscrowToClose(db, new Date(0), 20), [], "not before its window has passed");
      assert.deepEqual(await jobsWithEscrowToClose(db, later(), 20, "node_b"), [], "another node's job is not this one's to close");
      assert.deepEqual(await jobsWithEscrowToClose(db, later(), 20, "node_a"), [job.id]);

      await mustMoveJob(db, job, "dispute_opened", { disputeHash: "h", disputeTx: "d", disputedAt: new Date() });
      assert.deepEqual(await queuesOf(job.id), ["disputed"], "arbitration needs its escrow record and its request");
      assert.deepEqual((await disputedJobs(db)).map((j) => j.id), [job.id]);
      assert.deepEqual(await jobsWithEscrowToClose(db, later(), 20), [], "a disputed job's escrow stays open");
      await forgetRequests(db, later());
      assert.deepEqual((await getJob(db, job.id))!.request, request, "a disputed job keeps its request for arbitration");

      await mustMoveJob(db, job, "dispute_resolved", { disputeOutcome: "rejected", request: null });
      assert.deepEqual(await disputedJobs(db), []);
      assert.deepEqual(await queuesOf(job.id), ["escrow_to_close"], "arbitration cleared its request");
      assert.deepEqual(await jobsWithEscrowToClose(db, later(), 20), [job.id]);
      await markEscrowsClosed(db, [job.id]);
      assert.equal((await getJob(db, job.id))!.escrowClosed, true);
      assert.deepEqual(await queuesOf(job.id), []);
    });

    test("a move that lost its race moves the job between no queues", async () => {
      const job = await running();
      const stale = { ...job };
      await mustMoveJob(db, job, "timed_out", { completedAt: new Date() });
      assert.equal(await moveJob(db, stale, "refund_recorded", { completedAt: new Date() }), false);
      assert.deepEqual(await queuesOf(job.id), ["escrow_to_close", "request_kept"]);
      assert.equal((await getJob(db, job.id))!.status, "refunded");
    });

    test("a database written before the queues has each of its jobs queued as its status says", async () => {
      const before = JOBS_MIGRATIONS.findIndex((m) => m.id === "jobs/005_job_queues");
      await db.exec(`DROP TABLE jobs; DROP TABLE job_queues; DROP TABLE chain_actions; DROP TABLE schema_migrations;
        ${backend.name === "sqlite" ? "DROP TABLE" : "DROP SEQUENCE"} escrow_table_id_blocks`);
      await migrate(db, JOBS_MIGRATIONS.slice(0, before));
      const rows: [string, string, boolean, boolean][] = [
        ["job_a", "processing", false, true],
        ["job_b", "settled", false, true],
        ["job_c", "settled", true, false],
        ["job_d", "disputed", false, true],
        ["job_e", "failed", false, false],
      ];
      for (const [id, status, escrowClosed, kept] of rows) {
        await db.query(
          `INSERT INTO jobs (id, wallet, model, tier, status, locked_credits, max_tokens, created_at, escrow_closed, request)
           VALUES ($1, 'w', 'm', 'lite', $2, 4, 100, now(), $3, $4)`,
          [id, status, escrowClosed, kept ? JSON.stringify(request) : null],
        );
      }
      await migrate(db, JOBS_MIGRATIONS);
      const queued = await db.query<{ queue: string; job_id: string }>("SELECT queue, job_id FROM job_queues ORDER BY job_id, queue");
      assert.deepEqual(
        queued.map((r) => `${r.job_id} ${r.queue}`),
        ["job_a unfinished", "job_b escrow_to_close", "job_b request_kept", "job_d disputed", "job_e escrow_to_close"],
      );
    });
  });
}
