/**
 * A job's chain transactions: how each is built from the job (escrow lock, settlement, refund),
 * and what its outcome does to the job and its credits. The chain journal (chain/journal.ts)
 * records and sends them; this module is the owner it calls when one confirms, is refused, or
 * never lands.
 */
import { MAX_LOCKS_PER_TRANSACTION, type ActionOwner, type ActionOwnerNode, type Chain, type ChainAction, type ChainJournal } from "../chain/index.ts";
import { type Tier, awaitedLater } from "../core/index.ts";
import { emitEvents, emitJobEnded, jobCompletedEvent } from "../events/index.ts";
import type { Db } from "../store/index.ts";
import type { EscrowTables } from "./escrow-tables.ts";
import { jobEventFacts, type JobRecord, type JobStatus } from "./job-record.ts";
import { addJobSlots, getJob, getJobs, moveJob, mustMoveJob, mustMoveJobs, unfinishedJobs, updateJob, updateJobs } from "./job-repo.ts";
import * as money from "./money.ts";
import { UNFINISHED_STATUSES } from "./job-states.ts";

export type JobActionKind = "escrow" | "settlement" | "refund";

/**
 * Told of each job moved here from an unfinished status to a final one. The journal's outcomes
 * tell it in the transaction that moves the job, before that commits: a group of confirmations
 * whose transaction fails is applied again one by one, and tells it again.
 */
export type JobEnded = (jobId: string, status: JobStatus) => void;

/** What a settlement's or refund's confirmation leaves the wallet with, handed back to whoever sent it. */
export interface SettlementOutcome {
  creditsRemaining: number;
}

/** An escrow lock signed, with the escrow's address. */
export type EscrowAction = ChainAction & { escrowAddress: string };

/** Where a job's escrow lock puts its credits: the job's fields it sets (a table's slot: EscrowTables). */
export function escrowPlace(lock: EscrowAction): Pick<JobRecord, "escrowAddress" | "escrowTx" | "escrowTableId" | "escrowTableSlot"> {
  const table = lock.params?.tableId !== undefined;
  return {
    escrowAddress: lock.escrowAddress,
    escrowTx: lock.signature,
    escrowTableId: table ? lock.params!.tableId! : null,
    escrowTableSlot: table ? lock.params!.tableSlot! : null,
  };
}

/** One job's escrow lock, in a transaction of its own. */
export async function prepareEscrow(chain: Chain, input: { jobId: string; tier: Tier; wallet: string; credits: number }): Promise<EscrowAction> {
  return (await prepareEscrows(chain, [input]))[0]!;
}

/**
 * Several jobs' escrow locks, MAX_LOCKS_PER_TRANSACTION to a transaction: the chain's work per
 * lock falls to about a third. One action per job, in order; those
 * of a transaction share its signature and bytes.
 */
export async function prepareEscrows(
  chain: Chain,
  inputs: readonly { jobId: string; tier: Tier; wallet: string; credits: number }[],
): Promise<EscrowAction[]> {
  const actions: EscrowAction[] = [];
  for (let at = 0; at < inputs.length; at += MAX_LOCKS_PER_TRANSACTION) {
    const some = inputs.slice(at, at + MAX_LOCKS_PER_TRANSACTION);
    const prepared = await chain.prepareLockEscrows(some);
    const shared = some.length > 1;
    some.forEach((input, i) => {
      actions.push({ kind: "escrow", subject: input.jobId, signature: prepared.signature, wire: prepared.wire, escrowAddress: prepared.escrowAddresses[i]!, ...(shared ? { shared } : {}) });
    });
  }
  return actions;
}

export async function prepareSettlement(chain: Chain, job: JobRecord): Promise<ChainAction> {
  if (job.workerAddress === null || job.proofHash === null || job.proofSignature === null) {
    throw new Error(`job ${job.id} has no proof to settle`);
  }
  const prepared = await chain.prepareSettle({
    jobId: job.id,
    wallet: job.wallet,
    creditsLocked: job.creditsLocked,
    creditsCharged: job.creditsCharged,
    workerPublicKey: job.workerAddress,
    proofHash: job.proofHash,
    proofSignature: new Uint8Array(Buffer.from(job.proofSignature, "base64")),
  });
  return { kind: "settlement", subject: job.id, signature: prepared.signature, wire: prepared.wire };
}

/** The job's escrow back to its wallet: its record's refund, or its table slot's (`refund_slots`). */
export async function prepareRefund(chain: Chain, job: JobRecord): Promise<ChainAction> {
  const prepared = job.escrowTableId !== null
    ? await chain.prepareSlotRefunds({ wallet: job.wallet, tableId: BigInt(job.escrowTableId), slots: [job.escrowTableSlot!] })
    : await chain.prepareRefund({ jobId: job.id, wallet: job.wallet, creditsLocked: job.creditsLocked });
  return { kind: "refund", subject: job.id, signature: prepared.signature, wire: prepared.wire };
}

/** A caller's dispute of the job on-chain: of its escrow record, or of its table slot. */
export function prepareJobDispute(chain: Chain, job: JobRecord, dispute: { callerHash: string; bond: bigint }) {
  return job.escrowTableId !== null
    ? chain.prepareSlotDispute({ wallet: job.wallet, tableId: BigInt(job.escrowTableId), slot: job.escrowTableSlot!, ...dispute })
    : chain.prepareDispute({ jobId: job.id, wallet: job.wallet, ...dispute });
}

/** A dispute's outcome on-chain: of the job's escrow record, or of its table slot. */
export function prepareJobResolve(chain: Chain, job: JobRecord, outcome: Parameters<Chain["prepareResolve"]>[0]["outcome"]) {
  return job.escrowTableId !== null
    ? chain.prepareSlotResolve({ wallet: job.wallet, tableId: BigInt(job.escrowTableId), slot: job.escrowTableSlot!, outcome })
    : chain.prepareResolve({ jobId: job.id, wallet: job.wallet, outcome });
}

/** How the chain holds the jobs' escrows, in one read: each job's record, or its table's slot; null when gone. */
export async function escrowStates(chain: Chain, jobs: readonly JobRecord[]): Promise<({ status: string; workerStaked: boolean } | null)[]> {
  const inTables = jobs.filter((job) => job.escrowTableId !== null);
  const [records, tables] = await Promise.all([
    chain.escrowRecords(jobs.filter((job) => job.escrowTableId === null).map((job) => job.id)),
    inTables.length > 0 ? chain.tableRecords(inTables.map((job) => ({ wallet: job.wallet, tableId: BigInt(job.escrowTableId!) }))) : Promise.resolve([]),
  ]);
  let record = 0;
  let table = 0;
  return jobs.map((job) => (job.escrowTableId === null ? records[record++] : tables[table++]?.slots[job.escrowTableSlot!]) ?? null);
}

/** `escrowStates` for one job. */
export async function escrowState(chain: Chain, job: JobRecord): Promise<{ status: string; workerStaked: boolean } | null> {
  return (await escrowStates(chain, [job]))[0]!;
}

async function jobOf(tx: Db, action: ChainAction): Promise<JobRecord> {
  const job = await getJob(tx, action.subject);
  if (!job) throw new Error(`chain action ${action.signature} names a missing job ${action.subject}`);
  return job;
}

/** job.failed or job.timeout for a job whose whole reservation was just released in `tx`, leaving `remaining`. */
async function emitReleased(tx: Db, job: JobRecord, remaining: number): Promise<void> {
  await emitJobEnded(tx, { ...jobEventFacts(job), creditsRefunded: job.creditsLocked, creditsRemaining: remaining });
  await money.checkCreditLow(tx, job.wallet, remaining, false);
}

/**
 * The escrow never reached the chain, or the chain refused it: nothing left the wallet, so the
 * reservation goes back, or the charge of a job charged with its admission (admission.ts).
 */
async function giveUpEscrow(tx: Db, action: ChainAction, reason: string, ended?: JobEnded): Promise<void> {
  const job = await jobOf(tx, action);
  const wasUnfinished = UNFINISHED_STATUSES.includes(job.status);
  const remaining = await money.refund(tx, job);
  await mustMoveJob(tx, job, "escrow_given_up", { failureReason: reason, completedAt: new Date(), creditsCharged: 0 });
  await emitReleased(tx, job, remaining);
  if (wasUnfinished) ended?.(job.id, job.status);
}

/**
 * A job admitted without its lock whose lock was never recorded (its signing or record failed, or
 * the node stopped first): nothing left the wallet, so its reservation (or the charge recorded
 * with its admission) goes back and it ends.
 */
export async function releaseUnlocked(db: Db, jobId: string, reason: string, ended?: JobEnded): Promise<void> {
  const endedNow = await db.transaction(async (tx) => {
    const job = await getJob(tx, jobId);
    const wasUnfinished = job !== undefined && UNFINISHED_STATUSES.includes(job.status);
    const changes = { failureReason: job?.failureReason ?? reason, completedAt: job?.completedAt ?? new Date(), creditsCharged: 0 };
    if (!job || !(await moveJob(tx, job, "escrow_given_up", changes))) return false;
    await emitReleased(tx, job, await money.refund(tx, job));
    return wasUnfinished;
  });
  if (endedNow) ended?.(jobId, "failed");
}

/**
 * A job's escrow lock in a transaction of its own, for one whose shared transaction was refused:
 * into a table of its own when it was a table's (the table's next slots are out of reach).
 */
async function escrowAlone(db: Db, chain: Chain, action: ChainAction, tables: EscrowTables | undefined): Promise<ChainAction> {
  const job = await jobOf(db, action);
  const input = { jobId: job.id, tier: job.tier, wallet: job.wallet, credits: job.creditsLocked };
  if (action.params?.tableId !== undefined) {
    if (!tables) throw new Error(`job ${job.id}'s escrow is in a table, and this node locks none`);
    return tables.prepareLockAlone(db, input);
  }
  return prepareEscrow(chain, input);
}

function escrowOwner(db: Db, chain: Chain, tables: EscrowTables | undefined, ended?: JobEnded): ActionOwner {
  return {
    confirmed: (tx, action, slot) => updateJob(tx, action.subject, { slot }),
    confirmedAll: async (tx, confirmed) => {
      await updateJobs(tx, confirmed.map(({ action, slot }) => ({ id: action.subject, changes: { slot } })));
      return confirmed.map(() => undefined);
    },
    // Its confirmation only writes the job's slot: one statement with the journal's mark.
    addConfirmed: (statement, confirmed) => addJobSlots(statement, confirmed),
    rejected: (tx, action) => giveUpEscrow(tx, action, "escrow_failed", ended),
    // A fresh lock would hold credits for a job that can no longer run (its driver gave up).
    rebuild: async () => undefined,
    // The job's driver is still waiting on it: its lock goes on alone (another's may have been refused).
    alone: (action) => escrowAlone(db, chain, action, tables),
    dropped: (tx, action, alone) => (alone ? updateJob(tx, action.subject, escrowPlace(alone as EscrowAction)) : giveUpEscrow(tx, action, "interrupted", ended)),
    giveUpUnsentOnResume: true,
    // Its confirmation writes only the job's row.
    confirmsInGroups: true,
  };
}

/**
 * The program picks the worker's share from its stake record when the settlement executes, not
 * from what the gateway read when the worker registered; the ledger pays what the program paid.
 * The escrow records are read in one request (one message to the chain's thread, or one
 * getMultipleAccounts), taken while the confirmations' database transaction is open: read before
 * it opened, the confirmations fell behind new admissions at 256 connections on PGlite.
 */
async function paidAsTheProgramPaid(tx: Db, chain: Chain, jobs: readonly JobRecord[]): Promise<JobRecord[]> {
  const escrows = await escrowStates(chain, jobs);
  const paid: JobRecord[] = [];
  for (const [i, job] of jobs.entries()) {
    const escrow = escrows[i];
    if (!escrow || escrow.status !== "settled" || escrow.workerStaked === job.workerStaked) {
      paid.push(job);
      continue;
    }
    await updateJob(tx, job.id, { workerStaked: escrow.workerStaked });
    paid.push({ ...job, workerStaked: escrow.workerStaked });
  }
  return paid;
}

/**
 * The jobs whose settlements confirmed: as their senders recorded them, or, for an action taken up
 * by recovery, as read. Copies, since moving a job updates its record and a group that fails is
 * applied again one by one; the move itself checks that each job is still `settling`. Also the
 * ids of those their senders recorded: those records posted the jobs' charges.
 */
async function settlingJobs(tx: Db, confirmed: readonly { action: ChainAction }[]): Promise<{ jobs: JobRecord[]; recordedHere: Set<string> }> {
  const unknown = confirmed.filter(({ action }) => action.subjectRecord === undefined).map(({ action }) => action.subject);
  const found = unknown.length > 0 ? await getJobs(tx, unknown) : new Map<string, JobRecord>();
  const recordedHere = new Set<string>();
  const jobs = confirmed.map(({ action }) => {
    if (action.subjectRecord !== undefined) recordedHere.add(action.subject);
    const job = (action.subjectRecord as JobRecord | undefined) ?? found.get(action.subject);
    if (!job) throw new Error(`chain action ${action.signature} names a missing job ${action.subject}`);
    return { ...job };
  });
  return { jobs, recordedHere };
}

function settlementOwner(db: Db, chain: Chain, ended?: JobEnded): ActionOwner {
  return {
    confirmed: async (tx, action, slot) => (await settlementsConfirmed(tx, chain, [{ action, slot }], ended))[0],
    confirmedAll: (tx, confirmed) => settlementsConfirmed(tx, chain, confirmed, ended),
    // Its ledger work is one operation, which locks the accounts it shares with other jobs in one statement.
    confirmsInGroups: true,
    // The job stays `settling` with its escrow intact; its driver (or recovery) sends the escrow back.
    rejected: async () => undefined,
    // A table's settlement pays from its worker's signature over the whole batch, which is not
    // kept: one that never landed is given up, and the job's escrow goes back (jobsAwaitingRefund).
    rebuild: async (action) => {
      const job = await getJob(db, action.subject);
      return job && job.escrowTableId === null ? prepareSettlement(chain, job) : undefined;
    },
    dropped: async (tx, action, fresh) => {
      if (fresh) await updateJob(tx, action.subject, { settlementTx: fresh.signature });
    },
  };
}

/**
 * What settlements' confirmations do, for one job or several at once: one statement moves the
 * jobs' rows to `settled`, one writes their job.completed events, with the wallets' credits as
 * they stand, and last the worker and the treasury are paid their shares of the charges (posted
 * when the settlements were recorded), in one ledger operation. The balance does not change
 * here, so neither does the credit.low rule.
 */
async function settlementsConfirmed(tx: Db, chain: Chain, confirmed: readonly { action: ChainAction; slot: number }[], ended?: JobEnded): Promise<SettlementOutcome[]> {
  const recorded = await settlingJobs(tx, confirmed);
  const jobs = await paidAsTheProgramPaid(tx, chain, recorded.jobs);
  const { charged, available } = await money.preparePayOuts(tx, jobs, recorded.recordedHere);
  const creditsRemaining = jobs.map((job) => available.get(job.wallet)!);
  const completedAt = new Date();
  await mustMoveJobs(tx, jobs.map((job, i) => ({ job, changes: { slot: confirmed[i]!.slot, completedAt } })), "settlement_confirmed");
  await emitEvents(
    tx,
    jobs.map((job, i) => jobCompletedEvent({ ...jobEventFacts(job), settlementTx: confirmed[i]!.action.signature, slot: confirmed[i]!.slot, creditsRemaining: creditsRemaining[i]! })),
  );
  // Last: the payouts lock the treasury's row, shared by every node's confirmations, until the
  // commit. Paid first, the row would stay locked through the three statements above as well.
  await money.payOuts(tx, charged);
  for (const job of jobs) ended?.(job.id, job.status);
  return creditsRemaining.map((credits) => ({ creditsRemaining: credits }));
}

function refundOwner(db: Db, chain: Chain): ActionOwner {
  return {
    async confirmed(tx, action, slot): Promise<SettlementOutcome> {
      const job = await jobOf(tx, action);
      const creditsRemaining = await money.refund(tx, job);
      await updateJob(tx, job.id, { slot, completedAt: new Date(), creditsCharged: 0 });
      await emitReleased(tx, { ...job, refundTx: action.signature }, creditsRemaining);
      return { creditsRemaining };
    },
    // Refused because the escrow is closed already: past the program's timeout anyone, the wallet
    // first of all, may refund it. The money is back in the vault, so the reservation goes too.
    // Refused for any other reason, the job keeps its reservation and the escrow its lock.
    async rejected(tx, action): Promise<void> {
      const job = await jobOf(tx, action);
      if ((await escrowState(chain, job))?.status !== "refunded") return;
      const creditsRemaining = await money.refund(tx, job);
      await updateJob(tx, job.id, { completedAt: new Date(), creditsCharged: 0 });
      await emitReleased(tx, job, creditsRemaining);
    },
    rebuild: async (action) => {
      const job = await getJob(db, action.subject);
      return job ? prepareRefund(chain, job) : undefined;
    },
    // A batch of a table's refunds refused (one of its slots refunded already): each job's alone.
    alone: async (action) => prepareRefund(chain, await jobOf(db, action)),
    dropped: async (tx, action, fresh) => {
      if (fresh) await updateJob(tx, action.subject, { refundTx: fresh.signature });
    },
  };
}

/** Make the jobs part the owner of escrow, settlement and refund actions in `journal`. */
export function registerJobActions(journal: ChainJournal, db: Db, chain: Chain, tables?: EscrowTables, ended?: JobEnded): void {
  journal.register("escrow", escrowOwner(db, chain, tables, ended));
  journal.register("settlement", settlementOwner(db, chain, ended));
  journal.register("refund", refundOwner(db, chain));
}

/**
 * Jobs that were interrupted while running (or whose settlement the chain rejected) and have no
 * chain transaction in flight: their escrow must go back to the wallet.
 */
export async function jobsAwaitingRefund(db: Db, journal: ChainJournal, owner?: ActionOwnerNode): Promise<JobRecord[]> {
  return withoutChainWork(journal, await unfinishedJobs(db, owner));
}

/** `jobsAwaitingRefund` for one job: the job, when its escrow must go back. */
export async function jobAwaitingRefund(db: Db, journal: ChainJournal, jobId: string): Promise<JobRecord | undefined> {
  const job = await getJob(db, jobId);
  return job && UNFINISHED_STATUSES.includes(job.status) ? (await withoutChainWork(journal, [job]))[0] : undefined;
}

/** The jobs with no chain transaction in flight and no settlement sent or confirmed. */
async function withoutChainWork(journal: ChainJournal, unfinished: JobRecord[]): Promise<JobRecord[]> {
  const actions = await journal.actionsAbout(unfinished.map((j) => j.id));
  const inFlight = new Set(actions.filter((a) => a.state === "sent").map((a) => a.subject));
  const settling = new Set(actions.filter((a) => a.kind === "settlement" && (a.state === "sent" || a.state === "confirmed")).map((a) => a.subject));
  return unfinished.filter((job) => !inFlight.has(job.id) && !(job.status === "settling" && settling.has(job.id)));
}

/**
 * A job's escrow on its way to the chain, and who writes its confirmation. A fast worker's output
 * is in before its escrow lands; then the escrow's confirmation is written in the same statement
 * as the settlement's record (`forCharge` claims it), one write of the job's row instead of two,
 * in a row, on the JSON reply's path. Otherwise it is written as soon as the escrow lands, as
 * `ChainJournal.send` would, before the job moves on (a worker's replacement, a refund, the
 * charge) so no two transactions write the job's row at once.
 */
export class EscrowLanding {
  /** Resolves with the escrow's slot once its confirmation is written, by whoever; rejects if it never landed. */
  readonly confirmed: Promise<number>;
  private readonly landed: Promise<{ action: ChainAction; slot: number }>;
  /** Who writes the confirmation: decided by whichever comes first, the landing or the charge. */
  private writer: "landing" | "charge" | undefined;
  private resolveByCharge!: (confirmed: Promise<number>) => void;

  /**
   * `send` puts the lock on the chain (default: the journal's sendUntilLanded; EscrowTables.sendInTurn
   * wraps it); `hurry` asks for a lock signed later to be signed now, when the charge needs it.
   */
  constructor(
    private readonly journal: ChainJournal,
    escrow: Promise<ChainAction>,
    send: (action: ChainAction) => Promise<{ action: ChainAction; slot: number }> = (action) => journal.sendUntilLanded(action),
    private readonly hurry: () => void = () => undefined,
    private readonly withdraw: (reason: string) => boolean = () => false,
  ) {
    this.landed = escrow.then(send);
    const byCharge = new Promise<number>((resolve) => (this.resolveByCharge = resolve));
    this.confirmed = this.landed.then(({ action, slot }) => {
      if (this.writer === "charge") return byCharge;
      this.writer = "landing";
      return journal.confirm(action, slot).then(() => slot);
    });
    // The job's driver awaits it.
    awaitedLater(this.confirmed);
  }

  /**
   * For a job that ended with nothing to charge (`reason`, its failure): a lock still waiting to
   * be signed never is (EscrowTables.withdraw), and the job's escrow then never lands. Says whether
   * it was withdrawn.
   */
  withdrawUnsigned(reason: string): boolean {
    return this.withdraw(reason);
  }

  /** The lock that landed: the admitted one, or its copy alone when the transaction it shared was refused. */
  async landedLock(): Promise<ChainAction> {
    return (await this.landed).action;
  }

  /**
   * For the charge, once the output is in: the escrow's action and slot, and whether its confirmation
   * is the charge's to write (`fold`: the escrow had not landed yet). Rejects if it never landed.
   * A charge given `fold` then calls `recorded` once its statement with the confirmation
   * committed, or `notRecorded`.
   */
  async forCharge(): Promise<{ action: ChainAction; slot: number; fold: boolean }> {
    this.hurry();
    const fold = this.writer === undefined;
    if (fold) this.writer = "charge";
    const { action, slot } = await this.landed;
    if (!fold) await this.confirmed;
    return { action, slot, fold };
  }

  /** The settlement's record wrote the escrow's confirmation. */
  recorded(escrow: ChainAction, slot: number): void {
    this.journal.released(escrow);
    this.resolveByCharge(Promise.resolve(slot));
  }

  /** The settlement was not recorded after all: the escrow's confirmation is written on its own. Resolves once it is. */
  notRecorded(escrow: ChainAction, slot: number): Promise<number> {
    const confirmed = this.journal.confirm(escrow, slot).then(() => slot);
    this.resolveByCharge(confirmed);
    return confirmed;
  }
}
