/**
 * What autovacuum does, where no autovacuum runs. PGlite is one backend in single-user mode, with
 * no autovacuum worker, and a PostgreSQL server can have it turned off (this project's test
 * machines do). Two things then go undone.
 *
 * ANALYZE. Every statement the store keeps prepared (pglite-statements.ts) is planned once,
 * usually on a nearly empty database right after start, and PostgreSQL keeps that plan until
 * something invalidates it. As the tables grew, reads planned for a few rows went on scanning far
 * more: reading eight of the ledger's transfers took about 0.5 ms at 1,000 transfers, 1.7-1.9 ms
 * at 10,000 and 4.9-5.2 ms at 30,000, and 0.46 ms at 30,000 after an ANALYZE. ANALYZE writes the
 * statistics and invalidates the plans of the tables it analyzed.
 *
 * VACUUM. An update leaves the row's old version dead, and a VACUUM is what finally frees it and
 * marks the page's rows visible to all (the jobs' rows are updated in place for this reason,
 * jobs/schema.ts: their updates leave no index entry behind). An insert-only table needs VACUUM
 * too: it freezes old rows' transaction ids before PostgreSQL's 2-billion wraparound.
 *
 * The rules are autovacuum's own, with the server's settings: a table is analyzed once more rows
 * have changed since its last analysis than autovacuum_analyze_threshold plus
 * autovacuum_analyze_scale_factor times its size (50 and 10% by default), and vacuumed once it
 * holds more dead rows than autovacuum_vacuum_threshold plus autovacuum_vacuum_scale_factor times
 * its size (50 and 20%), or has had more rows inserted since its last VACUUM than
 * autovacuum_vacuum_insert_threshold plus autovacuum_vacuum_insert_scale_factor times its size
 * (1,000 and 20%). Where autovacuum runs, as it does by default, the server does both and the
 * gateway leaves them alone.
 *
 * One rule is added on PGlite, where a VACUUM holds the node's thread for as long as it reads the
 * pages changed since the last one: a table is vacuumed in steps, once `stepRows` of its rows are
 * dead or new. By a fifth of the table, each pause would grow with the table: under steady load
 * (`npm run bench:soak`) a busy table's VACUUM would hold the node for longer the more rows it
 * kept, about a second after ten minutes.
 */
import { setImmediate } from "node:timers/promises";
import type { Db } from "./db.ts";

/** How often a database without autovacuum is checked for tables to vacuum and analyze. */
const CHECK_INTERVAL_MS = 10_000;
/**
 * On PGlite a VACUUM runs on the main thread and holds every request for its length (50-300 ms
 * for the jobs' tables at 8,000-48,000 jobs), so it waits for the database to have been quiet
 * this long...
 */
const QUIET_MS = 500;
/** ...but not longer than this, under load that never pauses. */
const MAX_DEFER_MS = 60_000;

/** Whether the server vacuums and analyzes its tables itself (autovacuum on, and counting changes). */
export async function autovacuumRuns(db: Db): Promise<boolean> {
  const [row] = await db.query<{ runs: boolean }>("SELECT current_setting('autovacuum') = 'on' AND current_setting('track_counts') = 'on' AS runs");
  return row!.runs;
}

/** A table autovacuum would work on now, and what it would do. */
export interface TableDue {
  /** Schema-qualified and quoted. */
  name: string;
  vacuum: boolean;
  analyze: boolean;
}

const setting = (name: string) => `current_setting('${name}')::float8`;

/**
 * The tables of the schemas on the search path (this database's own, not another schema's on the
 * same server) that autovacuum would vacuum or analyze now. With `stepRows`, a table is also
 * vacuumed once that many of its rows are dead or new since its last VACUUM, whatever its size.
 */
export async function tablesDue(db: Db, stepRows?: number): Promise<TableDue[]> {
  return db.query<TableDue>(
    `SELECT name, vacuum, "analyze" FROM (
       SELECT format('%I.%I', s.schemaname, s.relname) AS name,
              (s.n_dead_tup > ${setting("autovacuum_vacuum_threshold")} + ${setting("autovacuum_vacuum_scale_factor")} * greatest(c.reltuples, 0)
                OR (${setting("autovacuum_vacuum_insert_threshold")} >= 0 AND s.n_ins_since_vacuum > ${setting("autovacuum_vacuum_insert_threshold")}
                  + ${setting("autovacuum_vacuum_insert_scale_factor")} * greatest(c.reltuples, 0))
                OR coalesce(s.n_dead_tup + s.n_ins_since_vacuum > $1::float8, false)) AS vacuum,
              s.n_mod_since_analyze > ${setting("autovacuum_analyze_threshold")}
                + ${setting("autovacuum_analyze_scale_factor")} * greatest(c.reltuples, 0) AS "analyze"
         FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
        WHERE s.schemaname = ANY (current_schemas(false))) due
      WHERE vacuum OR "analyze"
      ORDER BY name`,
    [stepRows ?? null],
  );
}

/**
 * Vacuums and analyzes `due` as it says, one table per statement (VACUUM takes no transaction),
 * letting the event loop turn between them, so that the statements of requests waiting run in
 * between and each pause on PGlite stays one table's: back to back, a check's five or six VACUUMs
 * held the thread for 250-600 ms at once. Returns the tables it was asked to vacuum and analyze.
 * A table another gateway is vacuuming or analyzing (its lock is taken) is skipped: that one does
 * the work.
 */
export async function maintain(db: Db, due: readonly TableDue[]): Promise<{ vacuumed: string[]; analyzed: string[] }> {
  const done = { vacuumed: [] as string[], analyzed: [] as string[] };
  for (const table of due) {
    await setImmediate();
    if (table.vacuum) await db.exec(`VACUUM (SKIP_LOCKED${table.analyze ? ", ANALYZE" : ""}) ${table.name}`);
    else if (table.analyze) await db.exec(`ANALYZE (SKIP_LOCKED) ${table.name}`);
    if (table.vacuum) done.vacuumed.push(table.name);
    if (table.analyze) done.analyzed.push(table.name);
  }
  return done;
}

/** How long the database has had no statement, for a VACUUM that holds the thread to wait for a quiet moment. */
export interface Quietness {
  quietForMs(): number;
}

/**
 * Checks every `intervalMs` until stopped, and does what autovacuum would. Analysis runs at once
 * (5-10 ms a busy table on PGlite, whose statistics target is 1: pglite.ts). With `quietness`
 * (PGlite), a VACUUM waits until the database has been quiet for QUIET_MS at a check, or its table
 * has been due for `maxDeferMs` (a minute). A check that fails (the database closing under it)
 * changes nothing; the next one tries again.
 */
export class AutoVacuum {
  private readonly timer: NodeJS.Timeout;
  private running: Promise<unknown> = Promise.resolve();
  /** When each table found due for a VACUUM that waits was first found so. */
  private readonly dueSinceMs = new Map<string, number>();
  private readonly quietness: Quietness | undefined;
  private readonly maxDeferMs: number;
  private readonly stepRows: number | undefined;
  private readonly afterCheck: (() => Promise<unknown>) | undefined;
  private lastWarnedMs = -Infinity;

  /**
   * `stepRows`: vacuum a table in steps of this many dead or new rows (tablesDue). `afterCheck`:
   * more upkeep of the same database, run after each check (PGlite's free space maps and checkpoints).
   */
  constructor(
    private readonly db: Db,
    options: { quietness?: Quietness; intervalMs?: number; maxDeferMs?: number; stepRows?: number; afterCheck?: () => Promise<unknown> } = {},
  ) {
    this.quietness = options.quietness;
    this.maxDeferMs = options.maxDeferMs ?? MAX_DEFER_MS;
    this.stepRows = options.stepRows;
    this.afterCheck = options.afterCheck;
    this.timer = setInterval(() => {
      // A check that fails is tried again at the next tick: maintenance never stops the service.
      this.running = this.running.then(() => this.check()).catch((err: unknown) => this.onFailure(err));
    }, options.intervalMs ?? CHECK_INTERVAL_MS);
    // Maintenance never keeps a process alive.
    this.timer.unref();
  }

  /**
   * The store has no logger of its own: a failed check is a process warning on stderr, at most
   * one a minute, and the next tick tries again.
   */
  private onFailure(err: unknown): void {
    const now = performance.now();
    if (now - this.lastWarnedMs < 60_000) return;
    this.lastWarnedMs = now;
    process.emitWarning(`the database's automatic VACUUM check failed and is tried again: ${(err as Error).message}`);
  }

  /** No check starts after this; resolves once the one under way, if any, has finished. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  private async check(): Promise<void> {
    // Read before this check's own statement makes the database look busy.
    const quiet = this.quietness === undefined || this.quietness.quietForMs() >= QUIET_MS;
    const due = await tablesDue(this.db, this.stepRows);
    const now = Date.now();
    const plan = due.map((table) => {
      if (!table.vacuum) return table;
      const since = this.dueSinceMs.get(table.name) ?? now;
      const vacuumNow = quiet || now - since >= this.maxDeferMs;
      if (vacuumNow) this.dueSinceMs.delete(table.name);
      else this.dueSinceMs.set(table.name, since);
      return { ...table, vacuum: vacuumNow };
    });
    for (const name of this.dueSinceMs.keys()) if (!due.some((table) => table.name === name)) this.dueSinceMs.delete(name);
    await maintain(this.db, plan);
    await this.afterCheck?.();
  }
}
