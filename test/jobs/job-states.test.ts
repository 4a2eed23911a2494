/**
 * The job state table (pure), and `moveJob` applying it on a real database: a move guarded by
 * the status the job leaves, so the loser of a race writes nothing and knows it.
 */
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { afterEach, beforeEach, describe, test } from "node:test";
import { newId } from "../../src/core/ids.ts";
import { JOB_STATUSES, newPendingJob, type JobRecord, type JobStatus } from "../../src/jobs/job-record.ts";
import { getJob, insertJob, JobMovedError, moveJob, mustMoveJob, updateJob } from "../../src/jobs/job-repo.ts";
import { isFinal, JOB_TRANSITIONS, JobTransitionRefused, nextStatus, type JobTrigger } from "../../src/jobs/job-states.ts";
import { JOBS_MIGRATIONS } from "../../src/jobs/schema.ts";
import type { Db } from "../../src/store/index.ts";
import { testDatabases } from "../support/db.ts";

const TRIGGERS = [...new Set(JOB_TRANSITIONS.map((t) => t.trigger))];

describe("the job state table", () => {
  test("every allowed transition leads where the table says", () => {
    let moves = 0;
    for (const row of JOB_TRANSITIONS) {
      for (const from of row.from) {
        assert.equal(nextStatus(from, row.trigger), row.to, `${from} --${row.trigger}-->`);
        moves++;
      }
    }
    assert.equal(moves, 17);
  });

  test("the spec's moves are there", () => {
    const spec: [JobStatus, JobTrigger, JobStatus][] = [
      ["pending", "worker_assigned", "processing"],
      ["processing", "proof_recorded", "settling"],
      ["settling", "settlement_confirmed", "settled"],
      ["pending", "timed_out", "refunded"],
      ["processing", "timed_out", "refunded"],
      ["settled", "dispute_opened", "disputed"],
    ];
    for (const [from, trigger, to] of spec) assert.equal(nextStatus(from, trigger), to);
  });

  test("any other move is refused, by name", () => {
    let refused = 0;
    for (const from of JOB_STATUSES) {
      for (const trigger of TRIGGERS) {
        const allowed = JOB_TRANSITIONS.some((t) => t.trigger === trigger && t.from.includes(from));
        if (allowed) continue;
        assert.throws(() => nextStatus(from, trigger), (e: unknown) => e instanceof JobTransitionRefused && e.from === from && e.trigger === trigger);
        refused++;
      }
    }
    assert.equal(refused, JOB_STATUSES.length * TRIGGERS.length - 17);
    assert.throws(() => nextStatus("settled", "worker_assigned"), /a settled job cannot be moved by worker_assigned/);
  });

  test("nothing leaves refunded, and settled only for a dispute", () => {
    for (const trigger of TRIGGERS) assert.throws(() => nextStatus("refunded", trigger), JobTransitionRefused);
    assert.deepEqual(JOB_TRANSITIONS.filter((t) => t.from.includes("settled")).map((t) => t.trigger), ["dispute_opened"]);
    assert.deepEqual(JOB_STATUSES.filter(isFinal), ["settled", "failed", "refunded"]);
  });

  test("docs/architecture.md shows the same table", async () => {
    const doc = await readFile(new URL("../../docs/architecture.md", import.meta.url), "utf8");
    const rows = doc.split("\n").filter((line) => /^\| [a-z, ]+ \| `[a-z_]+` \|/.test(line));
    assert.deepEqual(
      rows.map((line) => line.split(" | ").slice(0, 3).map((cell) => cell.replace(/^\| /, "").replaceAll("`", ""))),
      JOB_TRANSITIONS.map((t) => [t.from.join(", "), t.trigger, t.to]),
    );
  });
});

for (const backend of testDatabases({ sqlite: true })) {
  describe(`moveJob on ${backend.name}`, () => {
    let db: Db;
    let job: JobRecord;
    beforeEach(async () => {
      db = await backend.open({ migrations: JOBS_MIGRATIONS });
      job = newPendingJob({
        id: newId("job"),
        wallet: "wallet-of-a-test",
        model: "svc-dev/wiring-model",
        tier: "lite",
        creditsLocked: 4,
        maxTokens: 100,
        promptTokens: 10,
        escrowAddress: "escrow-of-a-test",
        escrowTx: "escrow-signature",
      });
      await insertJob(db, job);
    });
    afterEach(() => db.close());

    test("a move writes the new status and its changes, and the record follows", async () => {
      assert.equal(await moveJob(db, job, "worker_assigned", { workerAddress: "worker-1", workerStaked: true }), true);
      assert.equal(job.status, "processing");
      const stored = (await getJob(db, job.id))!;
      assert.equal(stored.status, "processing");
      assert.equal(stored.workerAddress, "worker-1");
      assert.equal(stored.workerStaked, true);
    });

    test("a step holding a stale copy loses the race and writes nothing", async () => {
      const stale = (await getJob(db, job.id))!;
      assert.equal(await moveJob(db, job, "worker_assigned", { workerAddress: "worker-1" }), true);
      assert.equal(await moveJob(db, stale, "escrow_given_up", { failureReason: "escrow_failed" }), false);
      assert.equal(stale.status, "pending", "the loser's record is left as it was");
      const stored = (await getJob(db, job.id))!;
      assert.equal(stored.status, "processing");
      assert.equal(stored.failureReason, null);
      await assert.rejects(mustMoveJob(db, stale, "worker_assigned"), (e: unknown) => e instanceof JobMovedError && e.expected === "pending");
    });

    test("two racing moves from the same status: exactly one wins", async () => {
      const [a, b] = [(await getJob(db, job.id))!, (await getJob(db, job.id))!];
      const won = await Promise.all([
        moveJob(db, a, "escrow_given_up", { failureReason: "escrow_failed" }),
        moveJob(db, b, "worker_assigned", { workerAddress: "worker-1" }),
      ]);
      assert.equal(won.filter(Boolean).length, 1);
      const stored = (await getJob(db, job.id))!;
      assert.equal(stored.status, won[0] ? "failed" : "processing");
    });

    test("a refused move throws before touching the row; updateJob cannot write a status", async () => {
      await assert.rejects(moveJob(db, job, "settlement_confirmed"), JobTransitionRefused);
      await assert.rejects(updateJob(db, job.id, { status: "settled" } as never), /only through moveJob/);
      assert.equal((await getJob(db, job.id))!.status, "pending");
    });
  });
}
