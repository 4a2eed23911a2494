/**
 * One function per event, each called with the transaction handle of the change it reports and
 * the facts the event says (./facts.ts). Job and credit events belong to the job's or wallet's
 * account. Worker events belong to the account whose wallet address is the worker's address: an
 * operator receives its own workers' events by signing in with the worker key's wallet.
 *
 * These only write what they are told. Whether a balance change crossed the credit.low threshold
 * is decided where balances change (the jobs part's money path), which then calls emitCreditLow
 * after the change's own event.
 */
import type { Db } from "../store/index.ts";
import {
  creditLowData,
  creditTopupData,
  jobCompletedData,
  jobDisputedData,
  jobEndedData,
  jobProcessingData,
  jobSubmittedData,
  workerRegisteredData,
  workerSlashedData,
} from "./data.ts";
import type {
  CreditLowFacts,
  CreditTopupFacts,
  JobCompletedFacts,
  JobDisputedFacts,
  JobEndedFacts,
  JobProcessingFacts,
  JobSubmittedFacts,
  WorkerRegisteredFacts,
  WorkerSlashedFacts,
} from "./facts.ts";
import { emitEvent, type NewEvent } from "./outbox.ts";

/** The job row is committed with its reservation in `tx`. */
export async function emitJobSubmitted(tx: Db, job: JobSubmittedFacts): Promise<void> {
  await emitEvent(tx, jobSubmittedEvent(job));
}

/** A worker was assigned and the job turned `processing` in `tx`. */
export async function emitJobProcessing(tx: Db, job: JobProcessingFacts): Promise<void> {
  await emitEvent(tx, jobProcessingEvent(job));
}

/** The events that emitJobSubmitted, emitJobProcessing and emitCreditLow write, for writing many at once with emitEvents. */
export function jobSubmittedEvent(job: JobSubmittedFacts): NewEvent {
  return { account: job.wallet, name: "job.submitted", data: jobSubmittedData(job), dedupeKey: `job.submitted:${job.jobId}` };
}

export function jobProcessingEvent(job: JobProcessingFacts): NewEvent {
  return { account: job.wallet, name: "job.processing", data: jobProcessingData(job), dedupeKey: `job.processing:${job.jobId}` };
}

export function creditLowEvent(low: CreditLowFacts): NewEvent {
  return { account: low.wallet, name: "credit.low", data: creditLowData(low) };
}

/** Settlement confirmed in `tx`: worker paid, charge posted, the rest of the lock released. */
export async function emitJobCompleted(tx: Db, job: JobCompletedFacts): Promise<void> {
  await emitEvent(tx, jobCompletedEvent(job));
}

export function jobCompletedEvent(job: JobCompletedFacts): NewEvent {
  return { account: job.wallet, name: "job.completed", data: jobCompletedData(job), dedupeKey: `job.completed:${job.jobId}` };
}

/**
 * The job's reservation was released in `tx` without a charge: job.timeout for a job refunded
 * by the 120-second rule (status `refunded`), job.failed for any other end.
 */
export async function emitJobEnded(tx: Db, job: JobEndedFacts): Promise<void> {
  const name = job.status === "refunded" ? "job.timeout" : "job.failed";
  await emitEvent(tx, { account: job.wallet, name, data: jobEndedData(job), dedupeKey: `${name}:${job.jobId}` });
}

/** For the disputes feature (not built yet): call in the transaction that records the dispute. */
export async function emitJobDisputed(tx: Db, job: JobDisputedFacts): Promise<void> {
  await emitEvent(tx, { account: job.wallet, name: "job.disputed", data: jobDisputedData(job), dedupeKey: `job.disputed:${job.jobId}` });
}

/** The caller found that the change it made in `tx` took the balance below the wallet's threshold. */
export async function emitCreditLow(tx: Db, low: CreditLowFacts): Promise<void> {
  await emitEvent(tx, creditLowEvent(low));
}

/** A deposit was credited in `tx`. */
export async function emitCreditTopup(tx: Db, topup: CreditTopupFacts): Promise<void> {
  await emitEvent(tx, { account: topup.wallet, name: "credit.topup", data: creditTopupData(topup), dedupeKey: `credit.topup:${topup.depositTx}` });
}

/** For the network part: call in the transaction that records the worker joining. */
export async function emitWorkerRegistered(tx: Db, worker: WorkerRegisteredFacts): Promise<void> {
  await emitEvent(tx, { account: worker.address, name: "worker.registered", data: workerRegisteredData(worker) });
}

/** For the arbitration feature (not built yet): call in the transaction that records the slash. */
export async function emitWorkerSlashed(tx: Db, slash: WorkerSlashedFacts): Promise<void> {
  await emitEvent(tx, { account: slash.workerAddress, name: "worker.slashed", data: workerSlashedData(slash), dedupeKey: `worker.slashed:${slash.slashTx}` });
}
