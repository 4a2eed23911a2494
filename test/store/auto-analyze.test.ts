/**
 * The store analyzes its tables as autovacuum would where no autovacuum runs (PGlite always, a
 * PostgreSQL server with it turned off), so the plans of statements prepared on small tables are
 * made again as the tables grow.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { analyzeWhereDue, autovacuumRuns } from "../../src/store/auto-analyze.ts";
import type { Db } from "../../src/store/index.ts";
import { testDatabases } from "../support/db.ts";

interface Statistics {
  changed: bigint;
  analyzed: boolean;
  rows: number;
}

async function statistics(db: Db, table: string): Promise<Statistics> {
  const [row] = await db.query<Statistics>(
    `SELECT s.n_mod_since_analyze AS changed, s.last_analyze IS NOT NULL AS analyzed, c.reltuples::int AS rows
       FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
      WHERE s.relname = $1 AND s.schemaname = current_schema()`,
    [table],
  );
  return row ?? { changed: 0n, analyzed: false, rows: -1 };
}

/**
 * PostgreSQL publishes a backend's table counters about once a second, and the store's own check
 * may analyze a table first: asks (calling `check` each time, if given) until `done` holds.
 */
async function until(db: Db, table: string, done: (s: Statistics) => boolean, check?: () => Promise<unknown>, seconds = 10): Promise<Statistics> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    await check?.();
    const now = await statistics(db, table);
    if (done(now) || Date.now() > deadline) return now;
    await sleep(200);
  }
}

for (const backend of testDatabases()) {
  describe(`table statistics on ${backend.name}`, () => {
    let db: Db;
    before(async () => {
      db = await backend.open();
      await db.exec("CREATE TABLE grown (id int PRIMARY KEY, note text); CREATE TABLE small (id int PRIMARY KEY)");
    });
    after(() => db.close());

    const analyzed = (s: Statistics) => s.analyzed && s.changed === 0n;

    it("analyzes a table once more rows changed than autovacuum's threshold, and leaves a small one alone", async () => {
      await db.query("INSERT INTO grown SELECT g, 'x' FROM generate_series(1, 1000) g");
      await db.query("INSERT INTO small SELECT g FROM generate_series(1, 20) g");
      assert.deepEqual(await until(db, "grown", analyzed, () => analyzeWhereDue(db)), { changed: 0n, analyzed: true, rows: 1000 });
      assert.deepEqual(await until(db, "small", (s) => s.changed === 20n), { changed: 20n, analyzed: false, rows: -1 });
      assert.deepEqual(await analyzeWhereDue(db), []);
    });

    it("analyzes it again only after another tenth of it has changed", async () => {
      await db.query("UPDATE grown SET note = 'y' WHERE id <= 100");
      assert.equal((await until(db, "grown", (s) => s.changed === 100n)).changed, 100n);
      assert.deepEqual(await analyzeWhereDue(db), [], "100 changes are under 50 + 10% of 1,000");
      await db.query("INSERT INTO grown SELECT g, 'z' FROM generate_series(1001, 1100) g");
      assert.deepEqual(await until(db, "grown", analyzed, () => analyzeWhereDue(db)), { changed: 0n, analyzed: true, rows: 1100 });
    });

    it("analyzes on its own every 10 s where the server's autovacuum does not run", async (t) => {
      if (backend.name === "postgres" && (await autovacuumRuns(db))) return t.skip("this server's autovacuum keeps the statistics");
      await db.exec("CREATE TABLE timed (id int PRIMARY KEY)");
      await db.query("INSERT INTO timed SELECT g FROM generate_series(1, 500) g");
      assert.deepEqual(await until(db, "timed", analyzed, undefined, 25), { changed: 0n, analyzed: true, rows: 500 });
    });

    if (backend.name === "pglite") {
      it("samples few rows: the statements look rows up by key", async () => {
        assert.deepEqual(await db.query("SHOW default_statistics_target"), [{ default_statistics_target: "10" }]);
      });
    }
  });
}
