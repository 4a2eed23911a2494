/**
 * PostgreSQL backend: a `pg` pool. A transaction checks out one client and runs BEGIN/COMMIT on
 * it; plain queries go to whichever client is free.
 */
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { Backoff, runInBackground } from "../core/index.ts";
import { AutoVacuum, autovacuumRuns } from "./auto-vacuum.ts";
import type { Db, NotificationListener, OpenDbOptions } from "./db.ts";
import { TxHandle } from "./tx.ts";

const INT8 = 20;
const INT8_ARRAY = 1016;

function parseInt8(value: string): bigint {
  return BigInt(value);
}

/** `{1,{2,NULL}}` -> [1n, [2n, null]]; int8 array elements are never quoted. */
function parseInt8Array(value: string): unknown {
  const json = value.replace(/[{}]/g, (b) => (b === "{" ? "[" : "]")).replace(/NULL/g, "null").replace(/-?\d+/g, '"$&"');
  const toBigInt = (v: unknown): unknown => (Array.isArray(v) ? v.map(toBigInt) : v === null ? null : BigInt(v as string));
  return toBigInt(JSON.parse(json));
}

// Per pool, not pg.types.setTypeParser: that would change how every other pg user in the
// process reads int8.
const typeParsers: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: "text" | "binary") => {
    if (format !== "binary" && oid === INT8) return parseInt8;
    if (format !== "binary" && oid === INT8_ARRAY) return parseInt8Array;
    return pg.types.getTypeParser(oid, format);
  }) as pg.CustomTypesConfig["getTypeParser"],
};

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

export async function openPostgres(url: string, options: Pick<OpenDbOptions, "schema" | "poolSize"> = {}): Promise<Db> {
  if (options.schema !== undefined && !SCHEMA_NAME.test(options.schema)) {
    throw new Error(`schema name must match ${SCHEMA_NAME}: ${options.schema}`);
  }
  const pool = new pg.Pool({
    connectionString: url,
    max: options.poolSize ?? 10,
    types: typeParsers,
    ...(options.schema ? { options: `-c search_path=${options.schema}` } : {}),
  });
  // An idle client losing its connection must not crash the process; the next checkout reconnects.
  pool.on("error", () => {});
  try {
    await pool.query("SELECT 1");
  } catch (err) {
    await pool.end();
    throw err;
  }
  const db = new PostgresDb(pool, url, options.schema);
  // Where the server's autovacuum is off, nothing else would vacuum and analyze the tables (auto-vacuum.ts).
  if (!(await autovacuumRuns(db))) db.vacuumItself();
  return db;
}

/** Distinct statement texts run as named statements; past this, unnamed (multi-row VALUES lists vary in length). */
const MAX_NAMED = 1_000;

/**
 * Statements with parameters run as named prepared statements: each connection parses and plans
 * a text once (pg keeps the names it prepared per connection) instead of on every run. Not behind
 * a transaction-mode connection pooler (PgBouncer's), which does not keep them; docs/deploy.md.
 */
class StatementNames {
  private readonly names = new Map<string, string>();

  config(text: string, values: unknown[] | undefined): pg.QueryConfig {
    if (values === undefined || values.length === 0) return { text };
    let name = this.names.get(text);
    if (name === undefined && this.names.size < MAX_NAMED) this.names.set(text, (name = `svc_${this.names.size + 1}`));
    return name === undefined ? { text, values } : { name, text, values };
  }
}

/** Waits between attempts to listen again after a lost connection: from about 0.1 s, doubling to about 5 s. */
const RELISTEN_BACKOFF = { initialMs: 100, maxMs: 5_000 };
/**
 * The listening connections' application_name, so an operator can tell them, and the schema of
 * the deployment they listen for, in pg_stat_activity.
 */
export function listenerName(schema: string | undefined): string {
  return schema === undefined ? "svc-listener" : `svc-listener ${schema}`;
}

/**
 * A connection of its own, outside the pool, that LISTENs on one channel. When it is lost
 * (PostgreSQL restarted, the network cut) that is reported at once, and it connects and listens
 * again until it succeeds or is closed.
 */
class ChannelListener {
  private client: pg.Client | undefined;
  private closed = false;

  constructor(
    private readonly url: string,
    private readonly applicationName: string,
    private readonly channel: string,
    private readonly listener: NotificationListener,
  ) {}

  /** The first connection: a failure here is the caller's to handle. */
  async start(): Promise<void> {
    this.client = await this.connect();
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.client?.end().catch(() => undefined);
  }

  private async connect(): Promise<pg.Client> {
    const client = new pg.Client({ connectionString: this.url, application_name: this.applicationName });
    client.on("notification", (message) => {
      if (message.channel === this.channel) this.listener.notified(message.payload ?? "");
    });
    client.on("error", () => this.drop(client));
    client.on("end", () => this.drop(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${client.escapeIdentifier(this.channel)}`);
      return client;
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
  }

  private drop(client: pg.Client): void {
    if (this.client !== client || this.closed) return;
    this.client = undefined;
    this.listener.lost();
    runInBackground(client.end(), "closing a lost listening connection", "a new one replaces it, and the server drops the old one with its socket");
    void this.listenAgain();
  }

  private async listenAgain(): Promise<void> {
    const backoff = new Backoff(RELISTEN_BACKOFF);
    while (!this.closed) {
      await sleep(backoff.next(), undefined, { ref: false });
      if (this.closed) return;
      const client = await this.connect().catch(() => undefined);
      if (client === undefined) continue;
      if (this.closed) {
        await client.end().catch(() => undefined);
        return;
      }
      this.client = client;
      this.listener.resumed();
      return;
    }
  }
}

class PostgresDb implements Db {
  readonly kind = "postgres" as const;
  private readonly statements = new StatementNames();
  private readonly listeners: ChannelListener[] = [];
  private vacuum: AutoVacuum | undefined;

  constructor(
    private readonly pool: pg.Pool,
    private readonly url: string,
    private readonly schema: string | undefined,
  ) {}

  async listen(channel: string, listener: NotificationListener): Promise<void> {
    const listening = new ChannelListener(this.url, listenerName(this.schema), channel, listener);
    await listening.start();
    this.listeners.push(listening);
  }

  async query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]> {
    return (await this.pool.query(this.statements.config(sql, params))).rows as T[];
  }

  async exec(sql: string): Promise<void> {
    await this.pool.query(sql);
  }

  async transaction<T>(fn: (tx: Db) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    const handle = new TxHandle("postgres", {
      query: async (sql, params) => (await client.query(this.statements.config(sql, params))).rows,
      exec: async (sql) => {
        await client.query(sql);
      },
    });
    let broken: Error | undefined;
    try {
      await client.query("BEGIN");
      const result = await fn(handle);
      handle.end();
      const commit = await client.query("COMMIT");
      // COMMIT of a transaction that hit an error (which the callback caught) rolls back quietly.
      if (commit.command === "ROLLBACK") throw new Error("transaction was aborted by an earlier error and rolled back");
      return result;
    } catch (err) {
      handle.end();
      try {
        await client.query("ROLLBACK");
      } catch (rollbackErr) {
        broken = rollbackErr as Error;
      }
      throw err;
    } finally {
      // A client whose ROLLBACK failed may still be inside a transaction: discard it.
      client.release(broken);
    }
  }

  /**
   * Vacuum and analyze this database's tables as autovacuum would. VACUUM runs in the server's
   * backend, beside the statements of requests and without blocking them, so it does not wait for
   * a quiet moment.
   */
  vacuumItself(): void {
    this.vacuum ??= new AutoVacuum(this);
  }

  async close(): Promise<void> {
    await this.vacuum?.stop();
    await Promise.all(this.listeners.map((listening) => listening.close()));
    await this.pool.end();
  }
}
