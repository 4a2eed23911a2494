/**
 * Opens the database a deployment names: PostgreSQL when a URL is given, else an embedded one
 * (./db.ts). An embedded database in a data directory keeps the engine its files were made by;
 * a new one is made with the engine asked for.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { Db, EmbeddedEngine, OpenDbOptions } from "./db.ts";
import { openPglite } from "./pglite.ts";
import { openPostgres } from "./postgres.ts";
import { openSqlite, SQLITE_FILE } from "./sqlite.ts";

export async function openDb(options: OpenDbOptions = {}): Promise<Db> {
  if (options.databaseUrl) return openPostgres(options.databaseUrl, options);
  const engine = embeddedEngineIn(options.dataDir) ?? options.embedded ?? DEFAULT_EMBEDDED_ENGINE;
  return engine === "sqlite" ? openSqlite(options.dataDir) : openPglite(options.dataDir);
}

/**
 * The engine a new embedded database is made with. SQLite runs a statement in microseconds where
 * PGlite's WebAssembly PostgreSQL takes a tenth of a millisecond or more, all of it on the node's
 * main thread (docs/performance.md). A data dir PGlite made keeps PGlite: its data stays where it is.
 */
export const DEFAULT_EMBEDDED_ENGINE: EmbeddedEngine = "sqlite";

/** The engine whose database `dataDir` holds, if it holds one. */
export function embeddedEngineIn(dataDir: string | undefined): EmbeddedEngine | undefined {
  if (dataDir === undefined) return undefined;
  if (existsSync(join(dataDir, SQLITE_FILE))) return "sqlite";
  if (existsSync(join(dataDir, "pgdata", "PG_VERSION"))) return "pglite";
  return undefined;
}
