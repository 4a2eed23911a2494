/**
 * The `data` object of each event. job.completed, credit.low and worker.slashed carry exactly the
 * spec's fields; the others follow DECISIONS.md ("the job's id, model, tier, status and credit
 * figures"; topup: credits added, remaining, usdc value, signature; registered: address, models,
 * staked). docs/webhooks.md documents every field. Pure.
 */
import { usdcValue } from "../core/index.ts";
import type {
  CreditLowFacts,
  CreditTopupFacts,
  JobCompletedFacts,
  JobDisputedFacts,
  JobEndedFacts,
  JobFacts,
  JobProcessingFacts,
  JobSubmittedFacts,
  WorkerRegisteredFacts,
  WorkerSlashedFacts,
} from "./facts.ts";

function jobBase(job: JobFacts) {
  return { job_id: job.jobId, model: job.model, tier: job.tier, status: job.status };
}

export function jobSubmittedData(job: JobSubmittedFacts) {
  return { ...jobBase(job), credits_locked: job.creditsLocked, credits_remaining: job.creditsRemaining, escrow_tx: job.escrowTx };
}

export function jobProcessingData(job: JobProcessingFacts) {
  return { ...jobBase(job), credits_locked: job.creditsLocked, worker_address: job.workerAddress };
}

/** Exactly the spec's fields, in its order. */
export function jobCompletedData(job: JobCompletedFacts) {
  return {
    job_id: job.jobId,
    model: job.model,
    tier: job.tier,
    credits_charged: job.creditsCharged,
    usdc_value: usdcValue(job.creditsCharged),
    worker_address: job.workerAddress,
    settlement_tx: job.settlementTx,
    slot: job.slot,
    prompt_tokens: job.promptTokens,
    completion_tokens: job.completionTokens,
    credits_remaining: job.creditsRemaining,
  };
}

/** job.failed and job.timeout: the job charged nothing and its whole lock is back in the balance. */
export function jobEndedData(job: JobEndedFacts) {
  return {
    ...jobBase(job),
    reason: job.failureReason,
    credits_charged: 0,
    credits_refunded: job.creditsRefunded,
    credits_remaining: job.creditsRemaining,
    refund_tx: job.refundTx,
  };
}

export function jobDisputedData(job: JobDisputedFacts) {
  return {
    ...jobBase(job),
    credits_charged: job.creditsCharged,
    your_hash: job.yourHash,
    worker_hash: job.workerHash,
    dispute_tx: job.disputeTx,
    arbitration_window_hours: job.arbitrationWindowHours,
  };
}

/** Exactly the spec's fields. */
export function creditLowData(low: Pick<CreditLowFacts, "creditsRemaining" | "thresholdCredits">) {
  return { credits_remaining: low.creditsRemaining, usdc_value: usdcValue(low.creditsRemaining), threshold: low.thresholdCredits };
}

/** `usdc_value` is the stablecoin paid for the credits added. */
export function creditTopupData(topup: CreditTopupFacts) {
  return {
    credits_added: topup.creditsAdded,
    credits_remaining: topup.creditsRemaining,
    usdc_value: usdcValue(topup.creditsAdded),
    deposit_tx: topup.depositTx,
  };
}

export function workerRegisteredData(worker: WorkerRegisteredFacts) {
  return { worker_address: worker.address, models: [...worker.models], staked: worker.staked };
}

/** Exactly the spec's fields. */
export function workerSlashedData(slash: WorkerSlashedFacts) {
  return {
    worker_address: slash.workerAddress,
    slash_amount_svc: slash.slashAmountSvc,
    slash_tx: slash.slashTx,
    reason: slash.reason,
    related_job_id: slash.relatedJobId,
  };
}
