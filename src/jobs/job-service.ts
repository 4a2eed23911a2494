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
import { splitPayout } from "../core/units.ts";
import type { ChatRequest } from "../http/chat-request.ts";
import type { FinishReason, Usage } from "../inference/engine.ts";
import { emitJobProcessing, emitJobSubmitted } from "../events/emit.ts";
import { ExceedsCreditsError } from "../ledger/index.ts";
import type { WorkerEvent } from "../network/worker-handle.ts";
import type { WorkerLease, WorkerPool } from "../network/worker-pool.ts";
import type { Db } from "../store/db.ts";
import type { Logger } from "../core/logger.ts";
import { ChainActions, ChainRejectedError, type PreparedAction } from "./chain-actions.ts";
import { newPendingJob, type JobRecord } from "./job-record.ts";
import { getJob, insertJob, updateJob } from "./job-repo.ts";
import * as money from "./money.ts";

export const DEFAULT_JOB_TIMEOUT_MS = 120_000;


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
  /** The job's events; the iterator throws an ApiError when the job fails or times out. */
  events: AsyncIterable<JobEvent>;
}

export interface JobServiceOptions {
  db: Db;
  chain: Chain;
  pool: WorkerPool;
  catalog: Catalog;
  logger: Logger;
  timeoutMs?: number;
}

export class JobService {
  private readonly db: Db;
  private readonly pool: WorkerPool;
  private readonly catalog: Catalog;
  private readonly logger: Logger;
  private readonly timeoutMs: number;
  private readonly actions: ChainActions;
  /** Jobs being driven by this process, so shutdown can wait for them. */
  private readonly running = new Set<Promise<void>>();

  constructor(options: JobServiceOptions) {
    this.db = options.db;
    this.pool = options.pool;
    this.catalog = options.catalog;
    this.logger = options.logger;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_JOB_TIMEOUT_MS;
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
    const lease = this.pool.acquire(model.id);
    if (!lease) {
      throw new ApiError("no_workers_available", `No worker is serving ${model.id} right now. Retry shortly.`, null, {
        model: model.id,
        retry_after: this.pool.retryAfterSeconds(model.id),
      });
    }
    try {
      const promptTokens = await lease.worker.countPromptTokens(model.id, request.messages);
      const contextWindow = Math.min(model.contextWindow, lease.worker.contextWindow(model.id));
      const wanted = promptTokens + (request.maxTokens ?? 1);
      if (wanted > contextWindow) {
        throw new ApiError(
          "context_length_exceeded",
          `This model's context window is ${contextWindow} tokens; the messages take ${promptTokens}` +
            (request.maxTokens !== undefined ? ` and max_tokens asks for ${request.maxTokens} more.` : "."),
          "messages",
        );
      }
      const { job, escrow, creditsAfterLock } = await this.reserve(wallet, model, request, promptTokens, contextWindow);
      // The chain transaction and the hand-over to the worker proceed while the worker starts:
      // the ledger already holds the credits, and the driver awaits both before any settlement.
      const escrowLanded = this.actions.send(escrow);
      Object.assign(job, { status: "processing", workerAddress: lease.worker.address, workerStaked: lease.worker.staked });
      const assigned = this.db.transaction(async (tx) => {
        await updateJob(tx, job.id, { status: "processing", workerAddress: lease.worker.address, workerStaked: lease.worker.staked });
        await emitJobProcessing(tx, job);
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
          await emitJobSubmitted(tx, job, remaining);
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
   * the caller; after the first token a failure fails the job.
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
    const onClientGone = () => work.abort();
    clientSignal.addEventListener("abort", onClientGone, { once: true });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      work.abort();
    }, Math.max(0, job.createdAt.getTime() + this.timeoutMs - Date.now()));

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
    let lease = firstLease;
    let text = "";
    let done: Extract<WorkerEvent, { type: "done" }> | undefined;
    let workerError: unknown;
    try {
      for (;;) {
        tried.add(lease.worker.address);
        workerError = undefined;
        try {
          for await (const event of lease.worker.run({ jobId: job.id, model: job.model, request: generation }, work.signal)) {
            if (timedOut) break;
            if (event.type === "delta") {
              if (text === "") lease.firstToken(Math.round(performance.now() - begun));
              text += event.text;
              channel.push(event);
            } else {
              done = event;
            }
          }
        } catch (error) {
          workerError = error;
        } finally {
          lease.release();
        }
        if (done !== undefined || text !== "" || work.signal.aborted) break;
        const next = this.pool.acquire(job.model, tried);
        if (next === undefined) break;
        this.logger.warn({ err: workerError, job: job.id, from: lease.worker.address, to: next.worker.address }, "worker failed before its first token; job moved");
        lease = next;
        await this.reassign(job, lease, escrowLanded);
        started.workerAddress = lease.worker.address;
      }
    } finally {
      clearTimeout(timer);
      clientSignal.removeEventListener("abort", onClientGone);
    }

    // A worker that finished just as the timer fired has finished: the rule is about finishing.
    if (timedOut && done === undefined) {
      const refund = await this.returnEscrow(job, escrowLanded, "refunded", "timeout");
      channel.close(
        new ApiError("job_timeout", `No worker finished the job within ${Math.round(this.timeoutMs / 1000)} seconds; its credits were returned.`, null, {
          job_id: job.id,
          credits_refunded: job.lockedCredits,
          refund_tx: refund.refundTx,
        }),
      );
      return;
    }
    if (done === undefined) {
      const reason = clientSignal.aborted ? "client_disconnected" : "worker_error";
      if (workerError !== undefined) this.logger.warn({ err: workerError, job: job.id }, "worker failed");
      await this.returnEscrow(job, escrowLanded, "failed", reason);
      channel.close(new ApiError("internal_error", "The worker stopped before finishing the job; nothing was charged. Retrying usually succeeds."));
      return;
    }

    channel.push({ type: "finished", finishReason: done.finishReason, usage: done.usage });
    const settled = await this.settle(job, text, done, escrowLanded);
    if (settled.ok) {
      channel.push({ type: "settled", settlementTx: settled.settlementTx, slot: settled.slot, creditsRemaining: settled.creditsRemaining });
      lease.worker.settled?.(job.id, splitPayout(job.creditsCharged, job.workerStaked).worker, settled.settlementTx);
    } else if (settled.reason === "rejected") {
      channel.close(new ApiError("internal_error", "The worker's proof of this output failed on-chain verification; nothing was charged."));
    } else {
      channel.close(new ApiError("internal_error", "The settlement could not be confirmed yet; the service completes it on its own. Check the job with GET /jobs/{id}."));
    }
    channel.close();
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
    done: { finishReason: FinishReason; usage: Usage; signature: Uint8Array },
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

  /** Wait for the jobs this process is driving to reach a final state. */
  async drain(): Promise<void> {
    await Promise.allSettled([...this.running]);
  }
}

export type { PreparedAction };
