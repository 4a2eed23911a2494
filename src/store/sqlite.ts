/**
 * SQLite backend (better-sqlite3): the database in this process, one file, statements run
 * synchronously in microseconds where PGlite's WebAssembly PostgreSQL takes a tenth of a
 * millisecond or more (docs/performance.md). Its SQL is SQLite's: a part runs here once its
 * migrations have SQLite text (Migration.sqlite) and its statements read in both dialects
 * (./dialect.ts spells what differs).
 *
 * One connection, so one transaction at a time: a transaction holds the connection across its
 * awaits, and a plain `query` arriving meanwhile waits its turn instead of landing inside it. As
 * on PGlite, a transaction callback that queries the root Db instead of its `tx` is refused.
 *
 * Durability matches the PGlite default's: the write-ahead log is written at every commit but not
 * synced (synchronous=NORMAL), so a killed process loses nothing and a power cut may lose the
 * last commits. The file is locked for this process alone (locking_mode=EXCLUSIVE).
 */
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import Database from "better-sqlite3";
import { BoundedMap } from "../core/index.ts";
import type { Db, NotificationListener } from "./db.ts";
import { inPostgresTerms } from "./sqlite-errors.ts";
import { decodersOf, namedParameters, nowText, timestampMs, timestampText, type Decoder } from "./sqlite-values.ts";
import { asOwnTransaction, refuseInOwnTransaction, TxHandle } from "./tx.ts";

/** The database's file in a data directory. */
export const SQLITE_FILE = "svc.sqlite";

export async function openSqlite(dataDir?: string): Promise<Db> {
  let file = ":memory:";
  if (dataDir !== undefined) {
    await mkdir(dataDir, { recursive: true });
    file = join(dataDir, SQLITE_FILE);
  }
  // No waiting for a lock: the one connection never contends with itself, and another process
  // holding the file should be reported at once.
  const db = new Database(file, { timeout: 0 });
  try {
    db.pragma("locking_mode = EXCLUSIVE");
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = NORMAL");
    db.pragma("foreign_keys = ON");
    // Takes the exclusive lock now, not at the first write.
    db.exec("BEGIN IMMEDIATE; COMMIT");
  } catch (error) {
    db.close();
    if ((error as { code?: string }).code === "SQLITE_BUSY") throw new Error(`${file} is held by another process`, { cause: error });
    throw error;
  }
  return new SqliteDb(db);
}

interface Prepared {
  statement: Database.Statement;
  /** For a statement that returns rows: its columns' names and readers. */
  columns?: { names: string[]; decoders: Decoder[] };
}

class SqliteDb implements Db {
  readonly kind = "sqlite" as const;

  /** Statements prepared once per text: a node runs a few hundred texts over and over. */
  readonly #prepared = new BoundedMap<Prepared>(1_000);
  /** Transactions and the statements waiting behind one, in arrival order. */
  #queue: Promise<void> = Promise.resolve();
  #holdersOrWaiting = 0;
  /** now() inside a transaction: its start, as PostgreSQL's now() is. */
  #transactionStartedAt: string | undefined;
  /** What a transaction notified, delivered when it commits (pg_notify). */
  #notifications: [string, string][] = [];
  readonly #listeners = new Map<string, NotificationListener[]>();

  constructor(private readonly db: Database.Database) {
    db.function("now", () => this.#transactionStartedAt ?? nowText());
    // Time arithmetic to the microsecond (store/dialect.ts), where SQLite's own date functions
    // keep milliseconds: a row written a moment ago must not read as later than now.
    db.function("svc_plus_ms", { deterministic: true }, (at: unknown, ms: unknown) =>
      at === null || ms === null ? null : timestampText(timestampMs(String(at)) + Number(ms)),
    );
    db.function("svc_ms_between", { deterministic: true }, (from: unknown, to: unknown) =>
      from === null || to === null ? null : timestampMs(String(to)) - timestampMs(String(from)),
    );
    db.function("pg_notify", (channel: unknown, payload: unknown) => {
      this.#notifications.push([String(channel), String(payload)]);
      return null;
    });
  }

  async query<T = Record<string, unknown>>(sql: string, params: unknown[] = []): Promise<T[]> {
    refuseInOwnTransaction(this);
    if (this.#holdersOrWaiting === 0) return this.#statement<T>(sql, params, true);
    return this.#inTurn(async () => this.#statement<T>(sql, params, true));
  }

  async exec(sql: string): Promise<void> {
    refuseInOwnTransaction(this);
    await this.#inTurn(async () => this.#exec(sql));
    this.#deliverNotifications();
  }

  async transaction<T>(fn: (tx: Db) => Promise<T>): Promise<T> {
    refuseInOwnTransaction(this);
    return this.#inTurn(async () => {
      const handle = new TxHandle("sqlite", {
        query: async (sql, params) => this.#statement(sql, params ?? [], false),
        exec: async (sql) => this.#exec(sql),
      });
      this.#exec("BEGIN");
      this.#transactionStartedAt = nowText();
      try {
        const result = await asOwnTransaction(this, () => fn(handle));
        this.#exec("COMMIT");
        this.#deliverNotifications();
        return result;
      } catch (error) {
        if (this.db.inTransaction) this.#exec("ROLLBACK");
        this.#notifications = [];
        throw error;
      } finally {
        handle.end();
        this.#transactionStartedAt = undefined;
      }
    });
  }

  /** Hears what this database's transactions notify with pg_notify(channel, payload), once they commit. */
  async listen(channel: string, listener: NotificationListener): Promise<void> {
    this.#listeners.set(channel, [...(this.#listeners.get(channel) ?? []), listener]);
  }

  async close(): Promise<void> {
    await this.#inTurn(async () => this.db.close());
  }

  #statement<T>(sql: string, params: readonly unknown[], autocommit: boolean): T[] {
    const prepared = this.#prepare(sql);
    let rows: T[] = [];
    try {
      const bound = namedParameters(params);
      if (prepared.columns === undefined) prepared.statement.run(bound);
      else rows = (prepared.statement.all(bound) as unknown[][]).map((values) => toRow<T>(values, prepared.columns!));
    } catch (error) {
      throw inPostgresTerms(this.db, error, sql);
    }
    if (autocommit) this.#deliverNotifications();
    return rows;
  }

  #prepare(sql: string): Prepared {
    let prepared = this.#prepared.get(sql);
    if (prepared === undefined) {
      prepared = this.#prepareNew(sql);
      this.#prepared.set(sql, prepared);
    }
    return prepared;
  }

  #prepareNew(sql: string): Prepared {
    try {
      const statement = this.db.prepare(withoutParameterCasts(sql)).safeIntegers(true);
      if (!statement.reader) return { statement };
      statement.raw(true);
      return { statement, columns: { names: statement.columns().map((c) => c.name), decoders: decodersOf(statement) } };
    } catch (error) {
      throw inPostgresTerms(this.db, error, sql);
    }
  }

  #exec(sql: string): void {
    try {
      this.db.exec(sql);
    } catch (error) {
      throw inPostgresTerms(this.db, error, sql);
    }
  }

  /** Runs `work` when every transaction and statement queued before it is done. */
  async #inTurn<T>(work: () => Promise<T>): Promise<T> {
    this.#holdersOrWaiting++;
    const previous = this.#queue;
    let done!: () => void;
    this.#queue = new Promise((resolve) => (done = resolve));
    try {
      await previous;
      return await work();
    } finally {
      this.#holdersOrWaiting--;
      done();
    }
  }

  #deliverNotifications(): void {
    const sent = this.#notifications;
    if (sent.length === 0) return;
    this.#notifications = [];
    for (const [channel, payload] of sent) for (const listener of this.#listeners.get(channel) ?? []) listener.notified(payload);
  }
}

/**
 * `$1::bigint` becomes `$1`: PostgreSQL needs a parameter's type spelled out where it cannot
 * infer it, and a statement written for both dialects spells it so; SQLite takes a value's type
 * from the value bound.
 */
function withoutParameterCasts(sql: string): string {
  return sql.replace(/(\$\d+)::[a-z][a-z0-9_]*(?: precision)?(?:\[\])?/gi, "$1");
}

function toRow<T>(values: unknown[], columns: { names: string[]; decoders: Decoder[] }): T {
  const row: Record<string, unknown> = {};
  for (let i = 0; i < values.length; i++) row[columns.names[i]!] = columns.decoders[i]!(values[i]);
  return row as T;
}
