import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { migrate, MigrationChangedError, openDb, sqlState, type Db, type Migration } from "../../src/store/index.ts";
import { testDatabases, uniqueSchemaName } from "../support/db.ts";

const MIGRATIONS: Migration[] = [
  { id: "test/001_widgets", sql: "CREATE TABLE widgets (id text PRIMARY KEY)" },
  { id: "test/002_widget_size", sql: "ALTER TABLE widgets ADD COLUMN size bigint NOT NULL DEFAULT 0; CREATE INDEX widgets_size ON widgets (size)" },
];

async function appliedIds(db: Db): Promise<string[]> {
  return (await db.query<{ id: string }>("SELECT id FROM schema_migrations ORDER BY applied_at, id")).map((r) => r.id);
}

for (const backend of testDatabases()) {
  describe(`migrate on ${backend.name}`, () => {
    it("applies each migration once and is idempotent", async () => {
      const db = await backend.open();
      try {
        assert.deepEqual(await migrate(db, MIGRATIONS), ["test/001_widgets", "test/002_widget_size"]);
        assert.deepEqual(await migrate(db, MIGRATIONS), []);
        assert.deepEqual(await appliedIds(db), ["test/001_widgets", "test/002_widget_size"]);
        await db.query("INSERT INTO widgets (id, size) VALUES ('w', 3)");
      } finally {
        await db.close();
      }
    });

    it("applies only the new ones when a list grows, and lists from several parts coexist", async () => {
      const db = await backend.open();
      try {
        await migrate(db, MIGRATIONS.slice(0, 1));
        assert.deepEqual(await migrate(db, MIGRATIONS), ["test/002_widget_size"]);
        assert.deepEqual(await migrate(db, [{ id: "other/001", sql: "CREATE TABLE others (id int)" }]), ["other/001"]);
        assert.equal((await appliedIds(db)).length, 3);
      } finally {
        await db.close();
      }
    });

    it("leaves a failing migration unapplied and keeps the ones before it", async () => {
      const db = await backend.open();
      try {
        const broken = { id: "test/003_broken", sql: "CREATE TABLE half (id int); SELECT * FROM no_such_table" };
        await assert.rejects(migrate(db, [...MIGRATIONS, broken]), (err) => sqlState(err) === "42P01");
        assert.deepEqual(await appliedIds(db), ["test/001_widgets", "test/002_widget_size"]);
        await assert.rejects(db.query("SELECT * FROM half"), (err) => sqlState(err) === "42P01");
      } finally {
        await db.close();
      }
    });

    it("refuses a migration edited after it was applied", async () => {
      const db = await backend.open();
      try {
        await migrate(db, MIGRATIONS);
        const edited = [MIGRATIONS[0]!, { ...MIGRATIONS[1]!, sql: MIGRATIONS[1]!.sql + ";" }];
        await assert.rejects(migrate(db, edited), MigrationChangedError);
      } finally {
        await db.close();
      }
    });

    it("refuses duplicate ids in one list", async () => {
      const db = await backend.open();
      try {
        await assert.rejects(migrate(db, [MIGRATIONS[0]!, MIGRATIONS[0]!]), /duplicate/);
      } finally {
        await db.close();
      }
    });

    it("survives concurrent runs on one Db", async () => {
      const db = await backend.open();
      try {
        const results = await Promise.all(Array.from({ length: 4 }, () => migrate(db, MIGRATIONS)));
        assert.equal(results.flat().length, MIGRATIONS.length);
        assert.deepEqual(await appliedIds(db), ["test/001_widgets", "test/002_widget_size"]);
      } finally {
        await db.close();
      }
    });
  });
}

const url = process.env.DATABASE_URL;
describe("migrate on postgres from several nodes at once", { skip: url ? false : "DATABASE_URL not set" }, () => {
  it("applies each migration exactly once while every node succeeds", async () => {
    const schema = uniqueSchemaName();
    const admin = await openDb({ databaseUrl: url!, poolSize: 1 });
    await admin.exec(`CREATE SCHEMA ${schema}`);
    const nodes = await Promise.all(Array.from({ length: 5 }, () => openDb({ databaseUrl: url!, schema, poolSize: 2 })));
    try {
      const results = await Promise.all(nodes.map((node) => migrate(node, MIGRATIONS)));
      assert.deepEqual(results.flat().sort(), MIGRATIONS.map((m) => m.id).sort());
      assert.deepEqual(await appliedIds(nodes[0]!), MIGRATIONS.map((m) => m.id));
    } finally {
      await Promise.all(nodes.map((node) => node.close()));
      await admin.exec(`DROP SCHEMA ${schema} CASCADE`);
      await admin.close();
    }
  });
});
