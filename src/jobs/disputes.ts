/**
 * A caller contests a settled job (spec "POST /jobs/{job_id}/dispute", DECISIONS "Disputes"): the
 * hash of the text it received is compared with the worker's proof hash; when they differ, the
 * escrow program records the dispute (`dispute`) and holds the caller's bond, the job becomes
 * `disputed`, job.disputed fires and arbitration (arbitration.ts) decides. The dispute
 * transaction is recorded before it is sent, like every chain transaction, so a crash finishes or
 * undoes it exactly once.
 */
import { ChainRejectedError, TABLE_APPEND_WINDOW_S, type ActionOwner, type Chain, type ChainAction, type ChainJournal } from "../chain/index.ts";
import { ApiError, type Logger, RateLimiter, creditsToBaseUnits } from "../core/index.ts";
import { emitJobDisputed } from "../events/index.ts";
import type { Db } from "../store/index.ts";
import type { CreditBook } from "../wallets/index.ts";
import { jobEventFacts, type JobRecord } from "./job-record.ts";
import { prepareJobDispute } from "./job-chain.ts";
import { forgetRequests, getJob, getJobs, jobsWithEscrowToClose, markEscrowsClosed, moveJob } from "./job-repo.ts";
import * as money from "./money.ts";

export const ARBITRATION_WINDOW_HOURS = 72;
export const OUTPUT_HASH = /^sha256:[0-9a-f]{64}$/;
/** How long a dispute of a job whose settlement is still confirming waits for it. */
const SETTLING_WAIT_MS = 5_000;
/** Escrow records closed in one transaction... */
const CLOSE_BATCH = 20;
/**
 * ...and transactions sent at once. One at a time, a sweep closed about 120 records a second
 * while the node ended 280 jobs a second, and fell behind.
 */
const CLOSES_AT_ONCE = 4;
/**
 * Disputes one wallet may open: each costs the network up to three re-executions of the job, so
 * their number is bounded per wallet (a burst of this many, refilled at this many an hour; counted
 * by each gateway node), beside the bond each one holds.
 */
export const DISPUTES_PER_WALLET_PER_HOUR = 10;
/** A dispute's bond is what the re-executions it asks for cost at the job's own price... */
export const BOND_JOB_CHARGES = 3;
/** ...and at least this many credits, for a job that charged nothing. */
export const MIN_BOND_CREDITS = 1;

/**
 * The bond a dispute of a job charged `creditsCharged` holds: back to the caller with the charge
 * when the dispute is upheld or inconclusive, to the treasury that ran the re-executions when the
 * worker's output is reproduced.
 */
export function disputeBondCredits(creditsCharged: number): number {
  return Math.max(MIN_BOND_CREDITS, BOND_JOB_CHARGES * creditsCharged);
}

export interface DisputeDeps {
  db: Db;
  chain: Chain;
  journal: ChainJournal;
  logger: Logger;
  /** From the final output token (as the service recorded it) to the end of the filing window. */
  windowMs: number;
  /** This gateway node: it closes the escrow records of its own jobs, so nodes never race to close one. */
  nodeId?: string;
  /** The node's book of wallets' credits, when it is the ledger's only writer: a bond is a decrease it must hear of. */
  book?: CreditBook;
}

/** The answer of the dispute endpoint. */
export interface DisputeAnswer {
  job_id: string;
  dispute_opened: boolean;
  your_hash: string;
  worker_hash: string;
  dispute_tx?: string;
  arbitration_window_hours?: number;
  /** Beyond the spec: the bond held from the wallet's credits until the outcome. */
  bond_credits?: number;
}

const undisputed = { disputeHash: null, disputeTx: null, disputedAt: null, disputeBondCredits: null };

/** Puts a job whose dispute never took hold on-chain back as it was, its bond released. */
async function withdrawDispute(tx: Db, action: ChainAction): Promise<void> {
  const job = await getJob(tx, action.subject);
  if (job?.status !== "disputed" || job.disputeTx !== action.signature) return;
  await moveJob(tx, job, "dispute_refused", undisputed);
  await money.endDisputeBond(tx, job, false);
}

function disputeOwner(): ActionOwner {
  return {
    async confirmed(tx, action) {
      const job = await getJob(tx, action.subject);
      if (!job || job.disputeHash === null || job.proofHash === null) throw new Error(`dispute ${action.signature} names job ${action.subject} without a dispute`);
      await emitJobDisputed(tx, {
        ...jobEventFacts(job),
        creditsCharged: job.creditsCharged,
        yourHash: job.disputeHash,
        workerHash: job.proofHash,
        disputeTx: action.signature,
        arbitrationWindowHours: ARBITRATION_WINDOW_HOURS,
      });
    },
    rejected: (tx, action) => withdrawDispute(tx, action),
    // The filing window is short; a dispute that never landed is given up, and the caller may file again.
    rebuild: async () => undefined,
    dropped: (tx, action) => withdrawDispute(tx, action),
    giveUpUnsentOnResume: true,
  };
}

export class Disputes {
  private sweepers: NodeJS.Timeout[] = [];
  private readonly perWallet = new RateLimiter({ ratePerSecond: DISPUTES_PER_WALLET_PER_HOUR / 3_600, burst: DISPUTES_PER_WALLET_PER_HOUR });
  /** Set by stop: a sweep under way closes no more batches. */
  private stopped = false;

  constructor(
    private readonly deps: DisputeDeps,
    /** Called once a dispute is on-chain: arbitration takes it from there. */
    private readonly opened: (jobId: string) => void,
  ) {
    deps.journal.register("dispute", disputeOwner());
  }

  /**
   * Every few seconds, for jobs whose dispute window has closed: forgets their kept requests, and
   * closes their escrow records in the program, recovering the rent. Each is a sweep of its own:
   * under steady load the closing never ends, and forgetting waited for it. A sweep still running
   * when the next is due lets that one go.
   */
  start(): void {
    const every = Math.min(this.deps.windowMs, 10_000);
    const forget = () => forgetRequests(this.deps.db, new Date(Date.now() - this.deps.windowMs));
    this.sweepers = [this.sweepEvery(every, forget), this.sweepEvery(every, () => this.closeEscrows())];
  }

  /** Runs `sweep` now and every `ms`, unless the one before is still running. */
  private sweepEvery(ms: number, sweep: () => Promise<unknown>): NodeJS.Timeout {
    let sweeping = false;
    const run = () => {
      if (sweeping) return;
      sweeping = true;
      void sweep()
        .catch((error: unknown) => this.deps.logger.warn({ err: error }, "could not tidy up the jobs past their dispute window"))
        .finally(() => (sweeping = false));
    };
    run();
    const timer = setInterval(run, ms);
    timer.unref();
    return timer;
  }

  stop(): void {
    this.stopped = true;
    for (const timer of this.sweepers) clearInterval(timer);
  }

  /**
   * Closes the escrow records of every ended job past the program's dispute window, in
   * transactions of CLOSE_BATCH sent CLOSES_AT_ONCE at a time, until none is left or a round can
   * close none (its jobs all locked or disputed still). One transaction a sweep closed 2 records a
   * second, while a loaded node ends hundreds of jobs a second: the chain then kept one more
   * account a job.
   */
  private async closeEscrows(): Promise<void> {
    const windowS = await this.deps.chain.disputeWindowSeconds();
    for (;;) {
      const { due, marked } = await this.closeEscrowRound(windowS);
      if (due < CLOSE_BATCH * CLOSES_AT_ONCE || marked === 0 || this.stopped) return;
    }
  }

  /**
   * Up to CLOSE_BATCH * CLOSES_AT_ONCE ended jobs' escrow records, closed in transactions sent at
   * once: those the program holds settled, refunded or reversed for longer than its dispute window.
   * A job whose record is gone (never locked, or closed already) is marked too; a locked or
   * disputed one waits, and comes first in the next round's due jobs again. Says how many jobs were
   * due and how many it marked.
   */
  private async closeEscrowRound(windowS: bigint): Promise<{ due: number; marked: number }> {
    const { chain, db } = this.deps;
    const due = await jobsWithEscrowToClose(db, new Date(Date.now() - Number(windowS) * 1000), CLOSE_BATCH * CLOSES_AT_ONCE, this.deps.nodeId);
    if (due.length === 0) return { due: 0, marked: 0 };
    const jobs = [...(await getJobs(db, due)).values()];
    const [records, tables] = await Promise.all([
      this.closeRecords(jobs.filter((job) => job.escrowTableId === null).map((job) => job.id), windowS),
      this.closeTables(jobs.filter((job) => job.escrowTableId !== null), windowS),
    ]);
    // A job that no longer exists has nothing on-chain to close either.
    const missing = due.filter((id) => !jobs.some((job) => job.id === id));
    const marked = [...records, ...tables, ...missing];
    await markEscrowsClosed(db, marked);
    return { due: due.length, marked: marked.length };
  }

  /** Closes the jobs' escrow records that can be; returns the jobs whose record is gone now. */
  private async closeRecords(ids: readonly string[], windowS: bigint): Promise<string[]> {
    const { chain } = this.deps;
    if (ids.length === 0) return [];
    const records = await chain.escrowRecords(ids);
    const closable: string[] = [];
    const gone: string[] = [];
    const nowS = BigInt(Math.floor(Date.now() / 1000));
    ids.forEach((id, i) => {
      const record = records[i];
      if (!record) gone.push(id);
      else if (record.status !== "locked" && record.status !== "disputed" && nowS - record.closedAt > windowS + 1n) closable.push(id);
    });
    await this.sendInBatches(closable, (batch) => chain.prepareCloseEscrows(batch));
    return [...closable, ...gone];
  }

  /**
   * Closes the tables of these ended jobs that can be (every slot final, the last for longer than
   * the dispute window, no more locks taken); returns the jobs whose table is gone now. A job whose
   * table still has a slot open waits for a later round.
   */
  private async closeTables(jobs: readonly JobRecord[], windowS: bigint): Promise<string[]> {
    const { chain } = this.deps;
    const tables = [...new Map(jobs.map((job) => [job.escrowAddress!, { wallet: job.wallet, tableId: BigInt(job.escrowTableId!) }])).values()];
    if (tables.length === 0) return [];
    const records = await chain.tableRecords(tables);
    const nowS = BigInt(Math.floor(Date.now() / 1000));
    const finished = tables.filter((_, i) => {
      const record = records[i] ?? null;
      // As the program's close_table: a table not full takes locks for TABLE_APPEND_WINDOW_S.
      const appending = record !== null && record.slots.length < record.capacity && nowS - record.openedAt <= BigInt(TABLE_APPEND_WINDOW_S) + 1n;
      return !record || (record.open === 0 && !appending && nowS - record.lastClosedAt > windowS + 1n);
    });
    const closable = finished.filter((table) => records[tables.indexOf(table)] !== null);
    await this.sendInBatches(closable, (batch) => chain.prepareTableClosings(batch));
    const done = new Set(finished.map((table) => `${table.wallet} ${table.tableId}`));
    return jobs.filter((job) => done.has(`${job.wallet} ${job.escrowTableId}`)).map((job) => job.id);
  }

  /** `items` closed CLOSE_BATCH to a transaction, the transactions sent at once. */
  private async sendInBatches<T>(items: readonly T[], prepare: (batch: T[]) => Promise<{ wire: Uint8Array }>): Promise<void> {
    const { chain } = this.deps;
    const batches = Array.from({ length: Math.ceil(items.length / CLOSE_BATCH) }, (_, i) => items.slice(i * CLOSE_BATCH, (i + 1) * CLOSE_BATCH));
    await Promise.all(batches.map(async (batch) => chain.send((await prepare(batch)).wire)));
  }

  /** The caller's job, settled: 404 for someone else's, 409 for any status but settled (or settling that settles soon). */
  private async settledJob(wallet: string, jobId: string): Promise<JobRecord> {
    const deadline = Date.now() + SETTLING_WAIT_MS;
    for (;;) {
      const job = await getJob(this.deps.db, jobId);
      if (!job || job.wallet !== wallet) throw new ApiError("not_found", `No job '${jobId}' exists.`, "job_id");
      // A job is disputed once: a second dispute, even after the first was decided, is refused.
      const disputedBefore = job.status === "disputed" || job.disputeTx !== null;
      if (job.status === "settled" && !disputedBefore) return job;
      if (job.status !== "settling" || Date.now() >= deadline) {
        const why = disputedBefore ? "It has been disputed already." : `Only a settled job can be disputed; this one is ${job.status}.`;
        throw new ApiError("conflict", `Job '${jobId}' cannot be disputed. ${why}`, "job_id");
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  async open(wallet: string, jobId: string, receivedHash: string, now = new Date()): Promise<DisputeAnswer> {
    const job = await this.settledJob(wallet, jobId);
    const closesAt = (job.lastTokenAt?.getTime() ?? 0) + this.deps.windowMs;
    if (now.getTime() > closesAt) {
      throw new ApiError("dispute_window_expired", `The dispute window of job '${jobId}' closed at ${new Date(closesAt).toISOString()}, ${this.deps.windowMs / 1000} seconds after its final output token.`);
    }
    const answer = { job_id: job.id, your_hash: receivedHash, worker_hash: job.proofHash ?? "" };
    if (receivedHash === job.proofHash) return { ...answer, dispute_opened: false };
    const retryAfter = this.perWallet.take(wallet);
    if (retryAfter > 0) {
      throw new ApiError("rate_limited", `This wallet has opened ${DISPUTES_PER_WALLET_PER_HOUR} disputes in the last hour, the most it may; each one re-runs the job on other workers.`, null, { retry_after: retryAfter });
    }
    const bondCredits = disputeBondCredits(job.creditsCharged);
    const action = await this.record(job, receivedHash, bondCredits, now);
    try {
      await this.deps.journal.send(action);
    } catch (error) {
      if (!(error instanceof ChainRejectedError)) throw error;
      throw new ApiError("dispute_window_expired", `The chain refused the dispute of job '${jobId}': its window has closed there, or the credits for its bond were not yet in the wallet's vault (${error.reason}).`);
    }
    this.opened(job.id);
    return { ...answer, dispute_opened: true, dispute_tx: action.signature, arbitration_window_hours: ARBITRATION_WINDOW_HOURS, bond_credits: bondCredits };
  }

  /**
   * Records the dispute and its transaction, and holds the bond, in one commit: 402 when the
   * wallet's credits cannot cover the bond, 409 when another dispute of the job came first.
   */
  private async record(job: JobRecord, receivedHash: string, bondCredits: number, now: Date): Promise<ChainAction> {
    const prepared = await prepareJobDispute(this.deps.chain, job, { callerHash: receivedHash, bond: creditsToBaseUnits(bondCredits) });
    const action: ChainAction = { kind: "dispute", subject: job.id, signature: prepared.signature, wire: prepared.wire };
    const change = await this.deps.book?.takeAlone(job.wallet, bondCredits);
    try {
      const moved = await this.deps.db.transaction(async (tx) => {
        if (!(await moveJob(tx, job, "dispute_opened", { disputeHash: receivedHash, disputeTx: action.signature, disputedAt: now, disputeBondCredits: bondCredits }))) return false;
        await this.deps.journal.record(tx, action);
        await money.holdDisputeBond(tx, job.wallet, job.id, bondCredits);
        return true;
      });
      change?.done(moved);
      if (moved) return action;
    } catch (error) {
      change?.done(false);
      if (!money.isRefusal(error)) throw error;
      const available = await money.availableCredits(this.deps.db, job.wallet);
      throw new ApiError(
        "insufficient_credits",
        `A dispute of job '${job.id}' holds a bond of ${bondCredits} credits (${BOND_JOB_CHARGES} times its charge) until its outcome, and the wallet has ${available}.`,
        null,
        { credits_remaining: available, credits_required: bondCredits, tier: job.tier },
      );
    }
    throw new ApiError("conflict", `Job '${job.id}' cannot be disputed. It has been disputed already.`, "job_id");
  }
}
