/**
 * The life of a job: admission (count the prompt, lock the price, record the job and its escrow),
 * then its driver runs it on workers and hands it to job-ending.ts to settle or give back. The
 * states and the moves between them are job-states.ts; every status change goes through moveJob.
 *
 * Money moves first in the ledger (atomic, no overspend) and then on-chain. Every chain
 * transaction is recorded in the chain journal (signature and signed bytes) in the same database
 * transaction as the state change that calls for it, before it is sent; its ledger effect is
 * applied (job-chain.ts) in the database transaction that marks it confirmed. So a crash at any
 * point leaves something the journal's resumeOpen() and `refundInterrupted()` finish or undo, and
 * nothing is charged twice.
 */
import { performance } from "node:perf_hooks";
import { type Catalog, type CatalogModel, modelNotFound } from "../catalog/index.ts";
import type { ActionOwnerNode, Chain, ChainAction, ChainJournal } from "../chain/index.ts";
import { ApiError, BoundedMap, awaitedLater, Channel, JOB_TIMEOUT_MS, type Logger, TIERS, insufficientCredits, newId, outputHash, planEscrow } from "../core/index.ts";
import { generationOf, type ChatRequest } from "./chat-request.ts";
import {
  completionTokensAtMost,
  DEFAULT_MAX_TOKEN_BYTES,
  promptTokensAtLeast,
  SILENT_TOKENS,
  utf8Bytes,
  type ChatMessage,
  type GenerationRequest,
  type ModelVocabularies,
  type TokenCounter,
  type StopReason,
  type Usage,
} from "../inference/index.ts";
import { AccountNotFoundError, ExceedsCreditsError } from "../ledger/index.ts";
import type { CreditBook, CreditChange } from "../wallets/index.ts";
import { CALLER_LEFT, JobRequestError, type JobOutcome, type LeaseWanted, type WorkerLease, type WorkerPool } from "../network/index.ts";
import type { Db } from "../store/index.ts";
import { Admissions, type Admission } from "./admission.ts";
import { contextWanted, fitUncounted, type Fit } from "./prompt-fit.ts";
import { EscrowTables, LockWithdrawnError } from "./escrow-tables.ts";
import { TableRefunds } from "./table-refunds.ts";
import { TableSettlements } from "./table-settlements.ts";
import { EscrowLanding, escrowPlace, jobAwaitingRefund, jobsAwaitingRefund, registerJobActions, releaseUnlocked, type EscrowAction } from "./job-chain.ts";
import { chargeAtAdmission, conclude, MAX_ANSWERED_UNCONFIRMED, refundJob, settlementRecords, type EndingDeps, type JobEvent, type WorkerRun } from "./job-ending.ts";
import { newPendingJob, type JobRecord, type JobStatus } from "./job-record.ts";
import { adoptJobs, getJob, updateJob, updateJobs, type JobChanges } from "./job-repo.ts";
import * as money from "./money.ts";
import type { Probation, ProbationCheck } from "./probation.ts";
import { RequestBlame } from "./request-blame.ts";
import { endRunSpan, runSpan } from "./job-spans.ts";

export type { JobEvent };

/** A worker that has sent no token this long after taking a job is stalling: the job moves on. */
export const DEFAULT_FIRST_TOKEN_TIMEOUT_MS = 60_000;
/**
 * How long a request waits at the gateway for a slot on a busy model's workers before it is
 * refused (503, nothing charged): a quarter of the job's own 120 seconds.
 */
export const DEFAULT_QUEUE_WAIT_MS = 30_000;

export interface StartedJob {
  id: string;
  model: string;
  /** Unix seconds. */
  created: number;
  escrowTx: string;
  /** The serving worker; it changes if the first one fails before its first token. */
  workerAddress: string;
  /** The wallet's available credits once this job's escrow is locked. */
  creditsAfterLock: number;
  /**
   * The wallet's available credits as last known: after the lock, then after the charge, or after
   * the refund once a job that failed or timed out has its escrow back.
   */
  creditsRemaining: number;
  /** The job's events; the iterator throws an ApiError when the job fails or times out. */
  events: AsyncIterable<JobEvent>;
  /** When its worker got it and answered; noted only while JobService.timeRuns is set. */
  workerRun?: WorkerRunTimes;
}

/**
 * A job's run on the worker that ran it, as the gateway saw it (performance.now(), ms): the
 * moment the job was handed to that worker (its connection, for a remote one), and the moments
 * its first and last messages reached the gateway. A job moved on from a worker that produced
 * nothing is timed on the worker it moved to.
 */
export interface WorkerRunTimes {
  dispatchedAt: number;
  firstOutputAt?: number;
  /** The worker's `done`: unset when it did not finish the job. */
  doneAt?: number;
}

export interface JobServiceOptions {
  db: Db;
  chain: Chain;
  /** The service's chain journal; the job service registers itself as the owner of escrow, settlement and refund actions. */
  journal: ChainJournal;
  pool: WorkerPool;
  catalog: Catalog;
  logger: Logger;
  timeoutMs?: number;
  firstTokenTimeoutMs?: number;
  /** How long a request may wait for a busy model's workers (default DEFAULT_QUEUE_WAIT_MS). */
  queueWaitMs?: number;
  /** Callers answered before their settlements confirm, at most; the next wait for the chain (default MAX_ANSWERED_UNCONFIRMED). */
  maxAnsweredUnconfirmed?: number;
  /** How long a granted job's admission waits at most for its output (default ADMISSION_DEFER_MS). */
  admissionDeferMs?: number;
  /** Tokenizers the gateway holds itself, to count relayed output and bound prompts by length. */
  vocabularies?: ModelVocabularies;
  /**
   * FAULT INJECTION, for tests only: settle on the hash the worker claims, without checking its
   * proof against the text relayed, as a gateway with a bug would, so that the chain's own check
   * and disputes can be shown to catch what the gateway missed.
   */
  skipProofCheck?: boolean;
  /** Told of every job this service settles, and its worker (audits sample them). */
  onSettled?: (jobId: string, workerAddress: string) => void;
  /** Checks of workers on probation beside callers' jobs; none without it. */
  probation?: Probation;
  /** The gateway node driving the jobs started here (its lease covers them). */
  nodeId?: string;
  /**
   * Each job's escrow is a slot of its wallet's escrow table, locked and settled several jobs to a
   * transaction (escrow-tables.ts, table-settlements.ts); false: an escrow record of its own per
   * job, locked and settled in transactions of its own. Default true.
   */
  escrowTables?: boolean;
  /**
   * The wallets' credits as this node holds them, when it is the ledger's only writer (the
   * embedded store): a lock the book grants answers its caller without waiting for the
   * admission's commit. Without it, every caller waits for that commit.
   */
  book?: CreditBook;
}

/** A job handed to its worker: what its caller is shown, and that once its admission has committed. */
interface Launch {
  started: StartedJob;
  /** Resolves with `started` once the admission commits; rejects when it is refused. */
  admitted: Promise<StartedJob>;
}

/** A job whose lock the credit book granted, and what its start has found out (reserve). */
interface GrantedJob {
  job: JobRecord;
  caller: JobCaller;
  request: ChatRequest;
  held: HeldSlot;
  clientSignal: AbortSignal;
  lockLater: boolean;
  credit: CreditChange;
}

/**
 * How long a granted job's admission waits at most before it is recorded: for a stream's first
 * output to be relayed, for a JSON reply's whole output to be in (HeldAdmission). A moment, so a
 * job stays unrecorded no longer than that (its id answers 404 at GET /jobs until then), and long
 * enough for an upstream that answers at once.
 */
const ADMISSION_DEFER_MS = 5;

/**
 * A granted JSON job's admission, held open for a moment (ADMISSION_DEFER_MS): a job whose output
 * is in by then is charged in its admission's transaction, one commit instead of two on its
 * reply's way. Its driver claims it when the output is in before it opened (false: the admission
 * went ahead alone), and then opens it, with the charge or without.
 */
interface HeldAdmission {
  claim(): boolean;
  open(charge: JobChanges | undefined): void;
}

/** A job on its way, as its driver carries it. */
interface DrivenJob {
  job: JobRecord;
  request: ChatRequest;
  firstLease: WorkerLease;
  /** Resolves with the wallet's credits after the lock once the admission commits; rejects when it is refused. */
  admitted: Promise<number>;
  /** The escrow on its way to the chain; `confirmed` resolves with its slot once that is recorded. */
  escrow: EscrowLanding;
  channel: Channel<JobEvent>;
  clientSignal: AbortSignal;
  started: StartedJob;
  /** Told when the job's output has begun to flow, or an attempt at it ended: a deferred admission is recorded then. */
  outputBegun: () => void;
  /** A granted JSON job's admission, held for its charge; with what that charge left the wallet, once admitted. */
  held?: { admission: HeldAdmission; charged: Promise<{ creditsRemaining: number } | undefined> };
}

/** Who asks for a job: the wallet, and the hash of a key its admission must confirm (accounts.authenticate). */
export interface JobCaller {
  wallet: string;
  keyToConfirm?: string;
}

/** What a job's admission gives it: the wallet's credits after the lock, and the escrow to send (undefined: signed later). */
interface Admitted {
  creditsAfterLock: number;
  escrow: ChainAction | undefined;
  /** For a job charged with its admission (HeldAdmission): the wallet's credits after the charge. */
  charged?: { creditsRemaining: number };
}

/** The signal a job's workers run under: the caller leaving, or the job's timeout. */
interface JobWatch {
  signal: AbortSignal;
  timedOut(): boolean;
  dispose(): void;
}

/**
 * The abort reason of a worker's run that started while its job's admission was committing, and
 * the admission then refused: no job exists, so the worker is not at fault and nothing is settled.
 */
const NOT_ADMITTED = "not_admitted";

/**
 * The worker slot a request holds while it is counted and admitted: the count, or an admission
 * refused after its run began, may move the request to another worker's slot, and whoever fails
 * first gives back the one held then.
 */
class HeldSlot {
  constructor(private lease: WorkerLease) {}

  get current(): WorkerLease {
    return this.lease;
  }

  /** Holds `next` instead; the slot held before has been given back or moved on with its run. */
  moveTo(next: WorkerLease): void {
    this.lease = next;
  }

  release(): void {
    this.lease.release();
  }
}

export class JobService {
  /** Told of each job this node moves to a final status, with that status (the metrics' counts). */
  onEnded: ((status: JobStatus) => void) | undefined;
  /** Note each run's times on its StartedJob (`workerRun`): the metrics' gateway time. Off, nothing is timed. */
  timeRuns = false;
  /** The jobs told to `onEnded` lately: an ending applied again (its group's transaction failed) is told once. */
  private readonly endedJobs = new BoundedMap<true>(10_000);
  private readonly db: Db;
  private readonly chain: Chain;
  private readonly journal: ChainJournal;
  private readonly nodeId: string | undefined;
  private readonly pool: WorkerPool;
  private readonly catalog: Catalog;
  private readonly logger: Logger;
  private readonly timeoutMs: number;
  private readonly firstTokenTimeoutMs: number;
  private readonly queueWaitMs: number;
  private readonly admissionDeferMs: number;
  private readonly vocabularies: ModelVocabularies | undefined;
  private readonly probation: Probation | undefined;
  private readonly ending: EndingDeps;
  private readonly admissions: Admissions;
  /** The wallets' escrow tables this node locks into; undefined: each job has an escrow record of its own. */
  private readonly tables: EscrowTables | undefined;
  private readonly book: CreditBook | undefined;
  /** Jobs being driven by this process, so shutdown can wait for them. */
  private readonly running = new Set<Promise<void>>();
  /** How many of each wallet's jobs are on their way here (launched, their callers not answered yet), by wallet. */
  private readonly unansweredByWallet = new Map<string, number>();
  /**
   * Each wallet's available credits after its latest admission here: a hint, never the authority
   * (the ledger is), that says whether its next job may start on its worker while its admission
   * commits (admitsEarly).
   */
  private readonly creditsSeen = new BoundedMap<number>(100_000);

  constructor(options: JobServiceOptions) {
    this.db = options.db;
    this.chain = options.chain;
    this.journal = options.journal;
    this.nodeId = options.nodeId;
    this.pool = options.pool;
    this.catalog = options.catalog;
    this.logger = options.logger;
    this.timeoutMs = options.timeoutMs ?? JOB_TIMEOUT_MS;
    this.firstTokenTimeoutMs = options.firstTokenTimeoutMs ?? DEFAULT_FIRST_TOKEN_TIMEOUT_MS;
    this.queueWaitMs = options.queueWaitMs ?? DEFAULT_QUEUE_WAIT_MS;
    this.admissionDeferMs = options.admissionDeferMs ?? ADMISSION_DEFER_MS;
    this.vocabularies = options.vocabularies;
    this.probation = options.probation;
    this.book = options.book;
    const escrowTables = options.escrowTables ?? true;
    this.ending = {
      db: this.db,
      chain: this.chain,
      journal: this.journal,
      logger: this.logger,
      timeoutMs: this.timeoutMs,
      skipProofCheck: options.skipProofCheck === true,
      settled: options.onSettled ?? (() => undefined),
      settlementRecords: settlementRecords(this.db, this.journal),
      unconfirmed: { count: 0, max: options.maxAnsweredUnconfirmed ?? MAX_ANSWERED_UNCONFIRMED },
      book: options.book,
      ended: (jobId, status) => this.jobEnded(jobId, status),
      tableSettlements: escrowTables ? new TableSettlements({ db: this.db, chain: this.chain, journal: this.journal }) : undefined,
      tableRefunds: escrowTables ? new TableRefunds({ db: this.db, chain: this.chain, journal: this.journal }) : undefined,
    };
    this.tables = escrowTables ? new EscrowTables(this.chain, this.db, (locks) => this.recordLocks(locks)) : undefined;
    this.admissions = new Admissions(this.db, this.chain, this.journal, this.nodeId, this.tables);
    registerJobActions(this.journal, this.db, this.chain, this.tables, (jobId, status) => this.jobEnded(jobId, status));
  }

  /**
   * Admit a chat completion: check the model, fit the prompt (counted by a worker only when its
   * length leaves that open), lock the price in escrow and hand the job to a worker. Resolves once
   * the job is running; errors before that are ApiErrors that leave nothing charged.
   */
  async start(caller: JobCaller, request: ChatRequest, clientSignal: AbortSignal): Promise<StartedJob> {
    const model = this.catalog.get(request.model);
    if (!model) throw modelNotFound(this.catalog, request.model);
    await this.refuseUnfittable(model, request);
    const held = new HeldSlot(await this.slotFor(model.id, clientSignal));
    try {
      const fit = fitUncounted(Math.min(model.contextWindow, held.current.worker.contextWindow(model.id)), request) ?? (await this.fitCounted(model, request, held, clientSignal));
      // Nobody is left to answer: locking and then refunding an escrow would only cost the chain and the database.
      if (clientSignal.aborted) throw new ApiError("internal_error", "The caller left before the job was admitted; nothing was charged.");
      return await this.reserve(caller, model, request, fit, held, clientSignal);
    } catch (error) {
      held.release();
      throw error;
    }
  }

  /**
   * The fit of a prompt a worker has counted: on the leased worker, or on one with room for it
   * when the count shows it needs more; refused with 400 context_length_exceeded when none has.
   */
  private async fitCounted(model: CatalogModel, request: ChatRequest, held: HeldSlot, clientSignal: AbortSignal): Promise<Fit> {
    const { lease, promptTokens } = await this.countOnWorkers(model.id, held.current, request.messages);
    const wanted = promptTokens + (request.maxTokens ?? 1);
    held.moveTo(await this.roomFor(model, lease, wanted, clientSignal));
    const contextWindow = Math.min(model.contextWindow, held.current.worker.contextWindow(model.id));
    if (wanted > contextWindow) {
      // The window GET /models shows: the largest a request can get, whichever worker was picked.
      const largest = Math.min(model.contextWindow, Math.max(contextWindow, this.pool.contextWindow(model.id)));
      throw contextLengthExceeded(largest, `${promptTokens}`, request.maxTokens);
    }
    return { promptTokens, wanted, contextWindow };
  }

  /**
   * A slot on a worker hosting the model: a free one now, or the first that frees while the
   * request waits its turn at the gateway (at most queueWaitMs). Refused with 503
   * no_workers_available and a retry_after when no worker hosts the model, its queue is full or
   * the wait runs out; nothing is charged.
   */
  private async slotFor(model: string, signal: AbortSignal, wanted: LeaseWanted = {}): Promise<WorkerLease> {
    if (this.pool.serving(model).length === 0) noWorkers(model, this.pool);
    const lease = await this.pool.lease(model, wanted, { waitMs: this.queueWaitMs, signal });
    if (lease !== undefined) return lease;
    if (signal.aborted) throw new ApiError("internal_error", "The caller left while the request waited for a worker; nothing was charged.");
    if (this.pool.serving(model).length === 0) noWorkers(model, this.pool);
    throw new ApiError("no_workers_available", `Every worker serving ${model} is busy. Retry shortly.`, null, { model, retry_after: this.pool.busyRetryAfterSeconds(model) });
  }

  /** What is left of the job's 120 seconds. */
  private timeLeftMs(job: JobRecord): number {
    return Math.max(0, job.createdAt.getTime() + this.timeoutMs - Date.now());
  }

  /**
   * Hand the job to its worker, and send the escrow once `admitted` (the admission's commit)
   * resolves. The chain transaction proceeds while the worker generates: the ledger already holds
   * the credits, and the driver awaits the escrow before any settlement. The worker's output
   * waits in the job's channel for its caller, who reads it once the job is admitted, or at once
   * when its lock was granted (reserve).
   */
  private launch(
    job: JobRecord,
    admission: Promise<Admitted>,
    lease: WorkerLease,
    request: ChatRequest,
    clientSignal: AbortSignal,
    deferred: { outputBegun?: () => void; held?: HeldAdmission } = {},
  ): Launch {
    const admitted = admission.then((a) => a.creditsAfterLock);
    const held = deferred.held && { admission: deferred.held, charged: awaitedLater(admission.then((a) => a.charged)) };
    const tables = this.tables;
    const send = tables ? (lock: ChainAction) => tables.sendInTurn(lock, () => this.journal.sendUntilLanded(lock)) : undefined;
    const lock = admission.then(async (a) => {
      // Charged with its admission, its caller is answered in this turn: the reply leaves first.
      if (a.charged) await new Promise((resolve) => setImmediate(resolve));
      return a.escrow ?? this.lockLater(job);
    });
    const escrow = new EscrowLanding(this.journal, lock, send, tables ? () => tables.hurry(job.wallet, job.id) : undefined, tables ? (reason: string) => tables.withdraw(job.wallet, job.id, reason) : undefined);
    // Sent again alone (the transaction it shared was refused), the lock has another signature.
    // A table's lock signed later, or sent again alone, also names the job's slot.
    escrow.landedLock().then((landed) => {
      if ((landed as EscrowAction).escrowAddress !== undefined) Object.assign(job, escrowPlace(landed as EscrowAction));
      started.escrowTx = job.escrowTx = landed.signature;
    }, () => undefined);
    let answered = false;
    const answer = () => {
      if (answered) return;
      answered = true;
      const left = (this.unansweredByWallet.get(job.wallet) ?? 1) - 1;
      if (left > 0) this.unansweredByWallet.set(job.wallet, left);
      else this.unansweredByWallet.delete(job.wallet);
    };
    const channel = new Channel<JobEvent>(answer);
    const started: StartedJob = {
      id: job.id,
      model: job.model,
      created: Math.floor(job.createdAt.getTime() / 1000),
      // Known once its admission's group has signed its lock.
      escrowTx: "",
      workerAddress: lease.worker.address,
      creditsAfterLock: 0,
      creditsRemaining: 0,
      events: channel,
    };
    if (this.timeRuns) started.workerRun = { dispatchedAt: 0 };
    const credited = admission.then(({ creditsAfterLock, escrow }) => {
      // A lock signed later names its transaction once it has landed (above), before the reply ends.
      if (escrow) started.escrowTx = escrow.signature;
      started.creditsAfterLock = creditsAfterLock;
      started.creditsRemaining = creditsAfterLock;
      return started;
    });
    const outputBegun = deferred.outputBegun ?? (() => undefined);
    const drive = this.drive({ job, request, firstLease: lease, admitted, escrow, channel, clientSignal, started, outputBegun, ...(held ? { held } : {}) })
      .catch(async (error: unknown) => {
        this.logger.error({ err: error, job: job.id }, "job failed unexpectedly");
        channel.close(new ApiError("internal_error", "The job failed inside the service; nothing was charged."));
        await this.refundAbandoned(job.id);
      })
      .finally(() => {
        this.running.delete(drive);
        answer();
      });
    this.running.add(drive);
    this.unansweredByWallet.set(job.wallet, (this.unansweredByWallet.get(job.wallet) ?? 0) + 1);
    return { started, admitted: credited };
  }

  /**
   * The prompt's tokens, counted by the leased worker, or by another one hosting the model when
   * that one leaves or stalls while counting: a worker's fault is not the caller's. A worker that
   * answers it cannot count this prompt speaks for the request only as RequestBlame allows.
   */
  private async countOnWorkers(model: string, first: WorkerLease, messages: ChatMessage[]): Promise<{ lease: WorkerLease; promptTokens: number }> {
    const tried = new Set<string>();
    const blame = new RequestBlame();
    let lease = first;
    for (;;) {
      tried.add(lease.worker.address);
      try {
        const promptTokens = await lease.worker.countPromptTokens(model, messages);
        blame.ran();
        return { lease, promptTokens };
      } catch (error) {
        const requestBlamed = error instanceof JobRequestError;
        if (requestBlamed && blame.refused(lease, this.pool.vetting(lease.worker.address))) {
          // The caller releases the first lease; one taken here is this function's to give back.
          if (lease !== first) lease.release();
          throw new ApiError("internal_error", `The worker serving ${model} could not count the prompt; nothing was charged.`);
        }
        if (!requestBlamed) lease.outcome(error instanceof ApiError ? "stalled" : "failed");
        lease.release();
        const next = await this.pool.lease(model, { exclude: tried, vouchedFirst: blame.pending }, { waitMs: this.queueWaitMs });
        if (next === undefined) {
          if (error instanceof ApiError) throw error;
          throw new ApiError("internal_error", `The worker serving ${model} left while counting the prompt; nothing was charged. Retrying usually succeeds.`);
        }
        this.logger.warn({ err: error, from: lease.worker.address, to: next.worker.address }, "worker failed to count a prompt; another counts it");
        lease = next;
      }
    }
  }

  /**
   * The lease to run a request needing `wanted` tokens of context on: the one given if its worker
   * holds that many, else one on a worker hosting the model that does (GET /models promises the
   * largest window among them), else the one given, which then refuses the request.
   */
  private async roomFor(model: CatalogModel, lease: WorkerLease, wanted: number, signal: AbortSignal): Promise<WorkerLease> {
    if (wanted <= lease.worker.contextWindow(model.id)) return lease;
    const roomier = await this.pool.lease(model.id, { exclude: new Set([lease.worker.address]), minContextWindow: wanted }, { waitMs: this.queueWaitMs, signal });
    if (roomier === undefined) return lease;
    lease.release();
    return roomier;
  }

  /**
   * Refuses, before any worker renders or tokenizes it, a prompt whose length alone proves it
   * cannot fit the catalog's context window (no worker offers more): a few megabytes of one word
   * would otherwise hold a tokenizer for minutes.
   */
  private async refuseUnfittable(model: CatalogModel, request: ChatRequest): Promise<void> {
    const atLeast = promptTokensAtLeast(request.messages, await this.maxTokenBytes(model.id));
    if (atLeast + (request.maxTokens ?? 1) > model.contextWindow) throw contextLengthExceeded(model.contextWindow, `at least ${atLeast}`, request.maxTokens);
  }

  /**
   * Reserve the escrow in the ledger and record the job, its escrow transaction and its worker,
   * atomically (one commit, shared with the jobs admitted beside it: admission.ts), then launch it.
   * The ledger's check is the authority on the balance: with max_tokens the lock is its cost
   * whatever the balance, so the balance is not read before; without it the lock is what the
   * balance allows, and a concurrent request can change that, so it is re-planned a couple of times.
   * `held` is the slot in use, for the caller to release if this fails.
   */
  private async reserve(
    caller: JobCaller,
    model: CatalogModel,
    request: ChatRequest,
    fit: Fit,
    held: HeldSlot,
    clientSignal: AbortSignal,
  ): Promise<StartedJob> {
    const { promptTokens, wanted, contextWindow } = fit;
    const { wallet } = caller;
    const rates = TIERS[model.tier];
    for (let attempt = 0; ; attempt++) {
      const available = request.maxTokens !== undefined ? Number.POSITIVE_INFINITY : await money.availableCredits(this.db, wallet);
      const plan = planEscrow({ rates, availableCredits: available, maxTokens: request.maxTokens, promptTokens, contextWindow });
      if (!plan.ok) throw insufficientCredits(available, plan.creditsRequired, model.tier);
      // Its lock is signed in the admission's group, with the others' locks.
      const job = newPendingJob({
        id: newId("job"),
        wallet,
        model: model.id,
        tier: model.tier,
        creditsLocked: plan.lockCredits,
        maxTokens: plan.maxTokens,
        promptTokens,
        escrowAddress: "",
        escrowTx: "",
        // Kept for a dispute's re-execution until the window closes (Disputes.start forgets it).
        request,
      });
      // A JSON reply is written at the end: its table lock can wait for the wallet's next jobs,
      // when the wallet has others on their way to share its transaction. Alone, it is signed in
      // the admission and lands while the job runs, off the reply's path (or after it, when its
      // charge is recorded with the admission: HeldAdmission); so is a stream's, whose headers
      // name it at the first token.
      const othersUnanswered = (this.unansweredByWallet.get(wallet) ?? 0) > 0;
      const lockLater = this.tables !== undefined && request.stream !== true && othersUnanswered;
      const granted = this.book?.grant(wallet, plan.lockCredits);
      if (granted) return await this.startGranted({ job, caller, request, held, clientSignal, lockLater, credit: granted });
      // The ledger decides the lock, once the wallet's granted ones in flight have committed: it could give it their credits first.
      const credit = await this.book?.takeAlone(wallet, plan.lockCredits);
      const admission = this.admissions.admit({ job, ...(lockLater ? { lockLater } : {}), worker: held.current.worker, keyToConfirm: caller.keyToConfirm });
      admission.then((a) => credit?.done(true, a.creditsAfterLock), () => credit?.done(false));
      // A refusal is handled below.
      awaitedLater(admission);
      const launched = this.admitsEarly(wallet, request, plan.lockCredits) ? this.launch(job, admission, held.current, request, clientSignal) : undefined;
      // Refused, it rejects as `admission` does, which is handled below.
      if (launched) awaitedLater(launched.admitted);
      try {
        const { creditsAfterLock } = await admission;
        this.creditsSeen.set(wallet, creditsAfterLock);
        return await (launched?.admitted ?? this.launch(job, admission, held.current, request, clientSignal).admitted);
      } catch (error) {
        this.creditsSeen.delete(wallet);
        const remaining = refusedBalance(error);
        if (remaining === undefined) throw error;
        if (request.maxTokens !== undefined || attempt >= 2) {
          throw insufficientCredits(remaining, request.maxTokens !== undefined ? plan.lockCredits : rates.creditsPerRequest, model.tier);
        }
        // The run begun early gave its lease back when its job was refused.
        if (launched) held.moveTo(await this.slotFor(model.id, clientSignal, { minContextWindow: wanted }));
      }
    }
  }

  /**
   * A job whose lock the credit book granted: the ledger cannot refuse it, so its caller has the
   * job without waiting for its admission's commit, with the credits the book holds after it. A
   * stream names its escrow lock in its headers: its lock is signed as its admission's group
   * begins, and the group's statements wait for its first output to be relayed (at most
   * ADMISSION_DEFER_MS), so they do not hold the first token back: with PGlite they run on this
   * thread. A JSON reply waits for its charge: its admission waits as long for the output to be
   * in, to record the charge with it (HeldAdmission).
   */
  private async startGranted(g: GrantedJob): Promise<StartedJob> {
    const { job, request, credit } = g;
    const stream = request.stream === true;
    let showLock!: (lock: EscrowAction | undefined) => void;
    const lockSigned = new Promise<EscrowAction | undefined>((resolve) => (showLock = resolve));
    // A lock signed later is not known when the reply goes out, which must name it.
    const holdsCharge = !stream && this.tables !== undefined && !g.lockLater;
    const recordNow = stream || holdsCharge ? admissionGate(this.admissionDeferMs) : undefined;
    const deferred = recordNow ? { recordAfter: recordNow.opened, granted: true as const } : {};
    const admitting: Admission = { job, ...(g.lockLater ? { lockLater: true } : {}), worker: g.held.current.worker, keyToConfirm: g.caller.keyToConfirm, ...deferred, ...(stream ? { signed: showLock } : {}) };
    const held: HeldAdmission | undefined = holdsCharge
      ? {
          claim: recordNow!.claim,
          open: (charge) => {
            if (charge) admitting.charge = charge;
            recordNow!.open();
          },
        }
      : undefined;
    const admission = this.admissions.admit(admitting);
    admission.then(
      (a) => credit.done(true, a.creditsAfterLock),
      (error: unknown) => {
        credit.done(false);
        this.logger.error({ err: error, job: job.id }, "a job whose lock the credit book granted could not be admitted; it ends with nothing charged");
      },
    );
    awaitedLater(admission);
    const launch = this.launch(job, admission, g.held.current, request, g.clientSignal, stream ? { outputBegun: recordNow!.open } : held ? { held } : {});
    awaitedLater(launch.admitted);
    launch.started.creditsAfterLock = launch.started.creditsRemaining = credit.creditsAfter!;
    if (!stream) return launch.started;
    // Signed as its group begins, before the group waits for its output: a group that fails before signing rejects the admission.
    const lock = await Promise.race([lockSigned, admission.then((a) => a.escrow)]);
    if (lock) launch.started.escrowTx = lock.signature;
    return launch.started;
  }

  /**
   * Whether a job may start on its worker while its admission commits, so that commit is not
   * added to the caller's wait: when the wallet's balance was just read (no max_tokens), or its
   * credits after its latest admission here cover this lock. A refused admission stops the worker
   * (NOT_ADMITTED), so a wallet that cannot pay costs workers at most one commit's time, once.
   */
  private admitsEarly(wallet: string, request: ChatRequest, lockCredits: number): boolean {
    return request.maxTokens === undefined || (this.creditsSeen.get(wallet) ?? -1) >= lockCredits;
  }

  /**
   * Run the job on its worker and carry it to a final state, reporting to the channel. A worker
   * that fails before its first token is replaced by another one hosting the model, unnoticed by
   * the caller; after the first token a failure fails the job. A caller who leaves stops the
   * generation, and the output produced up to then is settled (DECISIONS "Pricing and escrow").
   */
  private async drive(driven: DrivenJob): Promise<void> {
    const watch = this.watchJob(driven.job, driven.clientSignal, driven.admitted);
    let run: WorkerRun;
    let check: ProbationCheck | undefined;
    const span = runSpan(driven.job, driven.request);
    try {
      run = await this.runOnWorkers(driven, watch, (next) => {
        check?.drop();
        check = next;
      });
    } catch (error) {
      endRunSpan(span, { lease: driven.firstLease, workerError: error }, error);
      throw error;
    } finally {
      watch.dispose();
    }
    endRunSpan(span, run);
    // A probation check is judged only against a whole answer of the job's last worker.
    if (run.done !== undefined && run.done.finishReason !== "cancelled" && !watch.timedOut()) check?.judge(outputHash(run.text));
    else check?.drop();
    const atAdmission = driven.held && (await this.chargeWithAdmission(driven, driven.held, run, watch.timedOut()));
    // Refused: there is no job to end. Its caller has its answer from start(), unless its lock
    // was granted and it reads the job already: the admission failed in the database then.
    if (!(await driven.admitted.then(() => true, () => false))) {
      driven.channel.close(new ApiError("internal_error", "The job could not be recorded; nothing was charged. Retrying usually succeeds."));
      return;
    }
    await conclude(this.ending, driven, run, {
      timedOut: watch.timedOut(),
      callerLeft: driven.clientSignal.aborted,
      metered: async (done) => (atAdmission ? atAdmission.metered : this.meterCompletion(driven.job, driven.request.stop, run.text, done)),
      ...(atAdmission && atAdmission.charged ? { chargedAtAdmission: atAdmission.charged } : {}),
    });
  }

  /**
   * A granted JSON job's charge, recorded in its admission's transaction when its output is in
   * before that began (HeldAdmission). Undefined when the admission went ahead alone or the job
   * ended without output; `charged` is unset when its charge is not made at once
   * (chargeAtAdmission). The job then ends as any other, after its admission.
   */
  private async chargeWithAdmission(driven: DrivenJob, held: NonNullable<DrivenJob["held"]>, run: WorkerRun, timedOut: boolean) {
    const { done } = run;
    // A job moved to another worker waited for its admission (reassign): the gate opened then.
    if (done === undefined || done.finishReason === "cancelled" || timedOut || run.lease !== driven.firstLease || !held.admission.claim()) {
      held.admission.open(undefined);
      return undefined;
    }
    let charge: JobChanges | undefined;
    let giveBack: CreditChange | undefined;
    let metered: Awaited<ReturnType<JobService["meterCompletion"]>>;
    try {
      metered = await this.meterCompletion(driven.job, driven.request.stop, run.text, done);
      // Its row names its worker once admitted.
      const job = { ...driven.job, workerAddress: run.lease.worker.address };
      charge = chargeAtAdmission(this.ending, job, run.text, { ...done, usage: metered.usage });
      // Taken before the commit, so the book counts it in flight with the job's lock.
      if (charge) giveBack = this.book?.give(driven.job.wallet, driven.job.creditsLocked - charge.creditsCharged!);
    } finally {
      held.admission.open(charge);
    }
    const charged = await held.charged.catch(() => undefined);
    giveBack?.done(charged !== undefined, charged?.creditsRemaining);
    return { metered, ...(charged ? { charged } : {}) };
  }

  /**
   * The signal a job's workers run under. The caller leaving asks the worker for a proof of its
   * partial output (CALLER_LEFT); the timeout, or the admission's refusal, abandons the job.
   */
  private watchJob(job: JobRecord, clientSignal: AbortSignal, admitted: Promise<number>): JobWatch {
    const work = new AbortController();
    admitted.catch(() => work.abort(NOT_ADMITTED));
    const onClientGone = () => work.abort(CALLER_LEFT);
    clientSignal.addEventListener("abort", onClientGone, { once: true });
    // A caller who left while the job was being admitted gets no event: it fired already.
    if (clientSignal.aborted) onClientGone();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      work.abort();
    }, this.timeLeftMs(job));
    return {
      signal: work.signal,
      timedOut: () => timedOut,
      dispose: () => {
        clearTimeout(timer);
        clientSignal.removeEventListener("abort", onClientGone);
      },
    };
  }

  /**
   * Generate on the job's worker, moving to another one while none has produced anything, and
   * when a worker refused the request as its fault, as RequestBlame decides. Each attempt may have
   * a probation check run beside it (`checked` hears of it).
   */
  private async runOnWorkers(driven: DrivenJob, job: JobWatch, checked: (check: ProbationCheck | undefined) => void): Promise<WorkerRun> {
    const tried = new Set<string>();
    const run: WorkerRun = { lease: driven.firstLease, text: "", done: undefined, workerError: undefined };
    const begun = performance.now();
    const generation = generationOf(driven.job, driven.request);
    const blame = new RequestBlame();
    const outputLimitBytes = await this.outputLimitBytes(driven.job);
    for (;;) {
      const { lease } = run;
      tried.add(lease.worker.address);
      checked(this.probation?.beside({ jobId: driven.job.id, model: driven.job.model, request: generation }, lease.worker.address, contextWanted(driven.job, driven.request.messages)));
      const stalled = await this.attempt(driven, { generation, outputLimitBytes }, run, job, begun);
      const fault = attemptFault({ done: run.done !== undefined, stalled: stalled || job.timedOut(), workerError: run.workerError, abandoned: job.signal.reason === CALLER_LEFT || job.signal.reason === NOT_ADMITTED });
      if (fault !== undefined) lease.outcome(fault);
      if (run.done !== undefined || run.text !== "") blame.ran();
      if (run.done !== undefined || run.text !== "" || job.signal.aborted) return run;
      // A request no worker can run fails once that is settled, rather than on every worker in turn.
      if (run.workerError instanceof JobRequestError && blame.refused(lease, this.pool.vetting(lease.worker.address))) return run;
      const next = await this.pool.lease(driven.job.model, { exclude: tried, vouchedFirst: blame.pending }, { waitMs: this.timeLeftMs(driven.job), signal: job.signal });
      if (next === undefined) return run;
      this.logger.warn({ err: run.workerError, job: driven.job.id, from: lease.worker.address, to: next.worker.address }, "worker failed before its first token; job moved");
      run.lease = next;
      await this.reassign(driven.job, next, driven.escrow.confirmed);
      driven.started.workerAddress = next.worker.address;
    }
  }

  /** The most output a job's `max_tokens` can make: no token is longer than the model's longest. */
  private async outputLimitBytes(job: JobRecord): Promise<number> {
    return job.maxTokens * (await this.maxTokenBytes(job.model));
  }

  /** The model's longest token: its vocabulary's where the gateway holds it, else DEFAULT_MAX_TOKEN_BYTES. */
  private async maxTokenBytes(model: string): Promise<number> {
    return (await this.vocabularies?.get(model))?.maxTokenBytes ?? DEFAULT_MAX_TOKEN_BYTES;
  }

  /**
   * One worker's attempt at the job, streaming its deltas to the channel, and cut off (an
   * OutputOverrunError) where its output passes what the job's `max_tokens` can make. Returns
   * whether it stalled before its first token.
   */
  private async attempt(driven: DrivenJob, limits: { generation: GenerationRequest; outputLimitBytes: number }, run: WorkerRun, job: JobWatch, begun: number): Promise<boolean> {
    const { lease } = run;
    run.workerError = undefined;
    const watch = this.watchFirstToken(job.signal);
    let bytes = 0;
    const times = driven.started.workerRun;
    if (times) times.dispatchedAt = performance.now();
    try {
      const workerJob = { jobId: driven.job.id, model: driven.job.model, request: limits.generation, stream: driven.request.stream === true };
      for await (const event of lease.worker.run(workerJob, watch.signal)) {
        if (job.timedOut()) break;
        if (event.type === "delta") {
          if ((bytes += utf8Bytes(event.text)) > limits.outputLimitBytes) {
            run.workerError = new OutputOverrunError(`worker ${lease.worker.address} sent more than ${limits.outputLimitBytes} bytes for ${driven.job.maxTokens} tokens`);
            break;
          }
          if (run.text === "") {
            lease.firstToken(Math.round(performance.now() - begun));
            if (times) times.firstOutputAt = performance.now();
          }
          watch.tokenArrived();
          run.text += event.text;
          driven.channel.push(event);
          driven.outputBegun();
        } else {
          run.done = event;
          if (times) times.doneAt = performance.now();
        }
      }
    } catch (error) {
      run.workerError = error;
    } finally {
      watch.dispose();
      lease.release();
      driven.outputBegun();
    }
    return watch.stalled;
  }

  /**
   * A signal for one worker's attempt at a job: aborted with the job's own, or when the worker
   * has sent no token within the first-token timeout (then `stalled` is set).
   */
  private watchFirstToken(work: AbortSignal): { signal: AbortSignal; stalled: boolean; tokenArrived(): void; dispose(): void } {
    const attempt = new AbortController();
    // The job's reason passes through: a caller who left still gets the partial output's proof.
    const onWorkAborted = () => attempt.abort(work.reason);
    work.addEventListener("abort", onWorkAborted, { once: true });
    if (work.aborted) onWorkAborted();
    const watch = {
      signal: attempt.signal,
      stalled: false,
      tokenArrived: () => clearTimeout(timer),
      dispose: () => {
        clearTimeout(timer);
        work.removeEventListener("abort", onWorkAborted);
      },
    };
    const timer = setTimeout(() => {
      watch.stalled = true;
      attempt.abort();
    }, this.firstTokenTimeoutMs);
    return watch;
  }

  /**
   * The completion tokens the caller pays for, counted by the gateway from the text it relayed:
   * with the model's tokenizer where it holds one, else by what the text's bytes can hold. The
   * worker's figure is taken only when lower, and without a count where the text's floor of
   * tokens already shows it is (claimWithinFloor). A worker that claims more is recorded.
   */
  private async meterCompletion(
    job: JobRecord,
    stop: readonly string[],
    text: string,
    done: { finishReason: StopReason; usage: Usage },
  ): Promise<{ usage: Usage; outcome: JobOutcome }> {
    const claimed = done.usage.completionTokens;
    const atMost = Math.min(job.maxTokens, completionTokensAtMost({ text, stop, finishReason: done.finishReason }));
    const counter = await this.vocabularies?.get(job.model);
    if (counter && claimWithinFloor(counter, text, claimed, { chargeable: atMost, maxTokens: job.maxTokens })) return { usage: done.usage, outcome: "served" };
    let counted = atMost;
    let overran = false;
    const tokens = counter && (await this.countWith(counter, job.id, [text, ...(done.finishReason === "stop" ? stop : [])]));
    if (tokens) {
      const [textTokens, ...stopTokens] = tokens;
      overran = textTokens! > job.maxTokens + SILENT_TOKENS;
      counted = Math.min(atMost, textTokens! + Math.max(0, ...stopTokens) + SILENT_TOKENS);
    }
    if (claimed <= counted && !overran) return { usage: done.usage, outcome: "served" };
    this.logger.warn({ job: job.id, worker: job.workerAddress, claimed, counted, overran }, "worker claimed more completion tokens than its output holds, or sent more than max_tokens; charged the gateway's count");
    return { usage: { promptTokens: done.usage.promptTokens, completionTokens: Math.min(claimed, counted) }, outcome: "overstated" };
  }

  /** Each text's tokens by the model's tokenizer; undefined when counting failed (the byte bound stands). */
  private async countWith(counter: TokenCounter, jobId: string, texts: string[]): Promise<number[] | undefined> {
    try {
      return await Promise.all(texts.map((t) => counter.countTokens(t)));
    } catch (error) {
      this.logger.warn({ err: error, job: jobId }, "could not count the output's tokens; it is charged by what its bytes can hold");
      return undefined;
    }
  }

  /** Hand the job to another worker (after the first one failed before producing anything). */
  private async reassign(job: JobRecord, lease: WorkerLease, ready: Promise<number>): Promise<void> {
    // The first assignment's write must land first, or it could overwrite this one; whether it failed is its driver's news.
    await Promise.allSettled([ready]);
    Object.assign(job, { workerAddress: lease.worker.address, workerStaked: lease.worker.staked });
    await updateJob(this.db, job.id, { workerAddress: lease.worker.address, workerStaked: lease.worker.staked });
  }

  /** Tells `onEnded` of a job this node ended, once however many times its ending was applied. */
  private jobEnded(jobId: string, status: JobStatus): void {
    if (!this.onEnded || this.endedJobs.has(jobId)) return;
    this.endedJobs.set(jobId, true);
    this.onEnded(status);
  }

  async getJob(wallet: string, id: string): Promise<JobRecord | undefined> {
    const job = await getJob(this.db, id);
    return job && job.wallet === wallet ? job : undefined;
  }

  /**
   * After a crash, once the chain journal has finished its open actions: jobs that were
   * mid-generation (or whose settlement the chain refused) get their escrow back: of `owner`'s
   * node, or of any node when not given. Returns how many.
   */
  async refundInterrupted(owner?: ActionOwnerNode): Promise<number> {
    let returned = 0;
    for (const job of await jobsAwaitingRefund(this.db, this.journal, owner)) {
      await this.returnEscrow(job);
      returned++;
    }
    return returned;
  }

  /**
   * A job admitted without its lock (EscrowTables.lockLater), its lock signed with the wallet's
   * next jobs and recorded; when that fails, the job's reservation goes back (nothing is on its
   * way to the chain) and the promise rejects, which ends the job as an escrow that never landed.
   */
  private lockLater(job: JobRecord): Promise<ChainAction> {
    return this.tables!.lockLater({ jobId: job.id, tier: job.tier, wallet: job.wallet, credits: job.creditsLocked }).catch(async (error: unknown) => {
      const withdrawn = error instanceof LockWithdrawnError;
      if (!withdrawn) this.logger.error({ err: error, job: job.id }, "could not sign or record the job's escrow lock; its credits go back");
      await releaseUnlocked(this.db, job.id, withdrawn ? error.reason : "escrow_failed", (id, status) => this.jobEnded(id, status));
      throw error;
    });
  }

  /** Locks signed later, written to the chain journal and to their jobs' rows in one transaction, before they are sent. */
  private async recordLocks(locks: readonly ChainAction[]): Promise<void> {
    await this.db.transaction(async (tx) => {
      await this.journal.recordAll(tx, locks);
      await updateJobs(tx, locks.map((lock) => ({ id: lock.subject, changes: escrowPlace(lock as EscrowAction) })));
    });
  }

  /** Sends back the escrow of an unfinished job that nothing drives; `slot` says whether it landed. */
  private async returnEscrow(job: JobRecord): Promise<void> {
    // Admitted without its lock, and none recorded since: nothing is on the chain to send back.
    if (!job.escrowTx) return releaseUnlocked(this.db, job.id, "interrupted", (id, status) => this.jobEnded(id, status));
    const escrowLanded = awaitedLater(job.slot !== null ? Promise.resolve(job.slot) : Promise.reject(new Error("escrow not on chain")));
    await refundJob(this.ending, job, escrowLanded, "failed", "interrupted");
  }

  /**
   * A job whose driver failed unexpectedly (its settlement's record refused by the database, say)
   * has its escrow sent back now, as recovery at this node's next start would. One with a chain
   * transaction in flight, or whose refund fails too, is still left to that recovery.
   */
  private async refundAbandoned(jobId: string): Promise<void> {
    try {
      const job = await jobAwaitingRefund(this.db, this.journal, jobId);
      if (job !== undefined) await this.returnEscrow(job);
    } catch (error) {
      this.logger.error({ err: error, job: jobId }, "could not return the escrow of a failed job; the next start's recovery will");
    }
  }

  /** After finishing a dead node's work: its jobs become this node's, for the sweeps that follow their end. */
  async adoptJobsOf(deadNodeId: string): Promise<number> {
    return this.nodeId === undefined ? 0 : adoptJobs(this.db, deadNodeId, this.nodeId);
  }

  /** Jobs this process is driving that have not reached a final state yet. */
  get runningJobs(): number {
    return this.running.size;
  }

  /** Wait for the jobs this process is driving to reach a final state. */
  async drain(): Promise<void> {
    // Locks and batches waiting for more jobs are signed now: nothing else will join them.
    this.tables?.hurryAll();
    this.ending.tableSettlements?.flush();
    this.ending.tableRefunds?.flush();
    await Promise.allSettled([...this.running]);
  }
}

/** The wallet's available credits when the ledger refused a reservation for want of them; undefined for any other error. */
function refusedBalance(error: unknown): number | undefined {
  if (error instanceof ExceedsCreditsError) return money.toCredits(error.available);
  // A wallet that never received a deposit has no ledger accounts: it has nothing.
  if (error instanceof AccountNotFoundError) return 0;
  return undefined;
}

/**
 * What an attempt that ended without a proof says about its worker: nothing when the caller left,
 * the job was not admitted, or the request itself was at fault; otherwise it stalled or failed. A finished one is judged at
 * settlement.
 */
function attemptFault(attempt: { done: boolean; stalled: boolean; workerError: unknown; abandoned: boolean }): JobOutcome | undefined {
  if (attempt.workerError instanceof OutputOverrunError) return "overstated";
  if (attempt.done || attempt.abandoned || attempt.workerError instanceof JobRequestError) return undefined;
  if (attempt.stalled) return "stalled";
  return "failed";
}

/** A worker sent more output than the job's `max_tokens` can make: it is cut off there, and struck. */
class OutputOverrunError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "OutputOverrunError";
  }
}

/**
 * Opens once `open` is called, or `ms` after it was made, whichever comes first, at the end of that
 * turn of the event loop. `claim`, before it opened, stops the clock: only `open` opens it then.
 */
function admissionGate(ms: number): { opened: Promise<void>; open: () => void; claim: () => boolean } {
  let resolve!: () => void;
  let opening = false;
  const opened = new Promise<void>((r) => (resolve = r));
  // At the end of the event loop's turn: the output relayed in this turn leaves the socket first
  // (Node writes a response's bytes on the next tick, which the statements' promises would hold back).
  const open = () => {
    if (opening) return;
    opening = true;
    clearTimeout(timer);
    setImmediate(resolve);
  };
  const timer = setTimeout(open, ms);
  const claim = () => {
    if (!opening) clearTimeout(timer);
    return !opening;
  };
  return { opened, open, claim };
}

function noWorkers(model: string, pool: WorkerPool): never {
  throw new ApiError("no_workers_available", `No worker is serving ${model} right now. Retry shortly.`, null, {
    model,
    retry_after: pool.retryAfterSeconds(model),
  });
}

function contextLengthExceeded(contextWindow: number, promptTokens: string, maxTokens: number | undefined): ApiError {
  return new ApiError(
    "context_length_exceeded",
    `This model's context window is ${contextWindow} tokens; the messages take ${promptTokens}` +
      (maxTokens !== undefined ? ` and max_tokens asks for ${maxTokens} more.` : "."),
    "messages",
  );
}

/**
 * Whether the count would take the claim as it stands, known without counting: the claim is no
 * higher than the text's floor of tokens (its pieces, each at least one) plus the silent ones, nor
 * than the most the job can be charged, and the text's ceiling of tokens is within what its
 * max_tokens allows (so it cannot have overrun).
 */
function claimWithinFloor(counter: TokenCounter, text: string, claimed: number, bounds: { chargeable: number; maxTokens: number }): boolean {
  const range = counter.tokenRange?.(text);
  if (range === undefined || range.atMost > bounds.maxTokens + SILENT_TOKENS) return false;
  return claimed <= Math.min(bounds.chargeable, range.atLeast + SILENT_TOKENS);
}
