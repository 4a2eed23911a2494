/**
 * The store vacuums and analyzes its tables as autovacuum would where no autovacuum runs (PGlite
 * always, a PostgreSQL server with it turned off): the plans of statements prepared on small
 * tables are made again as the tables grow, dead row versions are removed, and insert-only tables
 * are vacuumed too. On PGlite, where a VACUUM holds the thread, it runs in steps of a fixed number
 * of rows, and waits for a quiet moment, or until it has waited long enough.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { AutoVacuum, autovacuumRuns, maintain, tablesDue } from "../../src/store/auto-vacuum.ts";
import type { Db } from "../../src/store/index.ts";
import { testDatabases } from "../support/db.ts";
import { until as eventually } from "../support/eventually.ts";

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

async function deadRows(db: Db, table: string): Promise<{ dead: bigint; vacuumed: boolean }> {
  const [row] = await db.query<{ dead: bigint; vacuumed: boolean }>(
    "SELECT n_dead_tup AS dead, last_vacuum IS NOT NULL AS vacuumed FROM pg_stat_user_tables WHERE relname = $1 AND schemaname = current_schema()",
    [table],
  );
  return row!;
}

async function schemaOf(db: Db): Promise<string> {
  const [{ schema }] = (await db.query<{ schema: string }>("SELECT current_schema() AS schema")) as [{ schema: string }];
  return schema;
}

/** Vacuums and analyzes what is due now; returns what it analyzed. */
async function analyzeDue(db: Db): Promise<string[]> {
  return (await maintain(db, await tablesDue(db))).analyzed;
}

/**
 * PostgreSQL publishes a backend's table counters about once a second, and the store's own check
 * may analyze a table first: asks (calling `check` each time, if given) until `done` holds.
 */
function until(db: Db, table: string, done: (s: Statistics) => boolean, check?: () => Promise<unknown>, seconds = 10): Promise<Statistics> {
  const read = async () => {
    await check?.();
    return statistics(db, table);
  };
  return eventually(read, done, `${table}'s statistics`, seconds * 1000);
}

/** Waits until the table's dead rows, as the statistics publish them, are `dead`. */
function untilDead(db: Db, table: string, dead: bigint): Promise<{ dead: bigint; vacuumed: boolean }> {
  return eventually(() => deadRows(db, table), (now) => now.dead === dead, `${dead} dead rows in ${table}`, 10_000);
}

/** Waits for `inserted` rows counted new in `table` since its last VACUUM. */
function untilInserted(db: Db, table: string, inserted: bigint): Promise<bigint> {
  const read = async () => {
    const [row] = await db.query<{ n: bigint }>("SELECT n_ins_since_vacuum AS n FROM pg_stat_user_tables WHERE relname = $1 AND schemaname = current_schema()", [table]);
    return row!.n;
  };
  return eventually(read, (n) => n === inserted, `${inserted} rows new in ${table}`, 10_000);
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
      assert.deepEqual(await until(db, "grown", analyzed, () => analyzeDue(db)), { changed: 0n, analyzed: true, rows: 1000 });
      assert.deepEqual(await until(db, "small", (s) => s.changed === 20n), { changed: 20n, analyzed: false, rows: -1 });
      assert.deepEqual(await analyzeDue(db), []);
    });

    it("analyzes it again only after another tenth of it has changed", async () => {
      await db.query("UPDATE grown SET note = 'y' WHERE id <= 100");
      assert.equal((await until(db, "grown", (s) => s.changed === 100n)).changed, 100n);
      assert.deepEqual(await analyzeDue(db), [], "100 changes are under 50 + 10% of 1,000");
      await db.query("INSERT INTO grown SELECT g, 'z' FROM generate_series(1001, 1100) g");
      assert.deepEqual(await until(db, "grown", analyzed, () => analyzeDue(db)), { changed: 0n, analyzed: true, rows: 1100 });
    });

    it("vacuums a table once more than autovacuum's threshold of its rows are dead", async () => {
      await db.exec("CREATE TABLE churned (id int PRIMARY KEY, status text); CREATE INDEX churned_open ON churned (status) WHERE status = 'open'");
      await db.query("INSERT INTO churned SELECT g, 'open' FROM generate_series(1, 1000) g");
      await until(db, "churned", analyzed, () => analyzeDue(db));
      await db.query("UPDATE churned SET status = 'done' WHERE id <= 200");
      await untilDead(db, "churned", 200n);
      assert.equal((await tablesDue(db)).find((t) => t.name.endsWith(".churned"))?.vacuum ?? false, false, "200 dead rows are under 50 + 20% of 1,000");
      await db.query("UPDATE churned SET status = 'done' WHERE id > 900");
      await untilDead(db, "churned", 300n);
      const due = await tablesDue(db);
      assert.deepEqual(due.find((t) => t.name.endsWith(".churned")), { name: `${await schemaOf(db)}.churned`, vacuum: true, analyze: true });
      assert.ok((await maintain(db, due)).vacuumed.some((name) => name.endsWith(".churned")));
      assert.deepEqual(await untilDead(db, "churned", 0n), { dead: 0n, vacuumed: true });
    });

    it("vacuums an insert-only table once more rows than autovacuum's insert threshold are new", async () => {
      await db.exec("CREATE TABLE appended (id int PRIMARY KEY)");
      await db.query("INSERT INTO appended SELECT g FROM generate_series(1, 1000) g");
      await until(db, "appended", analyzed, () => analyzeDue(db));
      await db.query("INSERT INTO appended SELECT g FROM generate_series(1001, 1150) g");
      await untilInserted(db, "appended", 1150n);
      const due = () => tablesDue(db).then((tables) => tables.find((t) => t.name.endsWith(".appended"))?.vacuum ?? false);
      assert.equal(await due(), false, "1,150 new rows are under 1,000 + 20% of 1,000");
      await db.query("INSERT INTO appended SELECT g FROM generate_series(1151, 1300) g");
      await untilInserted(db, "appended", 1300n);
      assert.equal(await due(), true);
    });

    it("with steps, vacuums a table once that many of its rows are dead or new, whatever its size", async () => {
      await db.exec("CREATE TABLE stepped (id int PRIMARY KEY, note text)");
      await db.query("INSERT INTO stepped SELECT g, 'x' FROM generate_series(1, 1000) g");
      await until(db, "stepped", analyzed, () => analyzeDue(db));
      await db.query("VACUUM stepped");
      await db.query("UPDATE stepped SET note = 'y' WHERE id <= 60");
      await db.query("INSERT INTO stepped SELECT g, 'z' FROM generate_series(1001, 1050) g");
      await untilInserted(db, "stepped", 50n);
      const due = (stepRows?: number) => tablesDue(db, stepRows).then((tables) => tables.find((t) => t.name.endsWith(".stepped"))?.vacuum ?? false);
      assert.equal(await due(), false, "60 dead rows are under 50 + 20% of 1,000");
      assert.equal(await due(120), false);
      assert.equal(await due(100), true, "60 dead and 50 new rows are over a step of 100");
    });

    it("analyzes on its own every 10 s where the server's autovacuum does not run", async (t) => {
      if (backend.name === "postgres" && (await autovacuumRuns(db))) return t.skip("this server's autovacuum keeps the statistics");
      await db.exec("CREATE TABLE timed (id int PRIMARY KEY)");
      await db.query("INSERT INTO timed SELECT g FROM generate_series(1, 500) g");
      assert.deepEqual(await until(db, "timed", analyzed, undefined, 25), { changed: 0n, analyzed: true, rows: 500 });
    });

    if (backend.name === "pglite") {
      it("on the embedded database, a VACUUM waits for a quiet moment, or until it has waited long enough", async () => {
        await db.exec("CREATE TABLE waiting (id int PRIMARY KEY, status text); CREATE INDEX waiting_open ON waiting (status) WHERE status = 'open'");
        await db.query("INSERT INTO waiting SELECT g, 'open' FROM generate_series(1, 100) g");
        await db.query("UPDATE waiting SET status = 'done'");
        // Due (its dead rows published) before the checks begin, so a check that skips it is waiting.
        assert.equal((await untilDead(db, "waiting", 100n)).dead, 100n);
        // The quietness is this test's to set: a database kept busy for a minute is not a test.
        const quietness = { quietForMs: () => 0 };
        let vacuum = new AutoVacuum(db, { quietness, intervalMs: 50 });
        await sleep(400);
        await vacuum.stop();
        assert.deepEqual(await deadRows(db, "waiting"), { dead: 100n, vacuumed: false }, "busy: several checks, no VACUUM");
        quietness.quietForMs = () => 1_000;
        vacuum = new AutoVacuum(db, { quietness, intervalMs: 50 });
        assert.deepEqual(await untilDead(db, "waiting", 0n), { dead: 0n, vacuumed: true }, "quiet: vacuumed");
        await vacuum.stop();
        await db.query("UPDATE waiting SET status = 'open'");
        assert.equal((await untilDead(db, "waiting", 100n)).dead, 100n);
        quietness.quietForMs = () => 0;
        vacuum = new AutoVacuum(db, { quietness, intervalMs: 50, maxDeferMs: 300 });
        assert.deepEqual(await untilDead(db, "waiting", 0n), { dead: 0n, vacuumed: true }, "busy, but due for longer than it may wait: vacuumed");
        await vacuum.stop();
      });

      it("samples few rows: the statements look rows up by key", async () => {
        assert.deepEqual(await db.query("SHOW default_statistics_target"), [{ default_statistics_target: "1" }]);
      });
    }
  });
}
