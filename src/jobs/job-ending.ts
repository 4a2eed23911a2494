/**
 * How a job ends once its workers are done: settled for what the worker produced (the proof
 * checked on-chain), or ended without a charge with its escrow sent back. Each status change goes
 * through `moveJob` (the state table of job-states.ts); each chain transaction is recorded in the
 * same database transaction as the change that calls for it, then sent through the journal.
 */
import { addCreditLowSides } from "../accounts/index.ts";
import { ChainRejectedError, type Chain, type ChainAction, type ChainJournal } from "../chain/index.ts";
import { ANSWER_BEFORE_CONFIRM_MARGIN_MS, ApiError, awaitedLater, Channel, type Logger, TIERS, completionCost, outputHash, proofVerifies, splitPayout } from "../core/index.ts";
import type { FinishReason, StopReason, Usage } from "../inference/index.ts";
import type { JobOutcome, WorkerEvent, WorkerLease } from "../network/index.ts";
import { CombinedStatement, GroupCommit, type Db } from "../store/index.ts";
import { escrowPlace, escrowState, prepareRefund, prepareSettlement, type EscrowAction, type EscrowLanding, type SettlementOutcome } from "./job-chain.ts";
import type { TableRefunds } from "./table-refunds.ts";
import type { TableSettlements } from "./table-settlements.ts";
import type { JobRecord, JobStatus } from "./job-record.ts";
import type { CreditBook } from "../wallets/index.ts";
import { addJobMoves, getJob, moveJob, mustMoveJob, type JobChanges } from "./job-repo.ts";
import { nextStatus } from "./job-states.ts";
import * as money from "./money.ts";

export type JobEvent =
  | { type: "delta"; text: string }
  /** The worker finished; settlement follows. */
  | { type: "finished"; finishReason: FinishReason; usage: Usage }
  /**
   * The ledger charged the job and its settlement transaction is signed and recorded: the caller
   * may have its answer. The transaction confirms after (the job reads `settling` until then).
   * An escrow table's job is answered before its batch's settlement is signed: `settlementTx` is
   * then null, and the job and its job.completed event carry it.
   */
  | { type: "charged"; settlementTx: string | null; creditsRemaining: number };

/** What a job's workers produced. */
export interface WorkerRun {
  /** The lease of the worker that ran it last. */
  lease: WorkerLease;
  /** The output as the gateway received it. */
  text: string;
  done: Extract<WorkerEvent, { type: "done" }> | undefined;
  workerError: unknown;
}

/** What ending a job needs from the service. */
export interface EndingDeps {
  db: Db;
  chain: Chain;
  journal: ChainJournal;
  logger: Logger;
  timeoutMs: number;
  /** FAULT INJECTION (tests only): settle on the worker's claimed hash, unchecked (JobServiceOptions). */
  skipProofCheck: boolean;
  /** Told once a job settled, with its worker (JobServiceOptions.onSettled). */
  settled: (jobId: string, workerAddress: string) => void;
  /** Records proofs, settlement transactions and charges, committed in groups (settlementRecords below). */
  settlementRecords: GroupCommit<SettlementRecord, RecordedSettlement>;
  /** Batches the settlements of escrow-table jobs (table-settlements.ts); absent when the node locks no tables. */
  tableSettlements: TableSettlements | undefined;
  /** Batches the refunds of escrow-table jobs (table-refunds.ts); absent when the node locks no tables. */
  tableRefunds: TableRefunds | undefined;
  /** Callers answered whose settlements have not confirmed yet, and how many may be (conclude below). */
  unconfirmed: { count: number; max: number };
  /** The node's book of wallets' credits (JobServiceOptions.book): a charge gives back the rest of its lock. */
  book: CreditBook | undefined;
  /** Told of each job this module ends (refunded, failed), once its move has committed. */
  ended?: (jobId: string, status: JobStatus) => void;
}

/**
 * By default, at most this many callers are answered before their settlements confirm; the next
 * ones wait for the chain. Under more load than the chain and the database confirm, answering first would let
 * the backlog grow without bound: this keeps it to about one confirmation group.
 */
export const MAX_ANSWERED_UNCONFIRMED = 64;

/** A job's proof and settlement transaction, to record before the settlement is sent. */
export interface SettlementRecord {
  job: JobRecord;
  /**
   * With the escrow's slot once it landed: the job's row takes it here when the escrow's
   * confirmation is folded in. A charge recorded with its admission comes before its escrow lands:
   * the row takes the slot when it does.
   */
  changes: JobChanges;
  /** Absent for an escrow table's job: its batch's settlement is recorded later (TableSettlements). */
  settlement?: ChainAction;
  /** The job's escrow, landed, when its confirmation is written with this record (EscrowLanding). */
  escrowLanded?: { action: ChainAction; slot: number };
}

/** A job as its settlement's record left it, and its wallet's credits available after its charge. */
export interface RecordedSettlement {
  job: JobRecord;
  creditsRemaining: number;
}

/**
 * Records several jobs' proofs, settlement transactions and charges in one transaction: their
 * charges in one ledger operation (the unused part of each lock goes back at once), then one
 * statement moving their rows to `settling`, recording their settlements and setting the
 * wallets' credit.low sides: a charge only gives credits back, so the rule can only re-arm and
 * fires nothing here. A job that moved on meanwhile fails the group, its charge with it. The
 * escrows that landed before their confirmation was written are marked confirmed in the same
 * statement (the job's row takes the slot with its move). The records passed stay as they were
 * until the caller takes the jobs returned (the group may be retried).
 */
export function settlementRecords(db: Db, journal: ChainJournal): GroupCommit<SettlementRecord, RecordedSettlement> {
  return new GroupCommit(db, (tx, records) => recordSettlements(tx, journal, records));
}

/** Inside `tx`: the records of `settlementRecords`, or the charges of jobs being admitted in `tx` (admission.ts). */
export async function recordSettlements(tx: Db, journal: ChainJournal, records: readonly SettlementRecord[]): Promise<RecordedSettlement[]> {
  // The charge reads what the proof's changes set (the credits charged); the move then writes them.
  const moved: JobRecord[] = records.map(({ job, changes }) => ({ ...job, ...changes, status: job.status }));
  const creditsRemaining = await money.chargeAll(tx, moved);
  const writes = new CombinedStatement(tx);
  const checkMoved = addJobMoves(writes, records.map(({ changes }, i) => ({ job: moved[i]!, changes })), "proof_recorded");
  journal.addRecords(writes, records.flatMap((r) => r.settlement ?? []));
  journal.addConfirmed(writes, records.flatMap((r) => r.escrowLanded ?? []));
  addCreditLowSides(writes, moved.map((job, i) => ({ wallet: job.wallet, availableCredits: creditsRemaining[i]! })));
  checkMoved(await writes.run<{ id: string }>(tx));
  return moved.map((job, i) => ({ job, creditsRemaining: creditsRemaining[i]! }));
}

/** The driver's view of a job being ended: where its news goes, and its escrow's fate. */
export interface EndingJob {
  job: JobRecord;
  /** The escrow on its way to the chain, and who records its confirmation (the charge, when it can). */
  escrow: EscrowLanding;
  channel: Channel<JobEvent>;
  /** The caller's figures (credits remaining) as the job goes. */
  started: { creditsRemaining: number };
}

type Charged =
  | { ok: true; settlement: ChainAction | null; creditsRemaining: number }
  /** `escrowFailed`: the job's lock never reached the chain, the service's failure, not the worker's. */
  | { ok: false; escrowFailed?: true; creditsRemaining?: number };

type Confirmed =
  | { ok: true; slot: number }
  /** `escrow_failed`: a job charged with its admission whose lock then never landed (the lock's outcome gave the charge back). */
  | { ok: false; reason: "rejected" | "unconfirmed" | "escrow_refunded" | "escrow_failed"; creditsRemaining?: number };

/**
 * Settle what the worker produced, or give the escrow back when it produced nothing to charge.
 * The caller has its answer once the charge is recorded (DECISIONS "Answering before the chain
 * confirms"), unless the escrow is near its on-chain timeout or the most callers allowed
 * (MAX_ANSWERED_UNCONFIRMED) already wait on the chain; the driver stays until the settlement confirms, then the worker
 * hears it was paid.
 */
export async function conclude(
  deps: EndingDeps,
  ending: EndingJob,
  run: WorkerRun,
  how: {
    timedOut: boolean;
    callerLeft: boolean;
    metered: (done: NonNullable<WorkerRun["done"]>) => Promise<{ usage: Usage; outcome: JobOutcome }>;
    /** The job was charged in its admission's transaction (chargeAtAdmission): its credits after that. */
    chargedAtAdmission?: { creditsRemaining: number };
  },
): Promise<void> {
  const { job, channel } = ending;
  const { done, text } = run;
  // A worker that finished just as the timer fired has finished: the rule is about finishing.
  if (how.timedOut && done === undefined) {
    const refund = await refundJob(deps, job, ending.escrow.confirmed, "refunded", "timeout");
    const seconds = Math.round(deps.timeoutMs / 1000);
    const details = { job_id: job.id, credits_refunded: job.creditsLocked, refund_tx: refund.refundTx };
    return fail(deps, ending, refund, new ApiError("job_timeout", `No worker finished the job within ${seconds} seconds; its credits were returned.`, null, details));
  }
  // Stopped before any output: nothing to charge, whatever the worker counted.
  if (done === undefined || (done.finishReason === "cancelled" && text === "")) {
    if (run.workerError !== undefined) deps.logger.warn({ err: run.workerError, job: job.id }, "worker failed");
    const reason = how.callerLeft ? "client_disconnected" : "worker_error";
    // A lock not yet signed never is: nothing went to the chain, so nothing comes back from it.
    ending.escrow.withdrawUnsigned(reason);
    const refund = await refundJob(deps, job, ending.escrow.confirmed, "failed", reason);
    return fail(deps, ending, refund, new ApiError("internal_error", "The worker stopped before finishing the job; nothing was charged. Retrying usually succeeds."));
  }
  const metered = await how.metered(done);
  const atAdmission = how.chargedAtAdmission;
  // A charge recorded with the admission was made for a proof checked then.
  const proven = atAdmission !== undefined || proofHolds(deps, job, text, done);
  // A cancelled job's caller is gone: there is nobody to tell how it finished. A proof over other
  // text fails the job, and a stream told it finished would have sent its [DONE] already.
  if (proven && done.finishReason !== "cancelled") channel.push({ type: "finished", finishReason: done.finishReason, usage: metered.usage });
  const charged: Charged = atAdmission ? { ok: true, settlement: null, ...atAdmission } : await charge(deps, job, text, { ...done, usage: metered.usage }, ending.escrow, proven);
  if (!charged.ok && charged.escrowFailed) {
    run.lease.outcome(metered.outcome);
    return fail(deps, ending, charged, new ApiError("internal_error", "The job's escrow lock did not reach the chain; nothing was charged. Retrying usually succeeds."));
  }
  if (!charged.ok) {
    run.lease.outcome("failed");
    return fail(deps, ending, charged, new ApiError("internal_error", "The worker's proof of this output did not verify; nothing was charged."));
  }
  const answer = () => {
    ending.started.creditsRemaining = charged.creditsRemaining;
    channel.push({ type: "charged", settlementTx: charged.settlement?.signature ?? null, creditsRemaining: charged.creditsRemaining });
    channel.close();
  };
  // The count is checked and raised with no await between, so the bound holds under concurrency.
  const answeredFirst = (await farFromEscrowTimeout(deps.chain, job)) && deps.unconfirmed.count < deps.unconfirmed.max;
  if (answeredFirst) {
    answer();
    deps.unconfirmed.count++;
  }
  const confirmed = await settleAndConfirm(deps, job, charged.settlement, run, ending.escrow.confirmed).finally(() => {
    if (answeredFirst) deps.unconfirmed.count--;
  });
  run.lease.outcome(confirmed.ok || confirmed.reason !== "rejected" ? metered.outcome : "failed");
  if (confirmed.ok) {
    run.lease.worker.settled?.(job.id, splitPayout(job.creditsCharged, job.workerStaked).worker, job.settlementTx ?? "");
    deps.settled(job.id, job.workerAddress ?? "");
  }
  if (answeredFirst) return;
  if (confirmed.ok || confirmed.reason === "unconfirmed") return answer();
  return fail(deps, ending, confirmed, new ApiError("internal_error", UNSETTLED_WHY[confirmed.reason]));
}

/** What a caller still waiting is told when its job's settlement did not confirm. */
const UNSETTLED_WHY = {
  escrow_refunded: "The job's escrow was refunded on-chain, past the escrow program's timeout, before the service settled it; nothing was charged.",
  escrow_failed: "The job's escrow lock did not reach the chain; nothing was charged. Retrying usually succeeds.",
  rejected: "The worker's proof of this output did not verify; nothing was charged.",
} as const;

/**
 * Send the job's recorded settlement and confirm it; an escrow table's job's settlement is first
 * put in its worker's next batch (TableSettlements) and recorded once the worker signs the batch.
 * A worker that does not sign is not paid: the job's escrow goes back.
 */
async function settleAndConfirm(deps: EndingDeps, job: JobRecord, recorded: ChainAction | null, run: WorkerRun, escrowLanded: Promise<number>): Promise<Confirmed> {
  let settlement = recorded;
  if (settlement === null) {
    // A job charged with its admission is charged before its escrow lands; the batch needs it on
    // the chain. A lock that never landed had its outcome give the charge back.
    if (!(await escrowLanded.then(() => true, () => false))) return { ok: false, reason: "escrow_failed" };
    try {
      settlement = await deps.tableSettlements!.settle(job, run.lease.worker);
    } catch (error) {
      deps.logger.warn({ err: error, job: job.id, worker: job.workerAddress }, "the worker did not sign its settlement; the job's escrow goes back");
      return { ok: false, reason: "rejected", ...(await refundJob(deps, job, escrowLanded, "failed", "settlement_unsigned")) };
    }
  }
  return confirmSettlement(deps, job, settlement, escrowLanded);
}

/**
 * Whether the wallet cannot refund the job's escrow before its settlement lands, so the caller
 * may be answered first: the program's timeout, counted from the job's creation (its lock comes
 * after), is more than ANSWER_BEFORE_CONFIRM_MARGIN_MS away.
 */
async function farFromEscrowTimeout(chain: Chain, job: JobRecord): Promise<boolean> {
  const timeoutMs = Number(await chain.jobTimeoutSeconds()) * 1000;
  return Date.now() + ANSWER_BEFORE_CONFIRM_MARGIN_MS < job.createdAt.getTime() + timeoutMs;
}

/**
 * End a job that charged nothing: the caller learns why, and its balance now that the escrow is
 * back, as the refund's confirmation left it (read only when the refund did not report it).
 */
async function fail(deps: EndingDeps, ending: EndingJob, returned: { creditsRemaining?: number }, error: ApiError): Promise<void> {
  ending.started.creditsRemaining = returned.creditsRemaining ?? (await money.availableCredits(deps.db, ending.job.wallet));
  ending.channel.close(error);
}

/** What a job that finished with a proof is charged, as recorded with its settlement. */
type Finished = { finishReason: StopReason; usage: Usage; signature: Uint8Array; outputHash: string };

/**
 * Charge the job: record its proof (`proven` says whether it holds for the text), the settlement
 * transaction (its first instruction verifies the proof on-chain) and the charge in the ledger,
 * in one commit shared with the jobs recorded beside it. A job whose escrow never landed, or
 * whose proof does not match the text, is refunded instead.
 *
 * The settlement is signed while the escrow may still be on its way to the chain: it does not
 * need it there, and a worker that answers before its escrow lands (a fast upstream does, by
 * about a millisecond here) would otherwise wait for the signing after it. Only the
 * record waits for the escrow; a settlement signed for an escrow that never lands is dropped.
 * When the escrow lands after the output is in, its confirmation is written with the record.
 */
async function charge(deps: EndingDeps, job: JobRecord, text: string, done: Finished, escrow: EscrowLanding, proven: boolean): Promise<Charged> {
  const proved = provedChanges(deps, job, text, done);
  // An escrow table's job is settled in its worker's batch, later (settleAndConfirm). A node that
  // locks into tables locks every job there, some only once the charge hurries their lock.
  const batched = deps.tableSettlements !== undefined || job.escrowTableId !== null;
  const signed = !proven ? Promise.resolve(null) : batched ? Promise.resolve(undefined) : prepareSettlement(deps.chain, { ...job, ...proved });
  // Awaited below once the escrow has landed.
  awaitedLater(signed);
  const landed = await escrow.forCharge().catch(() => null);
  if (landed === null) return { ok: false, escrowFailed: true, ...(await refundJob(deps, job, escrow.confirmed, "failed", "escrow_failed")) };
  // Sent again alone (the transaction it shared was refused), a table's lock took a slot of a new table.
  if (batched) Object.assign(job, escrowPlace(landed.action as EscrowAction));
  const charged = await recordCharge(deps, job, { ...proved, slot: landed.slot }, signed, escrow, landed);
  if (charged === null) {
    deps.logger.warn({ job: job.id, worker: job.workerAddress }, "the worker's proof does not match the output it sent; nothing is charged");
    return { ok: false, ...(await refundJob(deps, job, escrow.confirmed, "failed", "proof_rejected")) };
  }
  Object.assign(job, charged.recorded.job);
  return { ok: true, settlement: charged.settlement, creditsRemaining: charged.recorded.creditsRemaining };
}

/**
 * The changes charging a finished job in its admission's transaction (Admission.charge), for one
 * whose output was in before that transaction began: one commit for both. Undefined when its
 * proof does not hold for the text (it is refunded after its admission, as any other), or when
 * the node locks no escrow tables: only a table's job is settled later, in its worker's batch,
 * which waits for the escrow to land.
 */
export function chargeAtAdmission(deps: EndingDeps, job: JobRecord, text: string, done: Finished): JobChanges | undefined {
  if (deps.tableSettlements === undefined || !proofHolds(deps, job, text, done)) return undefined;
  return provedChanges(deps, job, text, done);
}

/**
 * The settlement's record (`signed` undefined: the charge alone, its settlement batched later),
 * with the escrow's confirmation when that is the charge's to write (`landed.fold`); null when
 * the proof does not hold. A confirmation left to the charge is
 * written on its own when nothing is recorded, before whatever follows (a refund, recovery) reads
 * the escrow's slot from the job's row.
 */
async function recordCharge(
  deps: EndingDeps,
  job: JobRecord,
  proved: JobChanges & { slot: number },
  signed: Promise<ChainAction | null | undefined>,
  escrow: EscrowLanding,
  landed: { action: ChainAction; slot: number; fold: boolean },
): Promise<{ settlement: ChainAction | null; recorded: RecordedSettlement } | null> {
  const { action, slot, fold } = landed;
  let recorded: RecordedSettlement | undefined;
  try {
    const settlement = await signed;
    if (settlement === null) return null;
    const folded = fold ? { escrowLanded: { action, slot } } : {};
    const changes = settlement ? { ...proved, settlementTx: settlement.signature } : proved;
    const giveBack = deps.book?.give(job.wallet, job.creditsLocked - (proved.creditsCharged ?? 0));
    recorded = await deps.settlementRecords.run({ job, changes, ...(settlement ? { settlement } : {}), ...folded }).catch((error: unknown) => {
      giveBack?.done(false);
      throw error;
    });
    giveBack?.done(true, recorded.creditsRemaining);
    return { settlement: settlement ?? null, recorded };
  } finally {
    if (fold && recorded) escrow.recorded(action, slot);
    else if (fold) await escrow.notRecorded(action, slot).catch(() => undefined);
  }
}

/**
 * Whether the worker's proof is over the text the caller received. Checked before anything is
 * signed, so a settled job's proof always is; the program would refuse a bad one too, but only
 * after a fee was spent.
 */
function proofHolds(deps: EndingDeps, job: JobRecord, text: string, done: Finished): boolean {
  return deps.skipProofCheck || proofVerifies(job.id, text, job.workerAddress ?? "", done.signature);
}

/** The job's changes once charged: the proof the gateway checked, the usage and the charge. */
function provedChanges(deps: EndingDeps, job: JobRecord, text: string, done: Finished) {
  return {
    // The gateway hashes what it actually received; a worker that signed anything else fails on-chain.
    // FAULT INJECTION (skipProofCheck): a buggy gateway that settles on the worker's word.
    proofHash: deps.skipProofCheck ? done.outputHash : outputHash(text),
    proofSignature: Buffer.from(done.signature).toString("base64"),
    creditsCharged: Math.min(job.creditsLocked, completionCost(TIERS[job.tier], done.usage.completionTokens)),
    promptTokens: done.usage.promptTokens,
    completionTokens: done.usage.completionTokens,
    finishReason: done.finishReason,
    lastTokenAt: new Date(),
  } satisfies JobChanges;
}

/**
 * Send a recorded settlement. When the chain rejects it, the escrow is returned, and with it the
 * charge; when the chain cannot be reached, the job stays `settling` with its settlement
 * recorded, for recovery to finish.
 */
async function confirmSettlement(deps: EndingDeps, job: JobRecord, settlement: ChainAction, escrowLanded: Promise<number>): Promise<Confirmed> {
  try {
    // The job as recorded with its settlement: its confirmation reads nothing more of it.
    return { ok: true, slot: (await deps.journal.send({ ...settlement, subjectRecord: { ...job } })).slot };
  } catch (error) {
    if (!(error instanceof ChainRejectedError)) {
      // Not refused, just not confirmed: a refund now could race a settlement that still lands.
      deps.logger.error({ err: error, job: job.id }, "settlement not confirmed; left for recovery");
      return { ok: false, reason: "unconfirmed" };
    }
    // Past the program's timeout anyone may refund the escrow; then the proof was not the problem.
    const refundedFirst = (await escrowState(deps.chain, job))?.status === "refunded";
    deps.logger.warn({ err: error, job: job.id, refundedFirst }, "settlement rejected on-chain; the charge goes back");
    const refund = await refundJob(deps, job, escrowLanded, "failed", refundedFirst ? "escrow_refunded" : "proof_rejected");
    return { ok: false, reason: refundedFirst ? "escrow_refunded" : "rejected", ...refund };
  }
}

/** Send the escrow back to the wallet (refund transaction); the reservation is released when it confirms. */
export async function refundJob(
  deps: EndingDeps,
  job: JobRecord,
  escrowLanded: Promise<number>,
  status: "failed" | "refunded",
  reason: string,
): Promise<{ refundTx: string | null; creditsRemaining?: number }> {
  const landed = await escrowLanded.then(() => true, () => false);
  if (!landed) {
    // Nothing moved on-chain. When the move loses, the escrow's own outcome (refused or dropped)
    // ended the job first and released its reservation: nothing is left to do.
    if (await moveJob(deps.db, job, "escrow_not_landed", { failureReason: reason, completedAt: new Date() })) deps.ended?.(job.id, job.status);
    return { refundTx: null };
  }
  const refund = await recordRefund(deps, job, status === "refunded" ? "timed_out" : "refund_recorded", reason);
  deps.ended?.(job.id, job.status);
  const sent = await deps.journal.send(refund).catch(async (error: unknown) => {
    // Someone refunded the escrow before us (anyone may, past the program's timeout); the
    // rejection released the reservation, as the refund's confirmation would have.
    if (error instanceof ChainRejectedError && (await escrowState(deps.chain, job))?.status === "refunded") return {};
    throw error;
  });
  // The confirmation released the reservation and says what it left; a concurrent recovery's says nothing.
  const outcome = "outcome" in sent ? (sent.outcome as SettlementOutcome | undefined) : undefined;
  // A shared refund the chain refused was replaced by the job's own, which its row names.
  const refundTx = refund.shared === true ? ((await getJob(deps.db, job.id))?.refundTx ?? refund.signature) : refund.signature;
  return { refundTx, ...(outcome ? { creditsRemaining: outcome.creditsRemaining } : {}) };
}

/**
 * The job's refund, recorded with its move: in its table's next batch (TableRefunds), or alone (a
 * job's own escrow record, or a batch that could not be recorded, which moved none of its jobs).
 */
async function recordRefund(deps: EndingDeps, job: JobRecord, trigger: "timed_out" | "refund_recorded", reason: string): Promise<ChainAction> {
  const changes = (refund: ChainAction): JobChanges => ({ failureReason: reason, refundTx: refund.signature, creditsCharged: 0 });
  if (deps.tableRefunds && job.escrowTableId !== null) {
    // Moved as a copy: the batch's transaction may yet roll back over another job's move.
    const batched = await deps.tableRefunds.refund(job, (tx, refund) => mustMoveJob(tx, { ...job }, trigger, changes(refund))).catch((error: unknown) => {
      deps.logger.warn({ err: error, job: job.id }, "the job's refund could not join its table's batch; it is sent alone");
      return null;
    });
    if (batched) {
      Object.assign(job, changes(batched), { status: nextStatus(job.status, trigger) });
      return batched;
    }
  }
  const refund = await prepareRefund(deps.chain, job);
  await deps.db.transaction(async (tx) => {
    await mustMoveJob(tx, job, trigger, changes(refund));
    await deps.journal.record(tx, refund);
  });
  return refund;
}
