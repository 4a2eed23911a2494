/**
 * What each event says, as plain facts the caller hands over. Events reads no other part's
 * records or balances: the part where a change happens knows its figures and passes them here.
 * Names follow the spec's words with the unit last; amounts are whole credits. Pure types.
 */
import type { Tier } from "../core/index.ts";

/** What every job event says about its job. `wallet` is the account whose webhooks receive it. */
export interface JobFacts {
  jobId: string;
  wallet: string;
  model: string;
  tier: Tier;
  status: string;
}

/** The job exists and its credits are locked; `creditsRemaining` is the balance after the lock. */
export interface JobSubmittedFacts extends JobFacts {
  creditsLocked: number;
  creditsRemaining: number;
  escrowTx: string | null;
}

export interface JobProcessingFacts extends JobFacts {
  creditsLocked: number;
  workerAddress: string | null;
}

/** Settlement confirmed: the charge is taken and the rest of the lock is back in the balance. */
export interface JobCompletedFacts extends JobFacts {
  creditsCharged: number;
  workerAddress: string | null;
  settlementTx: string;
  slot: number;
  promptTokens: number;
  completionTokens: number;
  creditsRemaining: number;
}

/**
 * The job ended without a charge and its whole lock came back. Status `refunded` (the 120-second
 * rule) makes it job.timeout; any other status, job.failed.
 */
export interface JobEndedFacts extends JobFacts {
  failureReason: string | null;
  creditsRefunded: number;
  creditsRemaining: number;
  refundTx: string | null;
}

export interface JobDisputedFacts extends JobFacts {
  creditsCharged: number;
  yourHash: string;
  workerHash: string;
  disputeTx: string;
  arbitrationWindowHours: number;
}

/** The balance crossed below the wallet's threshold (the caller decided it did). */
export interface CreditLowFacts {
  wallet: string;
  creditsRemaining: number;
  thresholdCredits: number;
}

export interface CreditTopupFacts {
  wallet: string;
  creditsAdded: number;
  creditsRemaining: number;
  depositTx: string;
}

export interface WorkerRegisteredFacts {
  address: string;
  models: string[];
  staked: boolean;
}

export interface WorkerSlashedFacts {
  workerAddress: string;
  /** In whole native tokens, as the spec's integer field. */
  slashAmountSvc: number;
  slashTx: string;
  reason: string;
  relatedJobId: string;
}
