/**
 * One function per event, each called with the transaction handle of the change it reports.
 * Job and credit events belong to the job's or wallet's account. Worker events belong to the
 * account whose wallet address is the worker's address: an operator receives its own workers'
 * events by signing in with the worker key's wallet.
 *
 * Every balance change of a wallet comes with one of its events (reserve: job.submitted,
 * settlement: job.completed, release: job.failed / job.timeout, deposit: credit.topup), so those
 * emitters also evaluate credit.low, keeping the rule in one place. A withdrawal, when built,
 * calls evaluateCreditLow itself.
 */
import type { JobRecord } from "../jobs/job-record.ts";
import * as money from "../jobs/money.ts";
import type { Db } from "../store/db.ts";
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
  type DisputeFacts,
  type Slash,
  type WorkerRegistration,
} from "./data.ts";
import { emitEvent } from "./outbox.ts";

/** The job row is committed with its reservation in `tx`. */
export async function emitJobSubmitted(tx: Db, job: JobRecord, creditsRemaining?: number): Promise<void> {
  const remaining = creditsRemaining ?? (await money.availableCredits(tx, job.wallet));
  await emitEvent(tx, { account: job.wallet, name: "job.submitted", data: jobSubmittedData(job, remaining), dedupeKey: `job.submitted:${job.id}` });
  await evaluateCreditLow(tx, job.wallet, remaining, true);
}

/** A worker was assigned and the job turned `processing` in `tx`. */
export async function emitJobProcessing(tx: Db, job: JobRecord): Promise<void> {
  await emitEvent(tx, { account: job.wallet, name: "job.processing", data: jobProcessingData(job), dedupeKey: `job.processing:${job.id}` });
}

/** Settlement confirmed in `tx`: worker paid, charge posted, the rest of the lock released. */
export async function emitJobCompleted(tx: Db, job: JobRecord, settlement: { settlementTx: string; slot: number }): Promise<void> {
  const remaining = await money.availableCredits(tx, job.wallet);
  await emitEvent(tx, {
    account: job.wallet,
    name: "job.completed",
    data: jobCompletedData(job, { ...settlement, creditsRemaining: remaining }),
    dedupeKey: `job.completed:${job.id}`,
  });
  await evaluateCreditLow(tx, job.wallet, remaining, false);
}

/**
 * The job's reservation was released in `tx` without a charge: job.timeout for a job refunded
 * by the 120-second rule (status `refunded`), job.failed for any other end.
 */
export async function emitJobEnded(tx: Db, job: JobRecord): Promise<void> {
  const name = job.status === "refunded" ? "job.timeout" : "job.failed";
  const remaining = await money.availableCredits(tx, job.wallet);
  await emitEvent(tx, { account: job.wallet, name, data: jobEndedData(job, remaining), dedupeKey: `${name}:${job.id}` });
  await evaluateCreditLow(tx, job.wallet, remaining, false);
}

/** For the disputes feature (not built yet): call in the transaction that records the dispute. */
export async function emitJobDisputed(tx: Db, job: JobRecord, dispute: DisputeFacts): Promise<void> {
  await emitEvent(tx, { account: job.wallet, name: "job.disputed", data: jobDisputedData(job, dispute), dedupeKey: `job.disputed:${job.id}` });
}

/** A deposit was credited in `tx`. */
export async function emitCreditTopup(tx: Db, wallet: string, deposit: { credits: number; depositTx: string }): Promise<void> {
  const remaining = await money.availableCredits(tx, wallet);
  await emitEvent(tx, {
    account: wallet,
    name: "credit.topup",
    data: creditTopupData(deposit.credits, remaining, deposit.depositTx),
    dedupeKey: `credit.topup:${deposit.depositTx}`,
  });
  await evaluateCreditLow(tx, wallet, remaining, false);
}

/** For the network part: call in the transaction that records the worker joining. */
export async function emitWorkerRegistered(tx: Db, worker: WorkerRegistration): Promise<void> {
  await emitEvent(tx, { account: worker.address, name: "worker.registered", data: workerRegisteredData(worker) });
}

/** For the arbitration feature (not built yet): call in the transaction that records the slash. */
export async function emitWorkerSlashed(tx: Db, slash: Slash): Promise<void> {
  await emitEvent(tx, {
    account: slash.workerAddress,
    name: "worker.slashed",
    data: workerSlashedData(slash),
    dedupeKey: `worker.slashed:${slash.slashTx}`,
  });
}

/**
 * credit.low: fires when the available balance goes from at-or-above the wallet's threshold to
 * below it, once; re-arms when a later change leaves it at or above the threshold again. Only a
 * change that lowered the balance (`fell`: a reservation, a withdrawal) can fire it: a deposit
 * that leaves a new wallet below the threshold has not crossed it.
 *
 * The row is written only when the side changes, so most changes write nothing. Two concurrent
 * changes of one wallet that both cross: the second waits for the first's row lock, then finds
 * the flag already flipped and matches nothing, so the event fires once.
 */
export async function evaluateCreditLow(tx: Db, wallet: string, available: number, fell: boolean): Promise<void> {
  const [flipped] = await tx.query<{ armed: boolean; threshold: number }>(
    `UPDATE wallets SET credit_low_armed = ($2 >= credit_low_threshold)
      WHERE address = $1 AND credit_low_armed <> ($2 >= credit_low_threshold)
      RETURNING credit_low_armed AS armed, credit_low_threshold AS threshold`,
    [wallet, available],
  );
  if (!flipped || flipped.armed || !fell) return;
  await emitEvent(tx, { account: wallet, name: "credit.low", data: creditLowData(available, flipped.threshold) });
}
