/**
 * A free space map for each of the embedded database's indexes. When a B-tree index splits a page
 * it asks the index's free space map for a page to reuse, and an index gets that map only once a
 * VACUUM finds a page of it empty, which this service's indexes (keys that only grow) almost never
 * have. Without one, PostgreSQL looks the map's file up again at every split, and on PGlite a file
 * that is not there costs a path lookup through its file system layer and an error thrown in Node
 * each time, while a loaded node's growing indexes split many times a second.
 *
 * The map written here is what PostgreSQL would write itself: one page of zeros, which it reads as
 * an empty page (no free space recorded anywhere) and initializes in memory. Its file is created
 * only where none exists, between statements (PGlite runs on this thread), so it never races
 * PostgreSQL creating the same file.
 */
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Db } from "./db.ts";

/** PostgreSQL's page size, as PGlite is built. */
const PAGE_BYTES = 8192;

/** Gives every B-tree index of this database's schemas without a free space map an empty one; returns how many it gave one. */
export async function giveIndexesFreeSpaceMaps(db: Db, dataDir: string): Promise<number> {
  const indexes = await db.query<{ path: string }>(
    `SELECT pg_relation_filepath(c.oid) AS path
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_am a ON a.oid = c.relam
      WHERE c.relkind = 'i' AND a.amname = 'btree' AND n.nspname = ANY (current_schemas(false))`,
  );
  let given = 0;
  for (const { path } of indexes) {
    const map = join(dataDir, `${path}_fsm`);
    if (existsSync(map)) continue;
    writeFileSync(map, new Uint8Array(PAGE_BYTES), { flag: "wx", mode: 0o600 });
    given++;
  }
  return given;
}
