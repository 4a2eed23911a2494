/**
 * The embedded database analyzes its tables as autovacuum would (PGlite runs no autovacuum), so
 * the plans of statements prepared on small tables are made again as the tables grow.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { analyzeWhereDue } from "../../src/store/auto-analyze.ts";
import type { Db } from "../../src/store/index.ts";
import { testDatabases } from "../support/db.ts";

const pglite = testDatabases().find((backend) => backend.name === "pglite")!;

/** PostgreSQL publishes a backend's table counters at most once a second: ask until they show. */
async function analyzedWhenDue(db: Db, table: string): Promise<string[]> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const analyzed = await analyzeWhereDue(db);
    if (analyzed.includes(table) || Date.now() > deadline) return analyzed;
    await sleep(200);
  }
}

async function statistics(db: Db, table: string): Promise<{ changed: bigint; analyzed: boolean; rows: number }> {
  const [row] = await db.query<{ changed: bigint; analyzed: boolean; rows: number }>(
    `SELECT s.n_mod_since_analyze AS changed, s.last_analyze IS NOT NULL AS analyzed, c.reltuples::int AS rows
       FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid WHERE s.relname = $1`,
    [table],
  );
  return row!;
}

describe("the embedded database's statistics", () => {
  let db: Db;
  before(async () => {
    db = await pglite.open();
    await db.exec("CREATE TABLE grown (id int PRIMARY KEY, note text); CREATE TABLE small (id int PRIMARY KEY)");
  });
  after(() => db.close());

  it("analyzes a table once more rows changed than autovacuum's threshold, and leaves a small one alone", async () => {
    await db.query("INSERT INTO grown SELECT g, 'x' FROM generate_series(1, 1000) g");
    await db.query("INSERT INTO small SELECT g FROM generate_series(1, 20) g");
    const analyzed = await analyzedWhenDue(db, "public.grown");
    assert.deepEqual(analyzed, ["public.grown"]);
    assert.deepEqual(await statistics(db, "grown"), { changed: 0n, analyzed: true, rows: 1000 });
    assert.equal((await statistics(db, "small")).analyzed, false);
  });

  it("samples few rows: the statements look rows up by key", async () => {
    assert.deepEqual(await db.query("SHOW default_statistics_target"), [{ default_statistics_target: "10" }]);
  });

  it("analyzes it again only after another tenth of it has changed", async () => {
    await db.query("UPDATE grown SET note = 'y' WHERE id <= 100");
    const deadline = Date.now() + 10_000;
    while ((await statistics(db, "grown")).changed < 100n && Date.now() < deadline) await sleep(200);
    assert.equal((await statistics(db, "grown")).changed, 100n);
    assert.deepEqual(await analyzeWhereDue(db), [], "100 changes are under 50 + 10% of 1,000");
    await db.query("INSERT INTO grown SELECT g, 'z' FROM generate_series(1001, 1100) g");
    assert.deepEqual(await analyzedWhenDue(db, "public.grown"), ["public.grown"]);
    assert.equal((await statistics(db, "grown")).rows, 1100);
  });
});
