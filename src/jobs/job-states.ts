/**
 * The job state machine as data: which trigger moves a job from which status to which, and what
 * else happens with the move. The spec's table ("States and transitions") plus what DECISIONS.md
 * and the service add: how a job fails, and that a refund's money returns when its transaction
 * confirms. Pure; job-repo.ts `moveJob` is the only code that applies it, with an update guarded
 * by the status the job leaves.
 */
import type { JobStatus } from "./job-record.ts";

export type JobTrigger =
  | "worker_assigned"
  | "proof_recorded"
  | "settlement_confirmed"
  | "timed_out"
  | "refund_recorded"
  | "escrow_not_landed"
  | "escrow_given_up"
  | "dispute_opened"
  | "dispute_refused"
  | "dispute_resolved";

export interface JobTransition {
  from: readonly JobStatus[];
  trigger: JobTrigger;
  to: JobStatus;
  /** What else happens with the move, in the order it happens. */
  also: string;
}

export const JOB_TRANSITIONS: readonly JobTransition[] = [
  {
    from: ["pending"],
    trigger: "worker_assigned",
    to: "processing",
    also: "The worker is recorded; event job.processing.",
  },
  {
    from: ["processing"],
    trigger: "proof_recorded",
    to: "settling",
    also: "The worker's proof, the metered usage and the charge are recorded with the settlement transaction, which is then sent.",
  },
  {
    from: ["settling"],
    trigger: "settlement_confirmed",
    to: "settled",
    also: "In the transaction marking the settlement confirmed: the charge is posted, the worker and treasury paid, the rest of the lock released; event job.completed.",
  },
  {
    from: ["pending", "processing"],
    trigger: "timed_out",
    to: "refunded",
    also: "The refund transaction is recorded and sent; when it confirms the reservation is voided and event job.timeout fires. The request gets 504 job_timeout.",
  },
  {
    from: ["pending", "processing", "settling"],
    trigger: "refund_recorded",
    to: "failed",
    also: "The job ended without a charge (worker error, caller gone before output, proof rejected, interrupted by a restart): the refund transaction is recorded and sent; when it confirms the reservation is voided and event job.failed fires.",
  },
  {
    from: ["pending", "processing"],
    trigger: "escrow_not_landed",
    to: "failed",
    also: "The job ended and its escrow never confirmed, so nothing is refunded on-chain: the reservation is released when the escrow transaction is given up.",
  },
  {
    from: ["pending", "processing", "settling", "failed"],
    trigger: "escrow_given_up",
    to: "failed",
    also: "The escrow transaction was rejected on-chain or dropped unsent: the reservation is voided, or a charge recorded with the admission is given back; event job.failed. From failed: a job that ended while its escrow was in doubt.",
  },
  {
    from: ["settled"],
    trigger: "dispute_opened",
    to: "disputed",
    also: "The caller's hash and the dispute transaction are recorded, then it is sent; when it confirms, event job.disputed and arbitration begins. (A settling job is disputed once its settlement confirms.)",
  },
  {
    from: ["disputed"],
    trigger: "dispute_refused",
    to: "settled",
    also: "The chain refused the dispute transaction (its window had closed on the chain's clock): the job is as it was.",
  },
  {
    from: ["disputed"],
    trigger: "dispute_resolved",
    to: "settled",
    also: "The arbitration's outcome is recorded on-chain (resolve, and slash when upheld against a staked worker) and on the job; upheld or inconclusive, the treasury pays the charge back to the caller.",
  },
];

/** Statuses a job leaves no more by itself (disputed waits for its arbitration; settled leaves only for a dispute). */
export const FINAL_STATUSES: readonly JobStatus[] = ["settled", "failed", "refunded"];

/** Statuses of a job still running: a crash leaves it for recovery to finish or refund. */
export const UNFINISHED_STATUSES: readonly JobStatus[] = ["pending", "processing", "settling"];

export function isFinal(status: JobStatus): boolean {
  return FINAL_STATUSES.includes(status);
}

/** The table has no row for this move: a bug in the caller, never a race. */
export class JobTransitionRefused extends Error {
  override readonly name = "JobTransitionRefused";
  constructor(readonly from: JobStatus, readonly trigger: JobTrigger) {
    super(`a ${from} job cannot be moved by ${trigger}`);
  }
}

/** Where `trigger` takes a job in status `from`; throws JobTransitionRefused when it cannot. */
export function nextStatus(from: JobStatus, trigger: JobTrigger): JobStatus {
  const row = JOB_TRANSITIONS.find((t) => t.trigger === trigger && t.from.includes(from));
  if (!row) throw new JobTransitionRefused(from, trigger);
  return row.to;
}
