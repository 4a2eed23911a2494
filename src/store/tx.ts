/**
 * The handle a transaction callback receives, the same for both backends: each backend supplies
 * how to run one statement on its transaction's connection, and this adds savepoints and the
 * guards that turn misuse into an error instead of silently running outside the transaction.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { Db, DbKind } from "./db.ts";

export interface TxConnection {
  query(sql: string, params?: unknown[]): Promise<unknown[]>;
  exec(sql: string): Promise<void>;
}

export class TxHandle implements Db {
  #open = true;
  #savepointActive = false;

  constructor(
    readonly kind: DbKind,
    private readonly conn: TxConnection,
    private readonly depth = 0,
  ) {}

  /** Called by the owner when the transaction (or savepoint) ends; later use is a bug. */
  end(): void {
    this.#open = false;
  }

  async query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]> {
    this.#check();
    return (await this.conn.query(sql, params)) as T[];
  }

  async exec(sql: string): Promise<void> {
    this.#check();
    await this.conn.exec(sql);
  }

  async transaction<T>(fn: (tx: Db) => Promise<T>): Promise<T> {
    this.#check();
    this.#savepointActive = true;
    const name = `sp_${this.depth + 1}`;
    const inner = new TxHandle(this.kind, this.conn, this.depth + 1);
    try {
      await this.conn.exec(`SAVEPOINT ${name}`);
      try {
        const result = await fn(inner);
        await this.conn.exec(`RELEASE SAVEPOINT ${name}`);
        return result;
      } catch (err) {
        await this.conn.exec(`ROLLBACK TO SAVEPOINT ${name}; RELEASE SAVEPOINT ${name}`);
        throw err;
      }
    } finally {
      inner.end();
      this.#savepointActive = false;
    }
  }

  async close(): Promise<void> {
    throw new Error("close the Db, not a transaction handle");
  }

  #check(): void {
    if (!this.#open) throw new Error("transaction handle used after its transaction ended");
    // Its statements would land inside the nested step's savepoint and share its fate.
    if (this.#savepointActive) throw new Error("transaction handle used while a nested transaction is open");
  }
}

/** Whether `db` is a transaction's handle (from either backend), not the database itself. */
export function isTransaction(db: Db): boolean {
  return db instanceof TxHandle;
}

/** The transaction of a one-connection database (PGlite, SQLite) that the current async context runs in. */
const ownTransaction = new AsyncLocalStorage<{ db: Db; open: boolean }>();

/** Runs `fn`, the callback of a transaction of `db`, as that transaction (refuseInOwnTransaction). */
export async function asOwnTransaction<T>(db: Db, fn: () => Promise<T>): Promise<T> {
  const state = { db, open: true };
  try {
    return await ownTransaction.run(state, fn);
  } finally {
    state.open = false;
  }
}

/**
 * Refuses a statement on `db` itself from inside one of its own transactions: one connection runs
 * one transaction at a time, so the statement would wait for the transaction, which waits for it.
 */
export function refuseInOwnTransaction(db: Db): void {
  const state = ownTransaction.getStore();
  if (state?.open && state.db === db) {
    throw new Error("query on the Db inside its own transaction: use the `tx` handle (it would wait for itself forever)");
  }
}
