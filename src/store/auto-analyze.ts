/**
 * Table statistics kept current where no autovacuum runs. PGlite is one backend in single-user
 * mode, with no autovacuum worker, so a table was never analyzed. Every statement the store keeps
 * prepared (pglite-statements.ts) is planned once, usually on a nearly empty database right after
 * start, and PostgreSQL keeps that plan until something invalidates it. As the tables grew, reads
 * planned for a few rows went on scanning far more: reading eight of the ledger's transfers took
 * about 0.5 ms at 1,000 transfers, 1.7-1.9 ms at 10,000 and 4.9-5.2 ms at 30,000, and 0.46 ms at
 * 30,000 after an ANALYZE (docs/performance.md). ANALYZE writes the statistics and invalidates the
 * plans of the tables it analyzed, which are planned again at their next run.
 *
 * The rule is autovacuum's own, with the server's settings: a table is analyzed once more rows
 * have changed since its last analysis than autovacuum_analyze_threshold plus
 * autovacuum_analyze_scale_factor times its size (50 and 10% by default).
 *
 * A PostgreSQL server whose autovacuum is off (this project's test machines run one) has the same
 * problem: a 20,000-job run there went from 4.7 to 8.2 ms a request, and stayed at 3.6-5.3 with
 * this. So a gateway analyzes its own schema's tables there too; where autovacuum runs, as it does
 * by default, the server keeps the statistics and the gateway leaves them alone.
 */
import type { Db } from "./db.ts";

/** How often a database without autovacuum is checked for tables to analyze. */
const AUTO_ANALYZE_INTERVAL_MS = 10_000;

/** Whether the server keeps its tables' statistics itself (autovacuum on, and counting changes). */
export async function autovacuumRuns(db: Db): Promise<boolean> {
  const [row] = await db.query<{ runs: boolean }>("SELECT current_setting('autovacuum') = 'on' AND current_setting('track_counts') = 'on' AS runs");
  return row!.runs;
}

/**
 * Analyzes the tables of the schemas on the search path (this database's own, not another
 * schema's on the same server) that autovacuum would analyze now; returns their names
 * (schema-qualified, quoted).
 */
export async function analyzeWhereDue(db: Db): Promise<string[]> {
  const due = await db.query<{ name: string }>(
    `SELECT format('%I.%I', s.schemaname, s.relname) AS name
       FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
      WHERE s.schemaname = ANY (current_schemas(false))
        AND s.n_mod_since_analyze > current_setting('autovacuum_analyze_threshold')::float8
              + current_setting('autovacuum_analyze_scale_factor')::float8 * greatest(c.reltuples, 0)
      ORDER BY 1`,
  );
  const names = due.map((row) => row.name);
  if (names.length > 0) await db.exec(`ANALYZE ${names.join(", ")}`);
  return names;
}

/**
 * Runs analyzeWhereDue every `intervalMs` until stopped. A check that fails (the database closing
 * under it) leaves the plans as they were; the next one tries again.
 */
export class AutoAnalyze {
  private readonly timer: NodeJS.Timeout;
  private running: Promise<unknown> = Promise.resolve();

  constructor(db: Db, intervalMs = AUTO_ANALYZE_INTERVAL_MS) {
    this.timer = setInterval(() => {
      this.running = this.running.then(() => analyzeWhereDue(db)).catch(() => undefined);
    }, intervalMs);
    // Maintenance never keeps a process alive.
    this.timer.unref();
  }

  /** No check starts after this; resolves once the one under way, if any, has finished. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }
}
