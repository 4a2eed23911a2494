/**
 * PGlite backend: PostgreSQL compiled to WebAssembly, in this process, over one connection.
 *
 * PGlite runs one transaction at a time and makes a plain `query` wait while a transaction is
 * open, so nothing interleaves into another caller's transaction. The flip side: a transaction
 * callback that awaits a query on the root Db instead of on its `tx` waits for itself forever,
 * so that is refused with an error (see `#startStatement`).
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { setFlagsFromString } from "node:v8";
import { PGlite, types } from "@electric-sql/pglite";
import { AutoVacuum, type Quietness } from "./auto-vacuum.ts";
import type { Db, NotificationListener } from "./db.ts";
import { checkpointIfDue } from "./pglite-checkpoint.ts";
import { giveIndexesFreeSpaceMaps } from "./pglite-free-space.ts";
import { PreparedStatements } from "./pglite-statements.ts";
import { asOwnTransaction, refuseInOwnTransaction, TxHandle } from "./tx.ts";

const runFile = promisify(execFile);

/**
 * PostgreSQL's defaults as PGlite sets them give a 160 MB buffer cache, allocated inside the
 * WebAssembly memory and never returned: most of an idle node's footprint. The embedded database
 * of one node holds the working set of recent jobs; the operating system's page cache holds the rest.
 */
const MEMORY_SETTINGS = ["shared_buffers=16MB", "wal_buffers=1MB", "temp_buffers=1MB", "maintenance_work_mem=16MB"];

/**
 * PGlite runs no autovacuum, so the embedded database vacuums and analyzes its tables itself
 * (auto-vacuum.ts), on the main thread like everything PGlite does: every request waits while it
 * does. An ANALYZE reads a sample of 300 rows per point of the statistics target. On a node that
 * had served 6,900-8,900 jobs, analyzing its four busy tables took 775-831 ms at PostgreSQL's
 * default target (100), 152-188 ms at 10 and 21-29 ms at 1; under steady traffic they fall due
 * about every 10 s. The service's statements look rows up by key, and what their plans need is the
 * tables' sizes, not histograms: of the ~100 statements such a node keeps prepared, two generic
 * plans differed between targets 100 and 1, neither for the worse (`npm run bench:analyze`
 * measures both; docs/performance.md lists its figures).
 */
const STATISTICS_SETTINGS = ["default_statistics_target=1"];

/**
 * A statement prepared once (pglite-statements.ts) would still get a new plan on most runs:
 * PostgreSQL keeps planning a prepared statement per run while its custom plans look cheaper than
 * the generic one, which for `= ANY($1)` lookups and multi-row VALUES lists they often do. Forcing
 * the plan it keeps saves about a tenth of the database's work per paid job at 32 requests at a
 * time (`bench/job-statements.ts 1000 32` prints that work). A generic plan cannot use a partial
 * index whose condition a parameter decides: the statements that need one spell its values out
 * (events/delivery-queue.ts, `status = 'pending'`).
 */
const PLAN_SETTINGS = ["plan_cache_mode=force_generic_plan"];

/**
 * After each checkpoint PostgreSQL logs the whole of every page the first time it changes, so that
 * a page half written when the machine lost power can be rebuilt. PGlite writes a page with one
 * write call, which a killed process cannot leave half done, and its commits are not synced
 * (docs/architecture.md, "Why a crash loses nothing"): a power cut loses them whatever the log
 * holds. With a checkpoint every 64 MB of log (pglite-checkpoint.ts) those page images are about a
 * third of the log: a four-minute `npm run bench:soak` made 14 checkpoints with them and 9 without,
 * at the same requests a second.
 */
const WAL_SETTINGS = ["full_page_writes=off"];

/**
 * V8 compiles WebAssembly twice by default: every function with its baseline compiler (Liftoff),
 * then the ones that run often again with its optimizing one. For PGlite that second tier costs an
 * idle `svc dev` about 90 MB (354-360 against 263-272 MB) and initdb most of a second, and buys
 * no latency that the benches can tell from noise (docs/performance.md, "PGlite's WebAssembly
 * on the baseline compiler"). The flag is the process's, read when a module compiles: it is set
 * before PGlite's first, and PGlite is the only WebAssembly the service runs.
 */
const BASELINE_ONLY = "--liftoff-only";

function baselineWasmCompilerOnly(): void {
  setFlagsFromString(BASELINE_ONLY);
}

function createPglite(dir: string | undefined, image?: Blob): Promise<PGlite> {
  baselineWasmCompilerOnly();
  // int8 (and int8[] through it) as bigint: money amounts exceed 2^53 in base units only in
  // theory, but a number that silently rounds is not acceptable for a ledger.
  return PGlite.create(dir, {
    parsers: { [types.INT8]: (v: string) => BigInt(v) },
    postgresqlconf: [...MEMORY_SETTINGS, ...STATISTICS_SETTINGS, ...PLAN_SETTINGS, ...WAL_SETTINGS],
    ...(image && !dir ? { loadDataDir: image } : {}),
  });
}

/**
 * `image` (in memory only) starts from a data directory saved by `pgliteImage` instead of running
 * initdb, which takes seconds here; tests use it to get a fresh database quickly.
 */
export async function openPglite(dataDir?: string, image?: Blob): Promise<Db> {
  let dir: string | undefined;
  if (dataDir) {
    dir = join(dataDir, "pgdata");
    await mkdir(dir, { recursive: true });
  }
  if (dir !== undefined && !existsSync(join(dir, "PG_VERSION"))) await initializeInOwnProcess(dir);
  return new PgliteDb(await createPglite(dir, image), dir);
}

/**
 * initdb, for a new data directory, in a process of its own. It grows PGlite's WebAssembly memory
 * past half a gigabyte. Run in this process, none of that would come back: closed on the main
 * thread, the instance keeps it until the garbage collector next collects it (775-812 MB 20 s
 * after a first `svc dev` is ready); run on a worker thread, about 150 MB of it stays in the
 * process after the thread exits (docs/performance.md). A process's memory all goes when it
 * exits. The child loads PGlite alone, resolved from here, so it needs neither tsx nor the bundle.
 */
export async function initializeInOwnProcess(dir: string): Promise<void> {
  const pglite = import.meta.resolve("@electric-sql/pglite");
  try {
    await runFile(process.execPath, [BASELINE_ONLY, "--input-type=module", "--eval", INITDB_IN_PROCESS, pglite, dir, JSON.stringify(MEMORY_SETTINGS)], { env: { ...process.env, NODE_OPTIONS: "" } });
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr?.trim();
    const why = stderr ? stderr.split("\n").at(-1) : error instanceof Error ? error.message : String(error);
    throw new Error(`PGlite could not initialize a database in ${dir}: ${why}`);
  }
}

// Emscripten's file system errors carry an errno and no message; the last line of stderr names one or the other.
const INITDB_IN_PROCESS = `
const [pglite, dir, settings] = process.argv.slice(1);
try {
  const { PGlite } = await import(pglite);
  const pg = await PGlite.create(dir, { postgresqlconf: JSON.parse(settings) });
  await pg.close();
} catch (error) {
  process.stderr.write((error instanceof Error && error.message ? error.message : "errno " + (error && error.errno)) + "\\n");
  process.exitCode = 1;
}
`;

/** The data directory of a new, empty database, as an uncompressed tar image. */
export async function pgliteImage(): Promise<Blob> {
  baselineWasmCompilerOnly();
  const pg = await PGlite.create();
  try {
    return await pg.dumpDataDir("none");
  } finally {
    await pg.close();
  }
}

/**
 * A VACUUM here holds the node's thread while it reads every page changed since the last one, so
 * it runs in steps of this many dead or new rows of a table (auto-vacuum.ts), a few seconds of a
 * loaded node's writes...
 */
const VACUUM_STEP_ROWS = 5_000;
/** ...each waiting for a quiet moment no longer than one check: waiting longer makes the step longer. */
const VACUUM_MAX_DEFER_MS = 10_000;

class PgliteDb implements Db, Quietness {
  readonly kind = "pglite" as const;

  private readonly statements: PreparedStatements;
  /**
   * PGlite runs no autovacuum: without statistics, plans made on a small table stay as it grows,
   * and without VACUUM its updated tables keep every dead row version.
   */
  private readonly vacuum: AutoVacuum;
  /** When the latest statement or transaction began, so a VACUUM can wait for a quiet moment. */
  private lastStatementAtMs = performance.now();

  /** `dataDir`: where PGlite keeps its files, when on disk. */
  constructor(
    private readonly pg: PGlite,
    dataDir?: string,
  ) {
    this.statements = new PreparedStatements(pg);
    const afterCheck = async () => {
      if (dataDir !== undefined) await giveIndexesFreeSpaceMaps(this, dataDir);
      await checkpointIfDue(this);
    };
    this.vacuum = new AutoVacuum(this, { quietness: this, stepRows: VACUUM_STEP_ROWS, maxDeferMs: VACUUM_MAX_DEFER_MS, afterCheck });
  }

  quietForMs(): number {
    return performance.now() - this.lastStatementAtMs;
  }

  async query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]> {
    this.#startStatement();
    return (await this.statements.query<T>(sql, params ?? [], true)) ?? (await this.pg.query<T>(sql, params)).rows;
  }

  async exec(sql: string): Promise<void> {
    this.#startStatement();
    await this.pg.exec(sql);
  }

  async transaction<T>(fn: (tx: Db) => Promise<T>): Promise<T> {
    this.#startStatement();
    return this.pg.transaction(async (raw) => {
      const handle = new TxHandle("pglite", {
        query: async (sql, params) => (await this.statements.query(sql, params)) ?? (await raw.query(sql, params)).rows,
        exec: async (sql) => {
          await raw.exec(sql);
        },
      });
      try {
        return await asOwnTransaction(this, () => fn(handle));
      } finally {
        handle.end();
      }
    });
  }

  /** One process holds the embedded database, so its listener is never lost. */
  async listen(channel: string, listener: NotificationListener): Promise<void> {
    await this.pg.listen(channel, (payload) => listener.notified(payload));
  }

  async close(): Promise<void> {
    await this.vacuum.stop();
    await this.pg.close();
  }

  /** Every statement and transaction starts here: noted for `quietForMs`, refused inside its own transaction. */
  #startStatement(): void {
    this.lastStatementAtMs = performance.now();
    refuseInOwnTransaction(this);
  }
}
