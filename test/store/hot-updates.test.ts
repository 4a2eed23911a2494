/**
 * The rows a job updates as it runs (its own, and its chain actions') are updated in place: no
 * index names a column those updates change, so each update is HOT, writes no index entry, and
 * leaves nothing for VACUUM to find through the indexes (migrations jobs/005 and chain/003). The
 * counts are the current transaction's own, which PostgreSQL keeps as it goes. Real database:
 * PGlite, and PostgreSQL with DATABASE_URL.
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { newId } from "../../src/core/ids.ts";
import { newPendingJob } from "../../src/jobs/job-record.ts";
import { insertJob, markEscrowsClosed, mustMoveJob } from "../../src/jobs/job-repo.ts";
import { SERVICE_MIGRATIONS } from "../../src/service.ts";
import type { Db } from "../../src/store/index.ts";
import { testDatabases } from "../support/db.ts";

for (const backend of testDatabases()) {
  describe(`updates in place on ${backend.name}`, () => {
    let db: Db;
    beforeEach(async () => {
      db = await backend.open({ migrations: SERVICE_MIGRATIONS });
    });
    afterEach(() => db.close());

    /** The current transaction's updates of `table`, and how many of them were HOT. */
    const updatesOf = (tx: Db, table: string) =>
      tx.query<{ updated: number; hot: number }>(
        "SELECT pg_stat_get_xact_tuples_updated($1::regclass)::int AS updated, pg_stat_get_xact_tuples_hot_updated($1::regclass)::int AS hot",
        [table],
      );

    test("a job's moves through its life, and the sweep closing its escrow, update its row in place", async () => {
      await db.transaction(async (tx) => {
        const job = newPendingJob({ id: newId("job"), wallet: "w", model: "m", tier: "lite", creditsLocked: 4, maxTokens: 100, promptTokens: 5, escrowAddress: "e", escrowTx: "s" });
        await insertJob(tx, job, "node_a");
        await mustMoveJob(tx, job, "worker_assigned", { workerAddress: "worker-1" });
        await mustMoveJob(tx, job, "proof_recorded", { settlementTx: "settle", creditsCharged: 2 });
        await mustMoveJob(tx, job, "settlement_confirmed", { completedAt: new Date() });
        await markEscrowsClosed(tx, [job.id]);
        assert.deepEqual(await updatesOf(tx, "jobs"), [{ updated: 4, hot: 4 }]);
      });
    });

    test("marking a chain action confirmed, failed or dropped updates its row in place", async () => {
      await db.transaction(async (tx) => {
        await tx.query("INSERT INTO chain_actions (signature, kind, subject, wire) VALUES ('sig-1', 'escrow', 'job_1', '\\x01'), ('sig-2', 'refund', 'job_2', '\\x02')");
        await tx.query("UPDATE chain_actions SET state = 'confirmed', slot = 7, updated_at = now() WHERE signature = 'sig-1'");
        await tx.query("UPDATE chain_actions SET state = 'failed', error = 'refused', updated_at = now() WHERE signature = 'sig-2'");
        assert.deepEqual(await updatesOf(tx, "chain_actions"), [{ updated: 2, hot: 2 }]);
      });
    });
  });
}
