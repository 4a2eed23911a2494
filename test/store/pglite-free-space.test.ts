/**
 * PGlite's indexes get an empty free space map, so a page split does not look its file up again
 * each time; PostgreSQL must take that map as its own: record pages a VACUUM freed in it, hand
 * them out again, and read it back after a restart with the data checksums on.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import { migrate, openDb, type Db } from "../../src/store/index.ts";
import { giveIndexesFreeSpaceMaps } from "../../src/store/pglite-free-space.ts";

const TABLE = "CREATE TABLE notes (id text PRIMARY KEY, body text NOT NULL); CREATE INDEX notes_by_body ON notes (body)";

async function mapFiles(db: Db, pgdata: string): Promise<number[]> {
  const rows = await db.query<{ path: string }>("SELECT pg_relation_filepath(c.oid) AS path FROM pg_class c WHERE c.relname IN ('notes_pkey', 'notes_by_body') ORDER BY c.relname");
  return Promise.all(rows.map(async ({ path }) => (await stat(join(pgdata, `${path}_fsm`))).size));
}

const insert = (db: Db, from: number, to: number) =>
  db.query("INSERT INTO notes SELECT lpad(n::text, 12, '0'), repeat('x', 40) || n FROM generate_series($1::int, $2::int) n", [from, to]);

it("an index's empty free space map is written once and then used by PostgreSQL as its own", async () => {
  const dataDir = await mkdtemp(join(tmpdir(), "svc-fsm-"));
  const pgdata = join(dataDir, "pgdata");
  try {
    const db = await openDb({ dataDir, embedded: "pglite" });
    await migrate(db, [{ id: "test/001", sql: TABLE }]);
    const before = await db.query<{ path: string }>("SELECT pg_relation_filepath('notes_pkey') AS path");
    await assert.rejects(stat(join(pgdata, `${before[0]!.path}_fsm`)), "a new index has no free space map");

    assert.ok((await giveIndexesFreeSpaceMaps(db, pgdata)) >= 2);
    assert.deepEqual(await mapFiles(db, pgdata), [8192, 8192]);
    assert.equal(await giveIndexesFreeSpaceMaps(db, pgdata), 0, "a map that exists is left alone");

    // Splits with the map in place; then pages emptied, freed by VACUUM into the map, and reused.
    await insert(db, 1, 20_000);
    await db.query("DELETE FROM notes WHERE id <= lpad('15000', 12, '0')");
    await db.exec("VACUUM notes");
    await insert(db, 20_001, 20_100);
    await db.exec("VACUUM notes");
    // A VACUUM after another transaction records the emptied pages: PostgreSQL extends the map it was given.
    assert.ok((await mapFiles(db, pgdata)).every((size) => size > 8192), "the maps hold the freed pages");
    await insert(db, 20_101, 35_000);
    await db.exec("SET enable_seqscan = off");
    const [counted] = await db.query<{ n: number; first: string }>("SELECT count(*)::int AS n, min(id) AS first FROM notes WHERE id > ''");
    assert.deepEqual(counted, { n: 20_000, first: "000000015001" });
    await db.exec("CHECKPOINT");
    await db.close();

    const again = await openDb({ dataDir, embedded: "pglite" });
    try {
      await insert(again, 35_001, 36_000);
      await again.exec("SET enable_seqscan = off");
      const [row] = await again.query<{ n: number }>("SELECT count(*)::int AS n FROM notes WHERE body LIKE 'x%'");
      assert.equal(row!.n, 21_000);
      const sizes = await mapFiles(again, pgdata);
      assert.ok(sizes.every((size) => size >= 8192 && size % 8192 === 0), `maps of whole pages: ${sizes.join(", ")}`);
    } finally {
      await again.close();
    }
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
});
