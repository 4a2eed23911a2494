/**
 * A node's lease and its deployment's id in the database, on every backend (lease.test.ts runs
 * whole nodes on PostgreSQL): a live node renews its lease, takes over a dead node's and deletes
 * it once its work is done, lets its own run out when it stops, and claims it again at a restart.
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { silentLogger } from "../../src/core/index.ts";
import { deploymentId, NODES_MIGRATIONS, NodeLease } from "../../src/nodes/index.ts";
import { violatedConstraint, type Db } from "../../src/store/index.ts";
import { testDatabases } from "../support/db.ts";
import { until } from "../support/eventually.ts";

const LEASE_MS = 150;

for (const backend of testDatabases({ sqlite: true })) {
  describe(`node leases on ${backend.name}`, () => {
    let db: Db;
    beforeEach(async () => {
      db = await backend.open({ migrations: NODES_MIGRATIONS });
    });
    afterEach(() => db.close());

    const leaseUntil = async (nodeId: string) => {
      const [row] = await db.query<{ lease_until: Date }>("SELECT lease_until FROM gateway_nodes WHERE node_id = $1", [nodeId]);
      return row?.lease_until;
    };

    test("the deployment has one id, made once, and one row only", async () => {
      const id = await deploymentId(db);
      assert.match(id, /^[0-9a-f]{32}$/);
      assert.equal(await deploymentId(db), id);
      await assert.rejects(db.query("INSERT INTO deployment (id) VALUES ('another')"), (error) => violatedConstraint(error) === "deployment_pkey");
      await assert.rejects(db.query("INSERT INTO deployment (one_row, id) VALUES (false, 'another')"), (error) => violatedConstraint(error) === "deployment_one_row_check");
    });

    test("a live node renews its lease, finishes a dead node's work, and lets its lease run out when it stops", async () => {
      await db.query("INSERT INTO gateway_nodes (node_id, incarnation, lease_until) VALUES ($1, 'gone', $2::timestamptz)", ["node_dead", new Date(Date.now() - 1000)]);
      const takenOver: string[] = [];
      const lease = await NodeLease.acquire({ db, nodeId: "node_live", logger: silentLogger(), leaseMs: LEASE_MS, takeOver: async (dead) => void takenOver.push(dead) });
      const first = (await leaseUntil("node_live"))!;
      assert.ok(first.getTime() > Date.now(), "the lease runs into the future");
      lease.start();
      await until(async () => leaseUntil("node_dead"), (until) => until === undefined, "the dead node's lease to be deleted");
      assert.deepEqual(takenOver, ["node_dead"]);
      await until(async () => (await leaseUntil("node_live"))!, (until) => until > first, "the lease to be renewed");

      await lease.release();
      assert.ok((await leaseUntil("node_live"))!.getTime() <= Date.now(), "released, the lease has run out");

      // A restart under the same id claims the run-out lease at once.
      const again = await NodeLease.acquire({ db, nodeId: "node_live", logger: silentLogger(), leaseMs: LEASE_MS, takeOver: async () => undefined });
      assert.ok((await leaseUntil("node_live"))!.getTime() > Date.now());
      await again.release();
    });
  });
}
