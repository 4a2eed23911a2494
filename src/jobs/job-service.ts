/**
 * The life of a job: pending -> processing -> settling -> settled, or failed / refunded.
 *
 * Money moves first in the ledger (atomic, no overspend) and then on-chain. Every chain
 * transaction is recorded as a chain action (signature and signed bytes) in the same database
 * transaction as the state change that calls for it, before it is sent; its ledger effect is
 * applied in the database transaction that marks it confirmed. So a crash at any point leaves
 * something `recover()` can finish or undo, and nothing is charged twice.
 */
import { performance } from "node:perf_hooks";
import type { Catalog, CatalogModel } from "../catalog/catalog.ts";
import type { Chain } from "../chain/chain.ts";
import { Channel } from "../core/channel.ts";
import { ApiError, insufficientCredits } from "../core/errors.ts";
import { newId } from "../core/ids.ts";
import { completionCost, planEscrow, TIERS } from "../core/pricing.ts";
import { outputHash } from "../core/proof.ts";
import { splitPayout } from "../core/payout.ts";
import type { ChatRequest } from "../http/chat-request.ts";
import type { ChatMessage, FinishReason, StopReason, Usage } from "../inference/engine.ts";
import { completionTokensAtMost, DEFAULT_MAX_TOKEN_BYTES, promptTokensAtLeast, SILENT_TOKENS } from "../inference/token-bounds.ts";
import type { ModelVocabularies } from "../inference/vocabulary.ts";
import { emitJobProcessing, emitJobSubmitted } from "../events/index.ts";
import { ExceedsCreditsError } from "../ledger/index.ts";
import { CALLER_LEFT, JobRequestError, type WorkerEvent } from "../network/worker-handle.ts";
import type { JobOutcome } from "../network/worker-health.ts";
import type { WorkerLease, WorkerPool } from "../network/worker-pool.ts";
import type { Db } from "../store/db.ts";
import type { Logger } from "../core/logger.ts";
import { ChainActions, ChainRejectedError, type PreparedAction } from "./chain-actions.ts";
import { jobEventFacts, newPendingJob, type JobRecord } from "./job-record.ts";
import { getJob, insertJob, updateJob } from "./job-repo.ts";
import * as money from "./money.ts";

export const DEFAULT_JOB_TIMEOUT_MS = 120_000;
/** A worker that has sent no token this long after taking a job is stalling: the job moves on. */
export const DEFAULT_FIRST_TOKEN_TIMEOUT_MS = 60_000;


export type JobEvent =
  | { type: "delta"; text: string }
  /** The worker finished; settlement follows. */
  | { type: "finished"; finishReason: FinishReason; usage: Usage }
  | { type: "settled"; settlementTx: string; slot: number; creditsRemaining: number };

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
}

/** What a job's workers produced. */
interface WorkerRun {
  /** The lease of the worker that ran it last. */
  lease: WorkerLease;
  /** The output as the gateway received it. */
  text: string;
  done: Extract<WorkerEvent, { type: "done" }> | undefined;
  workerError: unknown;
}

export interface JobServiceOptions {
  db: Db;
  chain: Chain;
  pool: WorkerPool;
  catalog: Catalog;
  logger: Logger;
  timeoutMs?: number;
  firstTokenTimeoutMs?: number;
  /** Tokenizers the gateway holds itself, to count relayed output and bound prompts by length. */
  vocabularies?: ModelVocabularies;
}

export class JobService {
  private readonly db: Db;
  private readonly pool: WorkerPool;
  private readonly catalog: Catalog;
  private readonly logger: Logger;
  private readonly timeoutMs: number;
  private readonly firstTokenTimeoutMs: number;
  private readonly vocabularies: ModelVocabularies | undefined;
  private readonly actions: ChainActions;
  /** Jobs being driven by this process, so shutdown can wait for them. */
  private readonly running = new Set<Promise<void>>();

  constructor(options: JobServiceOptions) {
    this.db = options.db;
    this.pool = options.pool;
    this.catalog = options.catalog;
    this.logger = options.logger;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_JOB_TIMEOUT_MS;
    this.firstTokenTimeoutMs = options.firstTokenTimeoutMs ?? DEFAULT_FIRST_TOKEN_TIMEOUT_MS;
    this.vocabularies = options.vocabularies;
    this.actions = new ChainActions(options.db, options.chain, options.logger);
  }

  /**
   * Admit a chat completion: check the model, count the prompt, lock the price in escrow and hand
   * the job to a worker. Resolves once the job is running; errors before that are ApiErrors that
   * leave nothing charged.
   */
  async start(wallet: string, request: ChatRequest, clientSignal: AbortSignal): Promise<StartedJob> {
    const model = this.catalog.get(request.model);
    if (!model) throw new ApiError("model_not_found", `The model '${request.model}' does not exist.`, "model");
    await this.refuseUnfittable(model, request);
    const picked = this.pool.acquire(model.id);
    if (!picked) {
      throw new ApiError("no_workers_available", `No worker is serving ${model.id} right now. Retry shortly.`, null, {
        model: model.id,
        retry_after: this.pool.retryAfterSeconds(model.id),
      });
    }
    let lease: WorkerLease = picked;
    try {
      const counted = await this.countOnWorkers(model.id, lease, request.messages);
      lease = counted.lease;
      const { promptTokens } = counted;
      const wanted = promptTokens + (request.maxTokens ?? 1);
      lease = this.roomFor(model, lease, wanted);
      const contextWindow = Math.min(model.contextWindow, lease.worker.contextWindow(model.id));
      if (wanted > contextWindow) {
        // The window GET /models shows: the largest a request can get, whichever worker was picked.
        const largest = Math.min(model.contextWindow, Math.max(contextWindow, this.pool.contextWindow(model.id)));
        throw contextLengthExceeded(largest, `${promptTokens}`, request.maxTokens);
      }
      const { job, escrow, creditsAfterLock } = await this.reserve(wallet, model, request, promptTokens, contextWindow);
      // The chain transaction and the hand-over to the worker proceed while the worker starts:
      // the ledger already holds the credits, and the driver awaits both before any settlement.
      const escrowLanded = this.actions.send(escrow);
      Object.assign(job, { status: "processing", workerAddress: lease.worker.address, workerStaked: lease.worker.staked });
      const assigned = this.db.transaction(async (tx) => {
        await updateJob(tx, job.id, { status: "processing", workerAddress: lease.worker.address, workerStaked: lease.worker.staked });
        await emitJobProcessing(tx, jobEventFacts(job));
      });
      // Awaited later by the job's driver; never let an early rejection count as unhandled.
      escrowLanded.catch(() => undefined);
      assigned.catch(() => undefined);

      const channel = new Channel<JobEvent>();
      const started: StartedJob = {
        id: job.id,
        model: model.id,
        created: Math.floor(job.createdAt.getTime() / 1000),
        escrowTx: escrow.signature,
        workerAddress: lease.worker.address,
        creditsAfterLock,
        creditsRemaining: creditsAfterLock,
        events: channel,
      };
      const ready = Promise.all([escrowLanded, assigned]).then(([slot]) => slot);
      const drive = this.drive(job, request, lease, ready, channel, clientSignal, started)
        .catch((error: unknown) => {
          this.logger.error({ err: error, job: job.id }, "job failed unexpectedly");
          channel.close(new ApiError("internal_error", "The job failed inside the service; nothing was charged."));
        })
        .finally(() => this.running.delete(drive));
      this.running.add(drive);
      return started;
    } catch (error) {
      lease.release();
      throw error;
    }
  }

  /**
   * The prompt's tokens, counted by the leased worker, or by another one hosting the model when
   * that one leaves or stalls while counting: a worker's fault is not the caller's. A worker that
   * answers it cannot count this prompt speaks for the request, and no other is asked.
   */
  private async countOnWorkers(model: string, first: WorkerLease, messages: ChatMessage[]): Promise<{ lease: WorkerLease; promptTokens: number }> {
    const tried = new Set<string>();
    let lease = first;
    for (;;) {
      tried.add(lease.worker.address);
      try {
        return { lease, promptTokens: await lease.worker.countPromptTokens(model, messages) };
      } catch (error) {
        if (error instanceof JobRequestError) throw new ApiError("internal_error", `The worker serving ${model} could not count the prompt; nothing was charged.`);
        lease.outcome(error instanceof ApiError ? "stalled" : "failed");
        lease.release();
        const next = this.pool.acquire(model, tried);
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
  private roomFor(model: CatalogModel, lease: WorkerLease, wanted: number): WorkerLease {
    if (wanted <= lease.worker.contextWindow(model.id)) return lease;
    const roomier = this.pool.acquire(model.id, new Set([lease.worker.address]), wanted);
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
    const maxTokenBytes = (await this.vocabularies?.get(model.id))?.maxTokenBytes ?? DEFAULT_MAX_TOKEN_BYTES;
    const atLeast = promptTokensAtLeast(request.messages, maxTokenBytes);
    if (atLeast + (request.maxTokens ?? 1) > model.contextWindow) throw contextLengthExceeded(model.contextWindow, `at least ${atLeast}`, request.maxTokens);
  }

  /** Reserve the escrow in the ledger and record the job and its escrow transaction, atomically. */
  private async reserve(wallet: string, model: CatalogModel, request: ChatRequest, promptTokens: number, contextWindow: number) {
    const rates = TIERS[model.tier];
    // Without max_tokens the lock depends on the balance read, which a concurrent request can
    // change; the ledger's check is the authority, so re-plan a couple of times before giving up.
    for (let attempt = 0; ; attempt++) {
      const available = await money.availableCredits(this.db, wallet);
      const plan = planEscrow({ rates, availableCredits: available, maxTokens: request.maxTokens, promptTokens, contextWindow });
      if (!plan.ok) throw insufficientCredits(available, plan.creditsRequired, model.tier);
      const id = newId("job");
      const escrow = await this.actions.prepareEscrow({ jobId: id, tier: model.tier, wallet, credits: plan.lockCredits });
      const job = newPendingJob({
        id,
        wallet,
        model: model.id,
        tier: model.tier,
        lockedCredits: plan.lockCredits,
        maxTokens: plan.maxTokens,
        promptTokens,
        escrowAddress: escrow.escrowAddress,
        escrowTx: escrow.signature,
      });
      try {
        const creditsAfterLock = await this.db.transaction(async (tx) => {
          await money.reserve(tx, wallet, id, plan.lockCredits);
          await insertJob(tx, job);
          await this.actions.record(tx, escrow);
          const remaining = await money.availableCredits(tx, wallet);
          await emitJobSubmitted(tx, { ...jobEventFacts(job), creditsRemaining: remaining });
          await money.checkCreditLow(tx, wallet, remaining, true);
          return remaining;
        });
        return { job, escrow, creditsAfterLock };
      } catch (error) {
        if (!(error instanceof ExceedsCreditsError)) throw error;
        const remaining = money.toCredits(error.available);
        if (request.maxTokens !== undefined || attempt >= 2) {
          throw insufficientCredits(remaining, request.maxTokens !== undefined ? plan.lockCredits : rates.creditsPerRequest, model.tier);
        }
      }
    }
  }

  /**
   * Run the job on its worker and carry it to a final state, reporting to the channel. A worker
   * that fails before its first token is replaced by another one hosting the model, unnoticed by
   * the caller; after the first token a failure fails the job. A caller who leaves stops the
   * generation, and the output produced up to then is settled (DECISIONS "Pricing and escrow").
   */
  private async drive(
    job: JobRecord,
    request: ChatRequest,
    firstLease: WorkerLease,
    escrowLanded: Promise<number>,
    channel: Channel<JobEvent>,
    clientSignal: AbortSignal,
    started: StartedJob,
  ): Promise<void> {
    const work = new AbortController();
    // The caller leaving asks the worker for a proof of its partial output; a timeout abandons the job.
    const onClientGone = () => work.abort(CALLER_LEFT);
    clientSignal.addEventListener("abort", onClientGone, { once: true });
    // A caller who left while the job was being admitted gets no event: it fired already.
    if (clientSignal.aborted) onClientGone();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      work.abort();
    }, Math.max(0, job.createdAt.getTime() + this.timeoutMs - Date.now()));
    let run: WorkerRun;
    try {
      run = await this.runOnWorkers(job, request, firstLease, escrowLanded, channel, work.signal, () => timedOut, started);
    } finally {
      clearTimeout(timer);
      clientSignal.removeEventListener("abort", onClientGone);
    }
    await this.conclude(job, run, escrowLanded, channel, started, { timedOut, callerLeft: clientSignal.aborted, stop: request.stop });
  }

  /** Generate on the job's worker, moving to another one while none has produced anything. */
  private async runOnWorkers(
    job: JobRecord,
    request: ChatRequest,
    firstLease: WorkerLease,
    escrowLanded: Promise<number>,
    channel: Channel<JobEvent>,
    signal: AbortSignal,
    timedOut: () => boolean,
    started: StartedJob,
  ): Promise<WorkerRun> {
    const generation = {
      messages: request.messages,
      maxTokens: job.maxTokens,
      temperature: request.temperature,
      topP: request.topP,
      stop: request.stop,
      frequencyPenalty: request.frequencyPenalty,
      presencePenalty: request.presencePenalty,
      ...(request.seed !== undefined ? { seed: request.seed } : {}),
    };
    const begun = performance.now();
    const tried = new Set<string>();
    const run: WorkerRun = { lease: firstLease, text: "", done: undefined, workerError: undefined };
    for (;;) {
      const { lease } = run;
      tried.add(lease.worker.address);
      run.workerError = undefined;
      const watch = this.watchFirstToken(signal);
      try {
        for await (const event of lease.worker.run({ jobId: job.id, model: job.model, request: generation }, watch.signal)) {
          if (timedOut()) break;
          if (event.type === "delta") {
            if (run.text === "") lease.firstToken(Math.round(performance.now() - begun));
            watch.tokenArrived();
            run.text += event.text;
            channel.push(event);
          } else {
            run.done = event;
          }
        }
      } catch (error) {
        run.workerError = error;
      } finally {
        watch.dispose();
        lease.release();
      }
      const fault = attemptFault({ done: run.done !== undefined, stalled: watch.stalled || timedOut(), workerError: run.workerError, callerLeft: signal.reason === CALLER_LEFT });
      if (fault !== undefined) lease.outcome(fault);
      // A request no worker can run fails here rather than on every worker in turn.
      if (run.done !== undefined || run.text !== "" || signal.aborted || run.workerError instanceof JobRequestError) return run;
      const next = this.pool.acquire(job.model, tried);
      if (next === undefined) return run;
      this.logger.warn({ err: run.workerError, job: job.id, from: lease.worker.address, to: next.worker.address }, "worker failed before its first token; job moved");
      run.lease = next;
      await this.reassign(job, next, escrowLanded);
      started.workerAddress = next.worker.address;
    }
  }

  /** Settle what the worker produced, or give the escrow back when it produced nothing to charge. */
  private async conclude(
    job: JobRecord,
    run: WorkerRun,
    escrowLanded: Promise<number>,
    channel: Channel<JobEvent>,
    started: StartedJob,
    how: { timedOut: boolean; callerLeft: boolean; stop: readonly string[] },
  ): Promise<void> {
    const { done, text } = run;
    const { stop } = how;
    // A worker that finished just as the timer fired has finished: the rule is about finishing.
    if (how.timedOut && done === undefined) {
      const refund = await this.returnEscrow(job, escrowLanded, "refunded", "timeout");
      const seconds = Math.round(this.timeoutMs / 1000);
      const details = { job_id: job.id, credits_refunded: job.lockedCredits, refund_tx: refund.refundTx };
      return this.fail(job, channel, started, new ApiError("job_timeout", `No worker finished the job within ${seconds} seconds; its credits were returned.`, null, details));
    }
    // Stopped before any output: nothing to charge, whatever the worker counted.
    if (done === undefined || (done.finishReason === "cancelled" && text === "")) {
      if (run.workerError !== undefined) this.logger.warn({ err: run.workerError, job: job.id }, "worker failed");
      await this.returnEscrow(job, escrowLanded, "failed", how.callerLeft ? "client_disconnected" : "worker_error");
      return this.fail(job, channel, started, new ApiError("internal_error", "The worker stopped before finishing the job; nothing was charged. Retrying usually succeeds."));
    }
    const metered = await this.meterCompletion(job, stop, text, done);
    // A cancelled job's caller is gone: there is nobody to tell how it finished.
    if (done.finishReason !== "cancelled") channel.push({ type: "finished", finishReason: done.finishReason, usage: metered.usage });
    const settled = await this.settle(job, text, { ...done, usage: metered.usage }, escrowLanded);
    run.lease.outcome(settled.ok || settled.reason !== "rejected" ? metered.outcome : "failed");
    if (settled.ok) {
      started.creditsRemaining = settled.creditsRemaining;
      channel.push({ type: "settled", settlementTx: settled.settlementTx, slot: settled.slot, creditsRemaining: settled.creditsRemaining });
      run.lease.worker.settled?.(job.id, splitPayout(job.creditsCharged, job.workerStaked).worker, settled.settlementTx);
    } else if (settled.reason === "rejected") {
      return this.fail(job, channel, started, new ApiError("internal_error", "The worker's proof of this output failed on-chain verification; nothing was charged."));
    } else {
      channel.close(new ApiError("internal_error", "The settlement could not be confirmed yet; the service completes it on its own. Check the job with GET /jobs/{id}."));
    }
    channel.close();
  }

  /** End a job that charged nothing: the caller learns why, and its balance now that the escrow is back. */
  private async fail(job: JobRecord, channel: Channel<JobEvent>, started: StartedJob, error: ApiError): Promise<void> {
    started.creditsRemaining = await money.availableCredits(this.db, job.wallet);
    channel.close(error);
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
   * worker's figure is taken only when lower. A worker that claims more than that is recorded.
   */
  private async meterCompletion(
    job: JobRecord,
    stop: readonly string[],
    text: string,
    done: { finishReason: StopReason; usage: Usage },
  ): Promise<{ usage: Usage; outcome: JobOutcome }> {
    const claimed = done.usage.completionTokens;
    const atMost = Math.min(job.maxTokens, completionTokensAtMost({ text, stop, finishReason: done.finishReason }));
    const vocabulary = await this.vocabularies?.get(job.model);
    let counted = atMost;
    if (vocabulary) {
      const withheld = done.finishReason === "stop" ? Math.max(0, ...stop.map((s) => vocabulary.countTokens(s))) : 0;
      counted = Math.min(atMost, vocabulary.countTokens(text) + withheld + SILENT_TOKENS);
    }
    if (claimed <= counted) return { usage: done.usage, outcome: "served" };
    this.logger.warn({ job: job.id, worker: job.workerAddress, claimed, counted }, "worker claimed more completion tokens than its output holds; charged the gateway's count");
    return { usage: { promptTokens: done.usage.promptTokens, completionTokens: counted }, outcome: "overstated" };
  }

  /** Hand the job to another worker (after the first one failed before producing anything). */
  private async reassign(job: JobRecord, lease: WorkerLease, escrowLanded: Promise<number>): Promise<void> {
    // The first assignment's write must land first, or it could overwrite this one.
    await escrowLanded.catch(() => undefined);
    Object.assign(job, { workerAddress: lease.worker.address, workerStaked: lease.worker.staked });
    await updateJob(this.db, job.id, { workerAddress: lease.worker.address, workerStaked: lease.worker.staked });
  }

  /**
   * Charge the job: record the worker's proof and the settlement transaction, send it (its first
   * instruction verifies the proof on-chain), and on confirmation post the charge in the ledger.
   * When the chain rejects the proof the escrow is returned; when the chain cannot be reached the
   * job stays `settling` with its settlement recorded, for recovery to finish.
   */
  private async settle(
    job: JobRecord,
    text: string,
    done: { finishReason: StopReason; usage: Usage; signature: Uint8Array },
    escrowLanded: Promise<number>,
  ): Promise<{ ok: true; settlementTx: string; slot: number; creditsRemaining: number } | { ok: false; reason: "rejected" | "unconfirmed" }> {
    if ((await escrowLanded.then(() => true, () => false)) === false) {
      await this.returnEscrow(job, escrowLanded, "failed", "escrow_failed");
      return { ok: false, reason: "rejected" };
    }
    // The gateway hashes what it actually received; a worker that signed anything else fails on-chain.
    const proofHash = outputHash(text);
    const charged = Math.min(job.lockedCredits, completionCost(TIERS[job.tier], done.usage.completionTokens));
    Object.assign(job, {
      status: "settling",
      proofHash,
      proofSignature: Buffer.from(done.signature).toString("base64"),
      creditsCharged: charged,
      promptTokens: done.usage.promptTokens,
      completionTokens: done.usage.completionTokens,
      finishReason: done.finishReason,
      lastTokenAt: new Date(),
    } satisfies Partial<JobRecord>);
    const settlement = await this.actions.prepareSettlement(job);
    await this.db.transaction(async (tx) => {
      await updateJob(tx, job.id, {
        status: "settling",
        proofHash,
        proofSignature: job.proofSignature,
        creditsCharged: charged,
        promptTokens: job.promptTokens,
        completionTokens: job.completionTokens,
        finishReason: job.finishReason,
        lastTokenAt: job.lastTokenAt,
        settlementTx: settlement.signature,
      });
      await this.actions.record(tx, settlement);
    });
    try {
      const slot = await this.actions.send(settlement);
      return { ok: true, settlementTx: settlement.signature, slot, creditsRemaining: await money.availableCredits(this.db, job.wallet) };
    } catch (error) {
      if (!(error instanceof ChainRejectedError)) {
        // Not refused, just not confirmed: a refund now could race a settlement that still lands.
        this.logger.error({ err: error, job: job.id }, "settlement not confirmed; left for recovery");
        return { ok: false, reason: "unconfirmed" };
      }
      this.logger.warn({ err: error, job: job.id }, "settlement rejected on-chain");
      await this.returnEscrow(job, escrowLanded, "failed", "proof_rejected");
      return { ok: false, reason: "rejected" };
    }
  }

  /** Send the escrow back to the wallet (refund transaction) and release the reservation. */
  private async returnEscrow(
    job: JobRecord,
    escrowLanded: Promise<number>,
    status: "failed" | "refunded",
    reason: string,
  ): Promise<{ refundTx: string | null }> {
    const landed = await escrowLanded.then(() => true, () => false);
    if (!landed) {
      // Nothing moved on-chain; the escrow action's failure handler released the reservation.
      await updateJob(this.db, job.id, { status: "failed", failureReason: reason, completedAt: new Date() });
      return { refundTx: null };
    }
    const refund = await this.actions.prepareRefund(job);
    await this.db.transaction(async (tx) => {
      await updateJob(tx, job.id, { status, failureReason: reason, refundTx: refund.signature, creditsCharged: 0 });
      await this.actions.record(tx, refund);
    });
    await this.actions.send(refund);
    return { refundTx: refund.signature };
  }

  async getJob(wallet: string, id: string): Promise<JobRecord | undefined> {
    const job = await getJob(this.db, id);
    return job && job.wallet === wallet ? job : undefined;
  }

  /**
   * Finish what a crash left: chain transactions recorded but unconfirmed are confirmed or sent
   * again, and jobs that were mid-generation get their escrow back.
   */
  async recover(): Promise<{ resumedActions: number; returnedJobs: number }> {
    const resumedActions = await this.actions.resumeOpen();
    let returnedJobs = 0;
    for (const job of await this.actions.jobsAwaitingReturn()) {
      const escrowLanded = job.slot !== null ? Promise.resolve(job.slot) : Promise.reject(new Error("escrow not on chain"));
      escrowLanded.catch(() => undefined);
      await this.returnEscrow(job, escrowLanded, "failed", "interrupted");
      returnedJobs++;
    }
    return { resumedActions, returnedJobs };
  }

  /** Jobs this process is driving that have not reached a final state yet. */
  get runningJobs(): number {
    return this.running.size;
  }

  /** Wait for the jobs this process is driving to reach a final state. */
  async drain(): Promise<void> {
    await Promise.allSettled([...this.running]);
  }
}

export type { PreparedAction };

/**
 * What an attempt that ended without a proof says about its worker: nothing when the caller left
 * or the request itself was at fault; otherwise it stalled or failed. A finished one is judged at
 * settlement.
 */
function attemptFault(attempt: { done: boolean; stalled: boolean; workerError: unknown; callerLeft: boolean }): JobOutcome | undefined {
  if (attempt.done || attempt.callerLeft || attempt.workerError instanceof JobRequestError) return undefined;
  if (attempt.stalled) return "stalled";
  return "failed";
}

function contextLengthExceeded(contextWindow: number, promptTokens: string, maxTokens: number | undefined): ApiError {
  return new ApiError(
    "context_length_exceeded",
    `This model's context window is ${contextWindow} tokens; the messages take ${promptTokens}` +
      (maxTokens !== undefined ? ` and max_tokens asks for ${maxTokens} more.` : "."),
    "messages",
  );
}
