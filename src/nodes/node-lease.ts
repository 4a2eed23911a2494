/**
 * A gateway node's lease on its own work. Every job and chain action a node starts carries its
 * node id; the node renews its lease in the shared database while it lives. When a lease runs
 * out (the node was killed, its machine lost), one survivor takes it over, finishes or refunds
 * that node's work, and deletes the lease. A restart under the same id first waits out its old
 * lease, and refuses to start if another live process is renewing it: two processes must never
 * both believe they own the same jobs.
 *
 * Money stays safe even when a lease is wrong (a stalled node that comes back after being taken
 * over): every job and chain-action step is a conditional update that only one writer wins.
 */
import { randomBytes } from "node:crypto";
import type { Logger } from "../core/index.ts";
import { isEmbedded, msBetween, plusMs, rowLock, type Db } from "../store/index.ts";

export const DEFAULT_LEASE_MS = 10_000;

export interface NodeLeaseOptions {
  db: Db;
  nodeId: string;
  logger: Logger;
  /** How long a lease lasts unrenewed (default 10 s); it is renewed every third of that. */
  leaseMs?: number;
  /** Finish a dead node's work (its open chain actions and unfinished jobs). */
  takeOver(deadNodeId: string): Promise<void>;
  /** Finish this node's own work left behind while it runs (chain actions whose send gave up). */
  finishStale?(): Promise<void>;
}

/** Another live process is renewing this node id's lease. */
export class NodeIdInUseError extends Error {
  override readonly name = "NodeIdInUseError";
  constructor(readonly nodeId: string) {
    super(`node id ${nodeId} is in use by another running gateway: give each gateway its own (--node-id)`);
  }
}

interface LeaseRow {
  incarnation: string;
  lease_until: Date;
  taken_over_by: string | null;
  remaining_ms: number;
}

export class NodeLease {
  private readonly incarnation = randomBytes(8).toString("hex");
  private readonly leaseMs: number;
  private timer: NodeJS.Timeout | undefined;
  private renewing: Promise<void> | undefined;
  private working: Promise<void> | undefined;

  private constructor(private readonly o: NodeLeaseOptions) {
    this.leaseMs = o.leaseMs ?? DEFAULT_LEASE_MS;
  }

  get nodeId(): string {
    return this.o.nodeId;
  }

  /** Holds the node's lease, waiting out a dead incarnation's (or a survivor finishing its work). */
  static async acquire(options: NodeLeaseOptions): Promise<NodeLease> {
    const lease = new NodeLease(options);
    let seen: LeaseRow | undefined;
    for (;;) {
      if (await lease.claim()) return lease;
      const [row] = await options.db.query<LeaseRow>(
        `SELECT incarnation, lease_until, taken_over_by, ${msBetween(options.db, "now()", "lease_until")} AS remaining_ms FROM gateway_nodes WHERE node_id = $1`,
        [options.nodeId],
      );
      if (!row) continue;
      const renewed = seen && row.taken_over_by === null && row.incarnation === seen.incarnation && row.lease_until > seen.lease_until;
      if (renewed) throw new NodeIdInUseError(options.nodeId);
      if (!seen) options.logger.info({ nodeId: options.nodeId, waitMs: Math.round(row.remaining_ms) }, "waiting for this node's previous lease to run out");
      seen = row;
      await new Promise((r) => setTimeout(r, Math.max(50, Math.min(row.remaining_ms + 20, lease.leaseMs))));
    }
  }

  private async claim(): Promise<boolean> {
    // An embedded database belongs to one process: nobody else can hold its lease.
    const onlyIfFree = isEmbedded(this.o.db) ? "" : "WHERE gateway_nodes.lease_until < now() AND gateway_nodes.taken_over_by IS NULL";
    const rows = await this.o.db.query(
      `INSERT INTO gateway_nodes (node_id, incarnation, lease_until) VALUES ($1, $2, ${plusMs(this.o.db, "now()", "$3")})
       ON CONFLICT (node_id) DO UPDATE SET incarnation = $2, lease_until = excluded.lease_until, started_at = now(), taken_over_by = NULL
         ${onlyIfFree}
       RETURNING node_id`,
      [this.o.nodeId, this.incarnation, this.leaseMs],
    );
    return rows.length > 0;
  }

  /**
   * Every third of the lease: renew it, and (apart, so that long work never delays a renewal)
   * take over a dead node's work and finish this node's own stale work.
   */
  start(): void {
    this.timer = setInterval(() => {
      this.renewing ??= this.renew()
        .catch((error: unknown) => this.o.logger.error({ err: error, nodeId: this.o.nodeId }, "could not renew this node's lease; retrying"))
        .finally(() => (this.renewing = undefined));
      this.working ??= this.work()
        .catch((error: unknown) => this.o.logger.error({ err: error, nodeId: this.o.nodeId }, "could not finish left-over work; retrying"))
        .finally(() => (this.working = undefined));
    }, Math.max(10, Math.floor(this.leaseMs / 3)));
    this.timer.unref();
  }

  private async work(): Promise<void> {
    const dead = await this.takeOne();
    if (dead !== undefined) await this.finish(dead);
    await this.o.finishStale?.();
  }

  /** Our own lease, and the leases of dead nodes we are finishing. */
  private async renew(): Promise<void> {
    const rows = await this.o.db.query<{ node_id: string }>(
      `UPDATE gateway_nodes SET lease_until = ${plusMs(this.o.db, "now()", "$3")}
        WHERE (node_id = $1 AND incarnation = $2) OR taken_over_by = $1 RETURNING node_id`,
      [this.o.nodeId, this.incarnation, this.leaseMs],
    );
    if (!rows.some((r) => r.node_id === this.o.nodeId)) {
      this.o.logger.error({ nodeId: this.o.nodeId }, "this node's lease ran out and was taken over; claiming it again");
      await this.claim();
    }
  }

  private async takeOne(): Promise<string | undefined> {
    const [row] = await this.o.db.query<{ node_id: string }>(
      `UPDATE gateway_nodes SET taken_over_by = $1, lease_until = ${plusMs(this.o.db, "now()", "$2")}
        WHERE node_id = (SELECT node_id FROM gateway_nodes WHERE lease_until < now() AND node_id <> $1
                          ORDER BY lease_until LIMIT 1 ${rowLock(this.o.db, "FOR UPDATE SKIP LOCKED")})
        RETURNING node_id`,
      [this.o.nodeId, this.leaseMs],
    );
    return row?.node_id;
  }

  private async finish(dead: string): Promise<void> {
    this.o.logger.warn({ nodeId: this.o.nodeId, deadNodeId: dead }, "taking over the work of a gateway whose lease ran out");
    await this.o.takeOver(dead);
    await this.o.db.query("DELETE FROM gateway_nodes WHERE node_id = $1 AND taken_over_by = $2", [dead, this.o.nodeId]);
    this.o.logger.info({ nodeId: this.o.nodeId, deadNodeId: dead }, "finished the work of a dead gateway");
  }

  /** Stop renewing and let the lease run out now, so a survivor finishes anything left behind. */
  async release(): Promise<void> {
    clearInterval(this.timer);
    await Promise.all([this.renewing, this.working]);
    await this.o.db.query("UPDATE gateway_nodes SET lease_until = now() WHERE node_id = $1 AND incarnation = $2", [this.o.nodeId, this.incarnation]);
  }
}
