/**
 * How the gateway judges a worker by what it does with callers' jobs. A job it fails, stalls or
 * over-bills is a strike; a job served cleanly clears them. Strikes in a row demote the worker
 * (it gets jobs only when no good worker is free, and stops counting as capacity), more drop it.
 * A job that failed because of the request itself is nobody's strike.
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

export interface WorkerStats {
  served: number;
  failed: number;
  stalled: number;
  overstated: number;
}

export class WorkerHealth {
  readonly stats: WorkerStats = { served: 0, failed: 0, stalled: 0, overstated: 0 };
  private strikes = 0;

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

  /** Why the worker stands where it does, for logs and close reasons. */
  describe(): string {
    const { failed, stalled, overstated } = this.stats;
    return `${this.strikes} bad jobs in a row (failed ${failed}, stalled ${stalled}, over-billed ${overstated} in all)`;
  }
}
