/**
 * The catalog's approvals in the database: the launch catalog seeded once and never over an
 * operator's change, approvals and retirements inside a caller's transaction, and every node's
 * in-memory catalog following a change made through any connection, with no restart. On PGlite,
 * SQLite, and on PostgreSQL when DATABASE_URL is set, where two nodes (two pools on one schema)
 * each hold a catalog and see a retirement made through the other.
 */
import assert from "node:assert/strict";
import { after, afterEach, beforeEach, describe, test } from "node:test";
import {
  approveModel,
  CATALOG_MIGRATIONS,
  defaultCatalog,
  LAUNCH_CATALOG,
  listGovernedModels,
  loadGovernedCatalog,
  retireModel,
  seedLaunchCatalog,
  WIRING_MODEL_ID,
  type ModelApproval,
} from "../../src/catalog/index.ts";
import { silentLogger } from "../../src/core/logger.ts";
import { migrate, openDb, type Db } from "../../src/store/index.ts";
import { testDatabases, uniqueSchemaName } from "../support/db.ts";
import { until } from "../support/eventually.ts";

const NEW_MODEL: ModelApproval = {
  id: "example-org/Example-9B-Instruct",
  ownedBy: "Example",
  tier: "standard",
  parameters: "9B",
  contextWindow: 16_384,
  description: "An example model",
  tokenizer: "qwen",
};
const LLAMA_3B = "meta-llama/Llama-3.2-3B-Instruct";

for (const backend of testDatabases({ sqlite: true })) {
  describe(`model governance on ${backend.name}`, () => {
    let db: Db;
    beforeEach(async () => {
      db = await backend.open({ migrations: CATALOG_MIGRATIONS });
    });
    afterEach(() => db.close());

    test("the launch catalog is seeded once: a second seed adds nothing and keeps an operator's retirement", async () => {
      await seedLaunchCatalog(db);
      const first = await listGovernedModels(db);
      assert.deepEqual(first.map((m) => m.id).sort(), LAUNCH_CATALOG.map((m) => m.id).sort());
      for (const m of first) {
        const launch = LAUNCH_CATALOG.find((l) => l.id === m.id)!;
        assert.deepEqual({ ...m, approvedAt: undefined, retiresAt: undefined, retirementReason: undefined }, { ...launch, approvedAt: undefined, retiresAt: undefined, retirementReason: undefined });
        assert.equal(m.retiresAt, null);
      }

      const retiresAt = new Date("2027-03-01T00:00:00Z");
      await retireModel(db, LLAMA_3B, retiresAt, "superseded by a newer 3B");
      await seedLaunchCatalog(db);
      const again = await listGovernedModels(db);
      assert.equal(again.length, LAUNCH_CATALOG.length);
      const retired = again.find((m) => m.id === LLAMA_3B)!;
      assert.equal(retired.retiresAt?.toISOString(), retiresAt.toISOString(), "the restart's seed left the retirement");
      assert.equal(retired.retirementReason, "superseded by a newer 3B");
    });

    test("re-approving clears a retirement and keeps the first approval date; retiring an unknown id says so", async () => {
      await approveModel(db, NEW_MODEL);
      const [approved] = await listGovernedModels(db);
      await retireModel(db, NEW_MODEL.id, new Date(Date.now() - 1000), "license withdrawn");
      await approveModel(db, { ...NEW_MODEL, tier: "pro", description: "An example model, re-approved" });
      const [reapproved] = await listGovernedModels(db);
      assert.equal(reapproved!.retiresAt, null);
      assert.equal(reapproved!.retirementReason, null);
      assert.equal(reapproved!.tier, "pro");
      assert.equal(reapproved!.approvedAt.getTime(), approved!.approvedAt.getTime(), "created stays what callers saw");

      await assert.rejects(retireModel(db, "nobody/Nothing-1B", new Date(), "no reason"), /model 'nobody\/Nothing-1B' is not approved/);
      await assert.rejects(approveModel(db, { ...NEW_MODEL, id: "has space" }), /without spaces/);
      await assert.rejects(approveModel(db, { ...NEW_MODEL, tier: "huge" as ModelApproval["tier"] }), /tier 'huge'/);
      await assert.rejects(retireModel(db, NEW_MODEL.id, new Date(), " "), /needs a reason/);
    });

    test("approvals and retirements take part in the caller's transaction: undone with it, kept when it commits", async () => {
      await assert.rejects(
        db.transaction(async (tx) => {
          await approveModel(tx, NEW_MODEL);
          assert.equal((await listGovernedModels(tx)).length, 1);
          throw new Error("the audit row failed");
        }),
        /audit row failed/,
      );
      assert.deepEqual(await listGovernedModels(db), []);
      await db.transaction(async (tx) => {
        await approveModel(tx, NEW_MODEL);
        await retireModel(tx, NEW_MODEL.id, new Date("2030-01-01T00:00:00Z"), "planned");
      });
      const [model] = await listGovernedModels(db);
      assert.equal(model?.retirementReason, "planned");
    });

    test("a running catalog follows approvals and retirements, with no restart", async () => {
      const catalog = defaultCatalog();
      await loadGovernedCatalog(db, catalog, silentLogger());
      assert.ok(catalog.get(LLAMA_3B), "the launch catalog is loaded at start");
      assert.ok(catalog.get(WIRING_MODEL_ID), "the wiring model stays a local entry");
      assert.equal(catalog.get(NEW_MODEL.id), undefined);

      await approveModel(db, NEW_MODEL);
      await until(async () => catalog.get(NEW_MODEL.id), (m) => m !== undefined, "the approval to reach the catalog");
      assert.equal(catalog.tokenizerFamilies.get(NEW_MODEL.id), "qwen", "its tokenizer family is known for counting");

      const soon = new Date(Date.now() + 60_000);
      await retireModel(db, NEW_MODEL.id, soon, "superseded");
      await until(async () => catalog.retirement(NEW_MODEL.id), (r) => r !== undefined, "the announcement to reach the catalog");
      assert.ok(catalog.get(NEW_MODEL.id), "announced, not yet retired: still served");
      assert.ok(catalog.all().some((m) => m.id === NEW_MODEL.id));
      assert.equal(catalog.get(NEW_MODEL.id, soon.getTime()), undefined, "refused from its date on");
      assert.ok(!catalog.all(soon.getTime()).some((m) => m.id === NEW_MODEL.id));
      assert.ok(catalog.known(NEW_MODEL.id), "still known: its past jobs name it");

      await approveModel(db, NEW_MODEL);
      await until(async () => catalog.retirement(NEW_MODEL.id), (r) => r === undefined, "the re-approval to clear the retirement");
      assert.ok(catalog.get(NEW_MODEL.id, soon.getTime()));
    });

    test("the wiring model cannot be retired: it is no approval", async () => {
      await seedLaunchCatalog(db);
      await assert.rejects(retireModel(db, WIRING_MODEL_ID, new Date(), "no"), /is not approved/);
    });
  });
}

const url = process.env.DATABASE_URL;
describe("two nodes on one PostgreSQL schema", { skip: url ? false : "DATABASE_URL is not set" }, () => {
  const schema = uniqueSchemaName();
  const handles: Db[] = [];
  after(async () => {
    const admin = await openDb({ databaseUrl: url! });
    await admin.exec(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await admin.close();
    for (const db of handles) await db.close();
  });

  test("a retirement made through one node's database handle reaches the other node's catalog", async () => {
    const admin = await openDb({ databaseUrl: url! });
    await admin.exec(`CREATE SCHEMA ${schema}`);
    await admin.close();
    const [a, b] = [await openDb({ databaseUrl: url!, schema }), await openDb({ databaseUrl: url!, schema })];
    handles.push(a, b);
    await migrate(a, CATALOG_MIGRATIONS);
    await migrate(b, CATALOG_MIGRATIONS);
    const [catalogA, catalogB] = [defaultCatalog(), defaultCatalog()];
    // Both nodes seed at start: the second finds the rows there.
    await loadGovernedCatalog(a, catalogA, silentLogger());
    await loadGovernedCatalog(b, catalogB, silentLogger());
    assert.equal((await listGovernedModels(a)).length, LAUNCH_CATALOG.length);

    await retireModel(a, LLAMA_3B, new Date(Date.now() - 1000), "retired by vote");
    await until(async () => catalogB.get(LLAMA_3B), (m) => m === undefined, "node B to see node A's retirement");
    assert.equal(catalogB.retirement(LLAMA_3B)?.reason, "retired by vote");
    await until(async () => catalogA.get(LLAMA_3B), (m) => m === undefined, "node A to see its own retirement");
  });
});
