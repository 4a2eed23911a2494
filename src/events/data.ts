/**
 * The `data` object of each event. job.completed, credit.low and worker.slashed carry exactly the
 * spec's fields; the others follow DECISIONS.md ("the job's id, model, tier, status and credit
 * figures"; topup: credits added, remaining, usdc value, signature; registered: address, models,
 * staked). docs/webhooks.md documents every field. Pure.
 */
import { usdcValue } from "../core/units.ts";
import type { JobRecord } from "../jobs/job-record.ts";

type JobFacts = Pick<JobRecord, "id" | "model" | "tier" | "status" | "lockedCredits">;

function jobBase(job: JobFacts) {
  return { job_id: job.id, model: job.model, tier: job.tier, status: job.status };
}

export function jobSubmittedData(job: JobFacts & Pick<JobRecord, "escrowTx">, creditsRemaining: number) {
  return { ...jobBase(job), credits_locked: job.lockedCredits, credits_remaining: creditsRemaining, escrow_tx: job.escrowTx };
}

export function jobProcessingData(job: JobFacts & Pick<JobRecord, "workerAddress">) {
  return { ...jobBase(job), credits_locked: job.lockedCredits, worker_address: job.workerAddress };
}

/** Exactly the spec's fields, in its order. */
export function jobCompletedData(
  job: Pick<JobRecord, "id" | "model" | "tier" | "creditsCharged" | "workerAddress" | "promptTokens" | "completionTokens">,
  settlement: { settlementTx: string; slot: number; creditsRemaining: number },
) {
  return {
    job_id: job.id,
    model: job.model,
    tier: job.tier,
    credits_charged: job.creditsCharged,
    usdc_value: usdcValue(job.creditsCharged),
    worker_address: job.workerAddress,
    settlement_tx: settlement.settlementTx,
    slot: settlement.slot,
    prompt_tokens: job.promptTokens,
    completion_tokens: job.completionTokens,
    credits_remaining: settlement.creditsRemaining,
  };
}

/** job.failed and job.timeout: the job charged nothing and its whole lock is back in the balance. */
export function jobEndedData(job: JobFacts & Pick<JobRecord, "failureReason" | "refundTx">, creditsRemaining: number) {
  return {
    ...jobBase(job),
    reason: job.failureReason,
    credits_charged: 0,
    credits_refunded: job.lockedCredits,
    credits_remaining: creditsRemaining,
    refund_tx: job.refundTx,
  };
}

export interface DisputeFacts {
  yourHash: string;
  workerHash: string;
  disputeTx: string;
  arbitrationWindowHours: number;
}

export function jobDisputedData(job: JobFacts & Pick<JobRecord, "creditsCharged">, dispute: DisputeFacts) {
  return {
    ...jobBase(job),
    credits_charged: job.creditsCharged,
    your_hash: dispute.yourHash,
    worker_hash: dispute.workerHash,
    dispute_tx: dispute.disputeTx,
    arbitration_window_hours: dispute.arbitrationWindowHours,
  };
}

/** Exactly the spec's fields. */
export function creditLowData(creditsRemaining: number, threshold: number) {
  return { credits_remaining: creditsRemaining, usdc_value: usdcValue(creditsRemaining), threshold };
}

/** `usdc_value` is the stablecoin paid for the credits added. */
export function creditTopupData(creditsAdded: number, creditsRemaining: number, depositTx: string) {
  return { credits_added: creditsAdded, credits_remaining: creditsRemaining, usdc_value: usdcValue(creditsAdded), deposit_tx: depositTx };
}

export interface WorkerRegistration {
  address: string;
  models: string[];
  staked: boolean;
}

export function workerRegisteredData(worker: WorkerRegistration) {
  return { worker_address: worker.address, models: [...worker.models], staked: worker.staked };
}

export interface Slash {
  workerAddress: string;
  /** In whole native tokens, as the spec's integer field. */
  slashAmountSvc: number;
  slashTx: string;
  reason: string;
  relatedJobId: string;
}

/** Exactly the spec's fields. */
export function workerSlashedData(slash: Slash) {
  return {
    worker_address: slash.workerAddress,
    slash_amount_svc: slash.slashAmountSvc,
    slash_tx: slash.slashTx,
    reason: slash.reason,
    related_job_id: slash.relatedJobId,
  };
}
