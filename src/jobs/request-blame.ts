/**
 * Who is to blame when a worker says a request cannot run (`fault: "request"`, or a count it
 * could not make). Saying so costs a worker nothing by itself, so its word settles it only when
 * the operator vouches for it, or when a second worker says the same: otherwise the request moves
 * to another worker, vouched first, and if that one runs it, the worker that refused it is struck
 * for the job it failed (docs/workers.md, "Routing and failures").
 */
import type { Vetting, WorkerLease } from "../network/index.ts";

export class RequestBlame {
  private readonly refusers: WorkerLease[] = [];

  /**
   * The lease's worker refused the request: whether that settles it as the request's fault (no
   * other worker is asked), or the request is to move on.
   */
  refused(lease: WorkerLease, vetting: Vetting): boolean {
    if (vetting === "vouched" || this.refusers.length > 0) return true;
    this.refusers.push(lease);
    return false;
  }

  /** Whether a worker refused the request before (the next one is its second opinion). */
  get pending(): boolean {
    return this.refusers.length > 0;
  }

  /** Another worker ran the request: the workers that refused it failed their jobs. */
  ran(): void {
    for (const lease of this.refusers.splice(0)) lease.outcome("failed");
  }
}
