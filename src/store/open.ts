/** Opens the database a deployment names: PostgreSQL when a URL is given, else PGlite (./db.ts). */
import type { Db, OpenDbOptions } from "./db.ts";
import { openPglite } from "./pglite.ts";
import { openPostgres } from "./postgres.ts";

export async function openDb(options: OpenDbOptions = {}): Promise<Db> {
  if (options.databaseUrl) return openPostgres(options.databaseUrl, options);
  return openPglite(options.dataDir);
}
