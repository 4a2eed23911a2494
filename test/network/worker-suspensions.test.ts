/**
 * The operator's suspensions of workers in the database, on every backend: a second suspension
 * keeps the first reason, the list is the latest first, and a node following the table applies
 * what is there at its start and every suspension and reinstatement committed after it.
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { silentLogger } from "../../src/core/index.ts";
import { followWorkerSuspensions, listWorkerSuspensions, NETWORK_MIGRATIONS, reinstateWorker, suspendWorker, WorkerPool } from "../../src/network/index.ts";
import type { Db } from "../../src/store/index.ts";
import { testDatabases } from "../support/db.ts";
import { until } from "../support/eventually.ts";

for (const backend of testDatabases({ sqlite: true })) {
  describe(`worker suspensions on ${backend.name}`, () => {
    let db: Db;
    beforeEach(async () => {
      db = await backend.open({ migrations: NETWORK_MIGRATIONS });
    });
    afterEach(() => db.close());

    test("a suspension is made once, keeps its first reason, and is lifted once", async () => {
      const first = await suspendWorker(db, "worker-a", "wrong outputs");
      assert.equal(first.created, true);
      assert.ok(first.suspension.suspendedAt instanceof Date);
      const again = await suspendWorker(db, "worker-a", "another reason");
      assert.equal(again.created, false);
      assert.deepEqual(again.suspension, first.suspension);

      await new Promise((resolve) => setTimeout(resolve, 5));
      await suspendWorker(db, "worker-b", "flooding");
      assert.deepEqual((await listWorkerSuspensions(db)).map((s) => [s.address, s.reason]), [["worker-b", "flooding"], ["worker-a", "wrong outputs"]]);

      assert.deepEqual(await reinstateWorker(db, "worker-a"), first.suspension);
      assert.equal(await reinstateWorker(db, "worker-a"), undefined);
      assert.deepEqual((await listWorkerSuspensions(db)).map((s) => s.address), ["worker-b"]);
    });

    test("a node applies the suspensions there at its start and those committed later", async () => {
      await suspendWorker(db, "worker-early", "kept");
      const pool = new WorkerPool();
      await followWorkerSuspensions(db, pool, silentLogger());
      assert.equal(pool.isSuspended("worker-early"), true);

      await db.transaction(async (tx) => {
        await suspendWorker(tx, "worker-late", "later");
        await reinstateWorker(tx, "worker-early");
      });
      await until(async () => ({ late: pool.isSuspended("worker-late"), early: pool.isSuspended("worker-early") }), (s) => s.late && !s.early, "the changes to reach the pool");

      await assert.rejects(
        db.transaction(async (tx) => {
          await suspendWorker(tx, "worker-undone", "rolled back");
          throw new Error("the audit row failed");
        }),
        /audit row failed/,
      );
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(pool.isSuspended("worker-undone"), false, "nothing is told of a change that did not commit");
    });
  });
}
