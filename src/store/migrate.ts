/**
 * Schema migrations. Each part of the system owns its tables and exports its own ordered list
 * (ids globally unique, e.g. "ledger/001_accounts"); the store only records which ids ran.
 *
 * Each migration runs in its own transaction together with its `schema_migrations` row, so a
 * failure leaves it unapplied. On PostgreSQL several gateway nodes may start at once: every step
 * takes a transaction-scoped advisory lock (keyed by schema) and re-checks under it. A migration
 * must be transactional SQL (no CREATE INDEX CONCURRENTLY), and once released never edited: its
 * checksum is recorded and a changed one is refused.
 *
 * SQLite has SQL of its own: a part whose tables live there gives each migration its SQLite text
 * too (`sqlite`), the same tables in that dialect. A part without it cannot run on SQLite yet.
 */
import { createHash } from "node:crypto";
import type { Db } from "./db.ts";

export interface Migration {
  id: string;
  /** PostgreSQL's (and PGlite's) text. */
  sql: string;
  /** SQLite's text for the same change. */
  sqlite?: string;
}

/** A migration whose text PostgreSQL and SQLite read alike. */
export function readInBoth(id: string, sql: string): Migration {
  return { id, sql, sqlite: sql };
}

export class MigrationChangedError extends Error {
  override readonly name = "MigrationChangedError";
  constructor(readonly migrationId: string) {
    super(`migration ${migrationId} was edited after it was applied; add a new migration instead`);
  }
}

function checksum(sql: string): string {
  return createHash("sha256").update(sql).digest("hex");
}

/** Several nodes may migrate one PostgreSQL database at once; an embedded one has a single process. */
async function lockMigrations(tx: Db): Promise<void> {
  if (tx.kind === "sqlite") return;
  await tx.query("SELECT pg_advisory_xact_lock(hashtext('svc:migrate:' || current_schema()))");
}

/** Applies the migrations not yet applied, in order; returns the ids it applied. */
export async function migrate(db: Db, migrations: readonly Migration[]): Promise<string[]> {
  const ids = new Set<string>();
  for (const m of migrations) {
    if (ids.has(m.id)) throw new Error(`duplicate migration id ${m.id}`);
    ids.add(m.id);
  }

  // CREATE TABLE IF NOT EXISTS is not safe against a concurrent twin, hence the lock here too.
  const recorded = await db.transaction(async (tx) => {
    await lockMigrations(tx);
    await tx.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      id text PRIMARY KEY,
      checksum text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT ${db.kind === "sqlite" ? "(now())" : "now()"}
    )`);
    const rows = await tx.query<{ id: string; checksum: string }>("SELECT id, checksum FROM schema_migrations");
    return new Map(rows.map((r) => [r.id, r.checksum]));
  });

  const applied: string[] = [];
  const texts = migrations.map((m) => textFor(db, m));
  for (const [i, m] of migrations.entries()) {
    const text = texts[i]!;
    const sum = checksum(text);
    const known = recorded.get(m.id);
    if (known !== undefined) {
      if (known !== sum) throw new MigrationChangedError(m.id);
      continue;
    }
    const ran = await db.transaction(async (tx) => {
      await lockMigrations(tx);
      const [row] = await tx.query<{ checksum: string }>("SELECT checksum FROM schema_migrations WHERE id = $1", [m.id]);
      if (row) {
        if (row.checksum !== sum) throw new MigrationChangedError(m.id);
        return false;
      }
      await tx.exec(text);
      await tx.query("INSERT INTO schema_migrations (id, checksum) VALUES ($1, $2)", [m.id, sum]);
      return true;
    });
    if (ran) applied.push(m.id);
  }
  return applied;
}

function textFor(db: Db, m: Migration): string {
  if (db.kind !== "sqlite") return m.sql;
  if (m.sqlite === undefined) throw new Error(`migration ${m.id} has no SQLite text: its part does not run on SQLite yet`);
  return m.sqlite;
}
