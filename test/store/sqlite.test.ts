import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { migrate, minusMs, msBetween, plusMs, sqlState, violatedConstraint, type Db } from "../../src/store/index.ts";
import { openSqlite } from "../../src/store/sqlite.ts";

describe("store on SQLite", () => {
  let db: Db;
  before(async () => {
    db = await openSqlite();
    await db.exec(`
      CREATE TABLE items (id text PRIMARY KEY, n bigint NOT NULL DEFAULT 0, slot integer,
        CONSTRAINT items_n_not_negative CHECK (n >= 0));
      CREATE UNIQUE INDEX items_one_per_slot ON items (slot) WHERE slot IS NOT NULL;
      CREATE TABLE typed (big bigint, at timestamptz, doc jsonb, flag boolean, bytes blob, i integer, label text,
        made_at timestamptz NOT NULL DEFAULT (now()))`);
  });
  after(() => db.close());

  const count = async (conn: Db = db) => (await conn.query<{ c: bigint }>("SELECT count(*) AS c FROM items"))[0]!.c;

  it("reads back the JavaScript types PostgreSQL's backends return, through RETURNING, aliases and subqueries", async () => {
    const row = { big: 2n ** 62n + 7n, at: new Date("2026-11-21T10:00:00.123Z"), doc: { a: [1, "x"], n: null }, flag: true, bytes: new Uint8Array([0, 255, 7]), i: 5, label: "first" };
    const returned = await db.query("INSERT INTO typed (big, at, doc, flag, bytes, i, label) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING big, at, doc, flag, bytes, i, label", Object.values(row));
    assert.deepEqual(returned.map((r) => ({ ...r, bytes: new Uint8Array(r.bytes as Buffer) })), [row]);
    const [read] = await db.query("SELECT t.flag AS on_, t.big, made_at, count(*) OVER () AS c FROM (SELECT * FROM typed) AS t");
    assert.deepEqual({ ...read, made_at: undefined }, { on_: true, big: row.big, made_at: undefined, c: 1n });
    assert.ok(read!.made_at instanceof Date && Math.abs(read!.made_at.getTime() - Date.now()) < 60_000, "a default of now() reads as a Date");
    const [empty] = await db.query("INSERT INTO typed (label) VALUES ($1) RETURNING big, at, doc, flag, bytes, i", ["nulls"]);
    assert.deepEqual(empty, { big: null, at: null, doc: null, flag: null, bytes: null, i: null });
  });

  it("binds $n by number, once however often the text uses it, and arrays as JSON for json_each", async () => {
    assert.deepEqual(await db.query("SELECT $2 AS b, $1 AS a, $2 AS b2", ["x", 9n]), [{ b: 9n, a: "x", b2: 9n }]);
    const big = 2n ** 63n - 1n;
    const values = await db.query<{ value: unknown }>("SELECT value FROM json_each($1) ORDER BY key", [[1n, big, "id's", null]]);
    assert.deepEqual(values.map((v) => v.value), [1n, big, "id's", null]);
  });

  it("commits a transaction's work and rolls back a failed one's", async () => {
    await db.transaction(async (tx) => {
      await tx.query("INSERT INTO items (id) VALUES ($1)", ["a"]);
    });
    await assert.rejects(
      db.transaction(async (tx) => {
        await tx.query("INSERT INTO items (id) VALUES ($1)", ["b"]);
        throw new Error("undo");
      }),
      /undo/,
    );
    assert.deepEqual(await db.query("SELECT id FROM items ORDER BY id"), [{ id: "a" }]);
  });

  it("undoes a failed nested transaction alone, as a savepoint", async () => {
    await db.transaction(async (tx) => {
      await tx.query("INSERT INTO items (id) VALUES ($1)", ["outer"]);
      await assert.rejects(tx.transaction(async (inner) => {
        await inner.query("INSERT INTO items (id) VALUES ($1)", ["inner"]);
        await inner.query("INSERT INTO items (id) VALUES ($1)", ["outer"]);
      }));
    });
    assert.deepEqual(await db.query("SELECT id FROM items WHERE id IN ('outer', 'inner')"), [{ id: "outer" }]);
  });

  it("keeps a plain query out of an open transaction: it waits for the commit", async () => {
    const before = await count();
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const transaction = db.transaction(async (tx) => {
      await tx.query("INSERT INTO items (id) VALUES ($1)", ["held"]);
      await held;
      throw new Error("rolled back");
    });
    await sleep(10);
    const seen = count();
    const write = db.query("INSERT INTO items (id) VALUES ($1)", ["after"]);
    release();
    await assert.rejects(transaction, /rolled back/);
    assert.equal(await seen, before, "the query ran after the transaction, not inside it");
    await write;
    assert.deepEqual(await db.query("SELECT id FROM items WHERE id IN ('held', 'after')"), [{ id: "after" }]);
  });

  it("refuses a query on the database from inside its own transaction", async () => {
    await assert.rejects(db.transaction(() => db.query("SELECT 1")), /inside its own transaction/);
  });

  it("gives now() the transaction's start, as PostgreSQL does", async () => {
    const [first, second] = await db.transaction(async (tx) => {
      const a = await tx.query<{ at: string }>("SELECT now() AS at");
      await sleep(5);
      return [a[0]!.at, (await tx.query<{ at: string }>("SELECT now() AS at"))[0]!.at];
    });
    assert.equal(first, second);
  });

  it("keeps times to the microsecond, so transactions of one millisecond still order by their times", async () => {
    await db.exec("CREATE TABLE stamped (n integer PRIMARY KEY, at timestamptz NOT NULL DEFAULT (now()))");
    for (let n = 0; n < 50; n++) await db.transaction((tx) => tx.query("INSERT INTO stamped (n) VALUES ($1)", [n]));
    const texts = await db.query<{ n: number; at: string }>("SELECT n, at || '' AS at FROM stamped ORDER BY at, n DESC");
    assert.deepEqual(texts.map((row) => row.n), [...Array(50).keys()], "later transactions, later times");
    assert.ok(texts.every((row) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/.test(row.at)), texts[0]!.at);
    // A time given by the caller and one computed in SQL have the same form, so they compare as times.
    const [row] = await db.query<{ later: bigint }>(
      `SELECT ${plusMs(db, "$1", "1")} > $1 AND ${minusMs(db, "$1", "1")} < $1 AS later`,
      [new Date("2026-12-06T17:00:00.123Z")],
    );
    assert.equal(row!.later, 1n);
    // The arithmetic keeps the microseconds: a time a moment ago never reads as later than now.
    const [shifted] = await db.query<{ plus: string; minus: string; ms: number }>(
      `SELECT ${plusMs(db, "$1", "1")} AS plus, ${minusMs(db, "$1", "0")} AS minus, ${msBetween(db, "$1", plusMs(db, "$1", "2.5"))} AS ms`,
      ["2026-12-06T17:00:00.123456Z"],
    );
    assert.deepEqual(shifted, { plus: "2026-12-06T17:00:00.124456Z", minus: "2026-12-06T17:00:00.123456Z", ms: 2.5 });
  });

  it("reports a refused write with PostgreSQL's SQLSTATE and constraint name", async () => {
    await db.query("INSERT INTO items (id, slot) VALUES ($1, $2)", ["slotted", 7]);
    const refusal = async (sql: string, params: unknown[]) => {
      const error = await db.query(sql, params).then(() => undefined, (e: unknown) => e);
      return [sqlState(error), violatedConstraint(error)];
    };
    assert.deepEqual(await refusal("INSERT INTO items (id) VALUES ($1)", ["slotted"]), ["23505", "items_pkey"]);
    assert.deepEqual(await refusal("INSERT INTO items (id, slot) VALUES ($1, $2)", ["other", 7]), ["23505", "items_one_per_slot"]);
    assert.deepEqual(await refusal("UPDATE items SET n = -1 WHERE id = $1", ["slotted"]), ["23514", "items_n_not_negative"]);
    assert.deepEqual(await refusal("INSERT INTO items (id, n) VALUES ($1, NULL)", ["nothing"]), ["23502", undefined]);
  });

  it("delivers pg_notify's payloads when the transaction commits, never from one rolled back", async () => {
    const heard: string[] = [];
    await db.listen!("changes", { notified: (payload) => heard.push(payload), lost: () => {}, resumed: () => {} });
    await db.transaction(async (tx) => {
      await tx.query("SELECT pg_notify('changes', $1)", ["kept"]);
      assert.deepEqual(heard, [], "not before the commit");
    });
    await assert.rejects(db.transaction(async (tx) => {
      await tx.query("SELECT pg_notify('changes', $1)", ["dropped"]);
      throw new Error("roll back");
    }));
    await db.query("SELECT pg_notify('changes', 'alone')");
    assert.deepEqual(heard, ["kept", "alone"]);
  });
});

describe("SQLite on disk", () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "svc-sqlite-"));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it("keeps what was committed across a reopen and lets one process hold the file", async () => {
    const first = await openSqlite(dir);
    await migrate(first, [{ id: "test/001", sql: "CREATE TABLE kept (id text PRIMARY KEY)", sqlite: "CREATE TABLE kept (id text PRIMARY KEY)" }]);
    await first.query("INSERT INTO kept (id) VALUES ($1)", ["one"]);
    await assert.rejects(openSqlite(dir), /svc\.sqlite is held by another process/);
    await first.close();
    const reopened = await openSqlite(dir);
    assert.deepEqual(await reopened.query("SELECT id FROM kept"), [{ id: "one" }]);
    await reopened.close();
  });

  it("refuses a migration that has no SQLite text", async () => {
    const db = await openSqlite();
    await assert.rejects(migrate(db, [{ id: "test/pg_only", sql: "CREATE TABLE t (id text)" }]), /test\/pg_only has no SQLite text/);
    await db.close();
  });
});
