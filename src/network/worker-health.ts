/**
 * How the gateway judges a worker by what it does with the jobs it is given. A job it fails,
 * stalls or over-bills is a strike; a job served cleanly clears them. Strikes in a row demote the
 * worker (it gets jobs only when no good worker is free, and stops counting as capacity), more
 * drop it. A job that failed because of the request itself is nobody's strike.
 *
 * The record also holds a worker's probation (docs/workers.md, "Probation"): the checks of its
 * output against a vouched worker's that it passed, until it has passed enough to be proven. The
 * pool keeps the record by address, so a reconnection does not wipe it; a worker dropped for its
 * faults loses what it earned and starts its probation again.
 */

export type JobOutcome =
  /** Finished with a verified proof and a usage figure the text can hold. */
  | "served"
  /** Failed on its own account (an error, a broken connection, a proof that does not verify). */
  | "failed"
  /** Sent no first token in time, or never finished. */
  | "stalled"
  /** Finished, but claimed more completion tokens than its output holds. */
  | "overstated";

export type Standing = "good" | "demoted" | "unfit";

export const DEMOTE_AFTER_STRIKES = 2;
export const DROP_AFTER_STRIKES = 4;
/** Checks a worker on probation must pass, none failed, to be proven. */
export const DEFAULT_CHECKS_TO_PROVE = 10;

export interface WorkerStats {
  served: number;
  failed: number;
  stalled: number;
  overstated: number;
}

export class WorkerHealth {
  readonly stats: WorkerStats = { served: 0, failed: 0, stalled: 0, overstated: 0 };
  private strikes = 0;
  /** Probation checks passed so far. */
  checksPassed = 0;
  /** Passed its probation: its jobs are sold like a vouched worker's. */
  proven = false;

  get standing(): Standing {
    if (this.strikes >= DROP_AFTER_STRIKES) return "unfit";
    return this.strikes >= DEMOTE_AFTER_STRIKES ? "demoted" : "good";
  }

  /** Counts the outcome and returns the standing it leaves the worker in. */
  record(outcome: JobOutcome): Standing {
    this.stats[outcome]++;
    this.strikes = outcome === "served" ? 0 : this.strikes + 1;
    return this.standing;
  }

  /** A probation check passed; says whether that made the worker proven just now. */
  checkPassed(checksToProve: number): boolean {
    this.checksPassed++;
    if (this.proven || this.checksPassed < checksToProve) return false;
    this.proven = true;
    return true;
  }

  /** Dropped for its faults: the strikes are paid, and what it earned on probation is lost. */
  forfeit(): void {
    this.strikes = 0;
    this.checksPassed = 0;
    this.proven = false;
  }

  /** Why the worker stands where it does, for logs and close reasons. */
  describe(): string {
    const { failed, stalled, overstated } = this.stats;
    return `${this.strikes} bad jobs in a row (failed ${failed}, stalled ${stalled}, over-billed ${overstated} in all)`;
  }
}
