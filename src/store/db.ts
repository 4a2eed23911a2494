/**
 * The database handle every part of the system uses. PostgreSQL's SQL runs on two backends: PGlite
 * in-process for the embedded default, a `pg` pool when `DATABASE_URL` is set. SQLite
 * (./sqlite.ts) runs in-process too, with SQL of its own, for the parts written for it.
 * Both return int8 as `bigint`, timestamptz as `Date`, jsonb as objects; numeric stays a string
 * so no precision is lost (cast sums of bigints with `::bigint`). The backends implement this
 * file's interfaces; ./open.ts picks one, so no backend imports the module that imports it.
 */

export type DbKind = "pglite" | "sqlite" | "postgres";

/**
 * Whether `db` is an embedded database (PGlite or SQLite), which belongs to this one process:
 * nobody else writes it, so what this process holds in memory about it is the whole truth.
 */
export function isEmbedded(db: Db): boolean {
  return db.kind !== "postgres";
}

export interface Db {
  readonly kind: DbKind;
  /** One statement, `$1`-style parameters. */
  query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
  /** Several statements separated by `;`, no parameters (the simple query protocol). */
  exec(sql: string): Promise<void>;
  /**
   * Runs `fn` in a transaction and commits when it resolves, rolls back when it throws.
   * Called on a transaction handle it opens a savepoint instead, so a failed inner step is undone
   * without aborting the caller's transaction. A handle is used by one step at a time: do not run
   * queries on it concurrently, and inside `fn` use `tx`, never the Db it came from.
   */
  transaction<T>(fn: (tx: Db) => Promise<T>): Promise<T>;
  /**
   * Hears what any connection to this database (this process's own too) NOTIFYs on `channel`,
   * from when the returned promise resolves until the database is closed. Only on the database
   * itself, not on a transaction's handle.
   */
  listen?(channel: string, listener: NotificationListener): Promise<void>;
  close(): Promise<void>;
}

/** What a `listen` reports. */
export interface NotificationListener {
  /** A payload sent on the channel by a transaction that committed. */
  notified(payload: string): void;
  /** The listening connection was lost: notifications from now until `resumed` are missed. */
  lost(): void;
  /** Listening again after `lost`. */
  resumed(): void;
}

/** The engines of an embedded database. */
export type EmbeddedEngine = "sqlite" | "pglite";

export interface OpenDbOptions {
  /** `postgres://...`: use PostgreSQL; otherwise an embedded database. */
  databaseUrl?: string;
  /**
   * Where an embedded database keeps its files (SQLite `<dataDir>/svc.sqlite`, PGlite
   * `<dataDir>/pgdata`); without it the database lives in memory.
   */
  dataDir?: string;
  /** The engine a new embedded database is made with; one already in `dataDir` keeps its own. */
  embedded?: EmbeddedEngine;
  /** PostgreSQL only: the schema to work in (search_path). It must already exist to be written to. */
  schema?: string;
  /** PostgreSQL only: connections in the pool (default 10). */
  poolSize?: number;
}

/** The SQLSTATE of a database error from either backend (e.g. "23505" unique violation). */
export function sqlState(err: unknown): string | undefined {
  if (typeof err === "object" && err !== null && "code" in err) {
    const code = (err as { code: unknown }).code;
    if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code)) return code;
  }
  return undefined;
}

/** The constraint a database error names, when it names one. */
export function violatedConstraint(err: unknown): string | undefined {
  if (typeof err === "object" && err !== null && "constraint" in err) {
    const name = (err as { constraint: unknown }).constraint;
    if (typeof name === "string") return name;
  }
  return undefined;
}
