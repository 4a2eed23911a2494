/** A job's hold on one of a worker's slots, and what a job asks of the worker it is leased. */
import type { WorkerHandle } from "./worker-handle.ts";
import type { JobOutcome } from "./worker-health.ts";

export interface WorkerLease {
  worker: WorkerHandle;
  /** Record the time to first token of the job this lease routed. */
  firstToken(ms: number): void;
  /** Record how the job went on this worker; a worker that turns unfit leaves the pool. */
  outcome(outcome: JobOutcome): void;
  release(): void;
}

/** Which workers may take a job, besides hosting its model. */
export interface LeaseWanted {
  /** Workers the job already failed on. */
  exclude?: ReadonlySet<string>;
  /** Only workers whose context window holds this many tokens. */
  minContextWindow?: number;
  /** Only the worker at this address, whatever its vetting. */
  address?: string;
  /** Only workers on probation (for a check), else only workers that are sold. */
  onProbation?: boolean;
  /** Among free workers, a vouched one first (for a second opinion on a request). */
  vouchedFirst?: boolean;
}
