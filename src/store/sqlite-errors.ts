/**
 * SQLite's constraint errors in PostgreSQL's terms, so that a part tells a duplicate from a
 * refused check the same way on every backend (sqlState and violatedConstraint in ./db.ts):
 * the SQLSTATE, and the constraint's name as PostgreSQL would give it. SQLite names a CHECK
 * constraint itself, but a unique violation only by its columns ("UNIQUE constraint failed:
 * t.a, t.b"): the name is that of the table's unique index on exactly those columns, and a
 * primary key's is `<table>_pkey`.
 */
import type Database from "better-sqlite3";

/** A database error carrying what PostgreSQL's would: `code` (SQLSTATE) and `constraint`. */
export class SqliteConstraintError extends Error {
  override readonly name = "SqliteConstraintError";
  constructor(
    message: string,
    readonly code: string,
    readonly constraint: string | undefined,
    options: { cause: unknown },
  ) {
    super(message, options);
  }
}

const STATES: Record<string, string> = {
  SQLITE_CONSTRAINT_UNIQUE: "23505",
  SQLITE_CONSTRAINT_PRIMARYKEY: "23505",
  SQLITE_CONSTRAINT_CHECK: "23514",
  SQLITE_CONSTRAINT_NOTNULL: "23502",
  SQLITE_CONSTRAINT_FOREIGNKEY: "23503",
  // RAISE(ABORT, ...) in a trigger: the tables' triggers refuse changes the rules forbid.
  SQLITE_CONSTRAINT_TRIGGER: "23001",
};

/** An error SQLite raised about a statement, naming the statement (better-sqlite3's does not). */
export class SqliteStatementError extends Error {
  override readonly name = "SqliteStatementError";
  constructor(
    message: string,
    readonly code: string,
    options: { cause: unknown },
  ) {
    super(message, options);
  }
}

/**
 * `error` as a SqliteConstraintError when it is a constraint's refusal, as a SqliteStatementError
 * naming the statement when it is another of SQLite's; otherwise unchanged.
 */
export function inPostgresTerms(db: Database.Database, error: unknown, sql: string): unknown {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== "string") return error;
  if (!(code in STATES)) {
    const statement = sql.replace(/\s+/g, " ").trim().slice(0, 300);
    return new SqliteStatementError(`${(error as Error).message}, in: ${statement}`, code, { cause: error });
  }
  const message = (error as Error).message;
  return new SqliteConstraintError(message, STATES[code]!, constraintName(db, code, message), { cause: error });
}

function constraintName(db: Database.Database, code: string, message: string): string | undefined {
  const detail = message.replace(/^[A-Z ]+constraint failed: /, "");
  if (code === "SQLITE_CONSTRAINT_CHECK") return detail;
  if (code !== "SQLITE_CONSTRAINT_UNIQUE" && code !== "SQLITE_CONSTRAINT_PRIMARYKEY") return undefined;
  const columns = detail.split(", ").map((qualified) => qualified.split("."));
  const table = columns[0]?.[0];
  if (table === undefined) return undefined;
  if (code === "SQLITE_CONSTRAINT_PRIMARYKEY") return `${table}_pkey`;
  return uniqueIndexOn(db, table, columns.map(([, column]) => column!));
}

interface IndexListRow {
  name: string;
  unique: number;
  origin: string;
}

function uniqueIndexOn(db: Database.Database, table: string, columns: string[]): string | undefined {
  const wanted = columns.join(",");
  for (const index of db.pragma(`index_list(${quoted(table)})`) as IndexListRow[]) {
    if (index.unique !== 1) continue;
    const indexed = (db.pragma(`index_info(${quoted(index.name)})`) as { name: string }[]).map((c) => c.name).join(",");
    if (indexed === wanted) return index.origin === "pk" ? `${table}_pkey` : index.name;
  }
  return undefined;
}

function quoted(identifier: string): string {
  return `"${identifier.replaceAll('"', '""')}"`;
}
