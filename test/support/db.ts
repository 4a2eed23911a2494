/**
 * The databases every store-backed test runs against: a fresh in-memory PGlite always, and
 * PostgreSQL too when DATABASE_URL is set, each open() in its own new schema that close() drops.
 * Suites of the parts written for SQLite as well ask for it (`{ sqlite: true }`): a fresh
 * in-memory SQLite database.
 *
 *   for (const backend of testDatabases()) {
 *     describe(`jobs on ${backend.name}`, () => {
 *       let db: Db;
 *       beforeEach(async () => { db = await backend.open({ migrations: [...LEDGER_MIGRATIONS, ...JOB_MIGRATIONS] }); });
 *       afterEach(() => db.close());
 *       it("...", async () => { ... });
 *     });
 *   }
 */
import { randomBytes } from "node:crypto";
import { readFile, rename, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { migrate, openDb, type Db, type Migration } from "../../src/store/index.ts";
import { openPglite, pgliteImage } from "../../src/store/pglite.ts";
import { openSqlite } from "../../src/store/sqlite.ts";

export interface TestDbOptions {
  /** Applied right after opening. */
  migrations?: readonly Migration[];
  /** PostgreSQL pool size (default 8, enough for tests that race transactions). */
  poolSize?: number;
}

export interface TestDatabase {
  name: "pglite" | "sqlite" | "postgres";
  open(options?: TestDbOptions): Promise<Db>;
}

export function testDatabases(which: { sqlite?: boolean } = {}): TestDatabase[] {
  const list: TestDatabase[] = [
    { name: "pglite", open: (options) => withMigrations(emptyImage().then((image) => openPglite(undefined, image)), options) },
  ];
  if (which.sqlite) list.push({ name: "sqlite", open: (options) => withMigrations(openSqlite(), options) });
  const url = process.env.DATABASE_URL;
  if (url) list.push({ name: "postgres", open: (options) => withMigrations(openPostgresSchema(url, options), options) });
  return list;
}

/** A schema name no other test process will pick. */
export function uniqueSchemaName(): string {
  return `test_${process.pid}_${randomBytes(6).toString("hex")}`;
}

let image: Promise<Blob> | undefined;

/**
 * PGlite's initdb takes seconds, loading a saved empty data directory well under one: the image
 * is made once per PGlite version and shared by all test processes through the temp directory.
 */
function emptyImage(): Promise<Blob> {
  image ??= (async () => {
    const pkg = join(dirname(fileURLToPath(import.meta.resolve("@electric-sql/pglite"))), "..", "package.json");
    const { version } = JSON.parse(await readFile(pkg, "utf8")) as { version: string };
    const file = join(tmpdir(), `svc-test-pglite-${version}.tar`);
    try {
      return new Blob([await readFile(file)]);
    } catch {
      const fresh = await pgliteImage();
      const partial = `${file}.${process.pid}`;
      await writeFile(partial, new Uint8Array(await fresh.arrayBuffer()));
      await rename(partial, file);
      return fresh;
    }
  })();
  return image;
}

async function withMigrations(opening: Promise<Db>, options: TestDbOptions = {}): Promise<Db> {
  const db = await opening;
  if (options.migrations) {
    try {
      await migrate(db, options.migrations);
    } catch (err) {
      await db.close();
      throw err;
    }
  }
  return db;
}

async function openPostgresSchema(url: string, options: TestDbOptions = {}): Promise<Db> {
  const schema = uniqueSchemaName();
  const db = await openDb({ databaseUrl: url, schema, poolSize: options.poolSize ?? 8 });
  await db.exec(`CREATE SCHEMA ${schema}`);
  return {
    kind: db.kind,
    query: (sql, params) => db.query(sql, params),
    exec: (sql) => db.exec(sql),
    transaction: (fn) => db.transaction(fn),
    listen: (channel, listener) => db.listen!(channel, listener),
    close: async () => {
      try {
        await db.exec(`DROP SCHEMA ${schema} CASCADE`);
      } finally {
        await db.close();
      }
    },
  };
}
