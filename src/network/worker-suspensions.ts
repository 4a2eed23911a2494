/**
 * The operator's suspensions of workers (`svc admin workers suspend`): a row per worker, which
 * every node applies to its pool at its start and, told by the database (schema.ts), whenever one
 * is made or lifted. A suspended worker gets no jobs, also after it reconnects (WorkerPool.suspend);
 * a reinstated one is served again. Notifications arrive in commit order, so each carries what
 * happened and needs no lookup.
 */
import type { Logger } from "../core/index.ts";
import type { Db } from "../store/index.ts";
import { REINSTATED, SUSPENDED, WORKER_SUSPENSION_CHANGES } from "./schema.ts";
import type { WorkerPool } from "./worker-pool.ts";

export interface WorkerSuspension {
  address: string;
  reason: string;
  suspendedAt: Date;
}

interface SuspensionRow {
  address: string;
  reason: string;
  suspended_at: Date;
}

const fromRow = (row: SuspensionRow): WorkerSuspension => ({ address: row.address, reason: row.reason, suspendedAt: row.suspended_at });

/** Suspends the worker on every node; one already suspended keeps its first reason (`created` false). */
export async function suspendWorker(db: Db, address: string, reason: string): Promise<{ suspension: WorkerSuspension; created: boolean }> {
  const [created] = await db.query<SuspensionRow>(
    "INSERT INTO worker_suspensions (address, reason) VALUES ($1, $2) ON CONFLICT (address) DO NOTHING RETURNING address, reason, suspended_at",
    [address, reason],
  );
  if (created) return { suspension: fromRow(created), created: true };
  const [existing] = await db.query<SuspensionRow>("SELECT address, reason, suspended_at FROM worker_suspensions WHERE address = $1", [address]);
  return { suspension: fromRow(existing!), created: false };
}

/** Lifts the operator's suspension of the worker; undefined when it had none. */
export async function reinstateWorker(db: Db, address: string): Promise<WorkerSuspension | undefined> {
  const [row] = await db.query<SuspensionRow>("DELETE FROM worker_suspensions WHERE address = $1 RETURNING address, reason, suspended_at", [address]);
  return row && fromRow(row);
}

/** Every worker the operator suspended, the latest first. */
export async function listWorkerSuspensions(db: Db): Promise<WorkerSuspension[]> {
  const rows = await db.query<SuspensionRow>("SELECT address, reason, suspended_at FROM worker_suspensions ORDER BY suspended_at DESC, address");
  return rows.map(fromRow);
}

/**
 * Applies the operator's suspensions to `pool` now and whenever they change, until the database
 * closes. After a lost connection to the database, the table is read again: what changed while
 * nobody listened is applied then. Suspensions this node did not take from the table (an upheld
 * dispute's) are lifted only by an explicit reinstatement.
 */
export async function followWorkerSuspensions(db: Db, pool: WorkerPool, logger: Logger): Promise<void> {
  const applied = new Set<string>();
  const suspend = (address: string) => {
    applied.add(address);
    pool.suspend(address);
  };
  const reload = async () => {
    const current = new Set((await listWorkerSuspensions(db)).map((s) => s.address));
    for (const address of current) suspend(address);
    for (const address of applied) {
      if (current.has(address)) continue;
      applied.delete(address);
      pool.reinstate(address);
    }
  };
  await db.listen?.(WORKER_SUSPENSION_CHANGES, {
    notified: (payload) => {
      if (payload.startsWith(SUSPENDED)) suspend(payload.slice(SUSPENDED.length));
      else if (payload.startsWith(REINSTATED)) {
        const address = payload.slice(REINSTATED.length);
        applied.delete(address);
        pool.reinstate(address);
      }
    },
    lost: () => undefined,
    resumed: () => void reload().catch((error: unknown) => logger.error({ err: error }, "could not read the workers' suspensions again")),
  });
  await reload();
  if (applied.size > 0) logger.info({ suspendedWorkers: applied.size }, "workers suspended by the operator");
}
