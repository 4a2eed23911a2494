/**
 * The jobs' invariants, checked from scratch over every job and its reservation in the ledger:
 *
 *   unfinished_holds_reservation  a pending or processing job's whole lock is reserved, still pending
 *   settling_holds_charge         a settling job's reservation is posted for exactly what it charges
 *                                 (voided when that is nothing), the charge posted when its
 *                                 settlement was recorded; or, when its record posted no charge
 *                                 (a data dir written by a version that posted it later), still
 *                                 pending for its whole lock
 *   running_has_worker            a processing, settling or settled job names its worker
 *   settling_has_proof            a settling or settled job has the worker's proof and a settlement signature
 *                                 (a settling job of an escrow table: once its worker's batch is signed)
 *   settled_is_charged            a settled job's reservation is posted for exactly what it charged, and it
 *                                 has its settlement's slot and completion time
 *   ended_charges_nothing         a failed or refunded job charged nothing and has no posted charge
 *   refunded_has_refund           a refunded job names its refund transaction
 *   completed_is_released         a failed or refunded job that is completed holds no pending reservation
 *                                 (completed_at is set when its refund confirms, or at once when its
 *                                 escrow never reached the chain)
 *   completed_only_when_final     only a settled, failed or refunded job has a completion time
 *
 * Read through the jobs part's and the ledger's own functions. It scans everything: for tests (at
 * the end of each story, beside the ledger's checkInvariants), audits and an admin command, not
 * for a request path.
 */
import type { Db } from "../store/index.ts";
import { JOB_STATUSES, type JobRecord } from "./job-record.ts";
import { jobsWithStatus } from "./job-repo.ts";
import { isFinal } from "./job-states.ts";
import * as money from "./money.ts";

export type JobInvariant =
  | "unfinished_holds_reservation"
  | "settling_holds_charge"
  | "running_has_worker"
  | "settling_has_proof"
  | "settled_is_charged"
  | "ended_charges_nothing"
  | "refunded_has_refund"
  | "completed_is_released"
  | "completed_only_when_final";

export interface JobInvariantViolation {
  invariant: JobInvariant;
  jobId: string;
  detail: string;
}

type Reservation = { credits: number; state: string } | undefined;

/** Each broken invariant of one job, as [invariant, detail]. */
function violationsOf(job: JobRecord, reservation: Reservation, charged: number | undefined): [JobInvariant, string][] {
  const found: [JobInvariant, string][] = [];
  const { status } = job;
  const held = reservation ? `${reservation.credits} credits ${reservation.state}` : "no reservation";
  const holdsLock = reservation?.state === "pending" && reservation.credits === job.creditsLocked;
  if (["pending", "processing"].includes(status) && !holdsLock) {
    found.push(["unfinished_holds_reservation", `${status} with ${job.creditsLocked} credits locked; the ledger has ${held}`]);
  }
  if (status === "settling" && !holdsLock && !chargedAsRecorded(job, reservation, charged)) {
    found.push(["settling_holds_charge", `settling, charging ${job.creditsCharged} of ${job.creditsLocked}; the ledger has ${held}, a charge of ${charged ?? "nothing"}`]);
  }
  if (["processing", "settling", "settled"].includes(status) && job.workerAddress === null) {
    found.push(["running_has_worker", `${status} with no worker`]);
  }
  // An escrow table's settling job waits for its worker's batch: its settlement is signed later.
  const settlementDue = status === "settled" || (status === "settling" && job.escrowTableId === null);
  if (["settling", "settled"].includes(status) && (job.proofHash === null || job.proofSignature === null || (settlementDue && job.settlementTx === null))) {
    found.push(["settling_has_proof", `${status} without its proof or settlement signature`]);
  }
  if (status === "settled" && (reservation?.state !== "posted" || charged !== job.creditsCharged || job.slot === null || job.completedAt === null)) {
    found.push(["settled_is_charged", `charged ${job.creditsCharged}; the ledger has ${held}, a charge of ${charged ?? "nothing"}; slot ${job.slot}`]);
  }
  if ((status === "failed" || status === "refunded") && (job.creditsCharged !== 0 || charged !== undefined)) {
    found.push(["ended_charges_nothing", `${status} charging ${job.creditsCharged}, ledger charge ${charged ?? "none"}`]);
  }
  if (status === "refunded" && job.refundTx === null) found.push(["refunded_has_refund", "refunded with no refund transaction"]);
  if ((status === "failed" || status === "refunded") && job.completedAt !== null && reservation?.state === "pending") {
    found.push(["completed_is_released", `${status} and completed, yet ${held}`]);
  }
  if (!isFinal(status) && job.completedAt !== null) found.push(["completed_only_when_final", `${status} with a completion time`]);
  return found;
}

function chargedAsRecorded(job: JobRecord, reservation: Reservation, charged: number | undefined): boolean {
  if (job.creditsCharged === 0) return reservation?.state === "voided" && charged === undefined;
  return reservation?.state === "posted" && charged === job.creditsCharged;
}

/** Every violation found; an empty list means every job agrees with the ledger and with its own state. */
export async function checkJobInvariants(db: Db): Promise<JobInvariantViolation[]> {
  const jobs = await jobsWithStatus(db, [...JOB_STATUSES]);
  const reservations = await money.jobReservations(db);
  const charges = await money.jobCharges(db);
  return jobs.flatMap((job) =>
    violationsOf(job, reservations.get(job.id), charges.get(job.id)).map(([invariant, detail]) => ({ invariant, jobId: job.id, detail })),
  );
}
