/**
 * A worker on the other end of a protocol connection, as the pool and the job service see it.
 * The gateway feeds it the worker's messages; it turns them back into the WorkerHandle calls.
 *
 * When the connection dies, every job in flight on it throws and every pending token count (or
 * settlement signature) rejects: the job service then fails the job and charges nothing. A job
 * whose caller left is cancelled on the worker, which answers with the proof of the output it sent
 * up to the stop.
 */
import { ApiError, Channel } from "../core/index.ts";
import type { ChatMessage } from "../inference/index.ts";
import type { GatewayMessage, ModelOffer, WorkerMessage } from "./protocol.ts";
import { CALLER_LEFT, JobRequestError, SettlementRefusedError, type SettlementRequest, type WorkerEvent, type WorkerHandle, type WorkerJob } from "./worker-handle.ts";

/** How long a worker has to count a prompt, or to sign a settlement. */
export const DEFAULT_COUNT_TIMEOUT_MS = 10_000;
/** How long a worker has to answer a cancel with the proof of its partial output. */
export const DEFAULT_CANCEL_GRACE_MS = 3_000;

/** The worker failed a job, or went away while running it. */
export class RemoteWorkerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RemoteWorkerError";
  }
}

/** A count or a settlement signature asked of the worker, until it answers. */
interface PendingRequest {
  resolve(answer: number | Uint8Array): void;
  reject(error: Error): void;
  /** The error for the worker's refusal (a count_error answers any request the worker could not read). */
  refused(message: string): Error;
  timer: NodeJS.Timeout;
}

type Answer = Extract<WorkerMessage, { type: "count_result" | "count_error" | "settlement_signature" | "settlement_error" }>;

export class RemoteWorkerHandle implements WorkerHandle {
  private readonly windows: ReadonlyMap<string, number>;
  private readonly jobs = new Map<string, Channel<WorkerEvent>>();
  private readonly requests = new Map<number, PendingRequest>();
  private nextRequestId = 1;
  private lostWith: string | undefined;

  constructor(
    readonly address: string,
    models: readonly ModelOffer[],
    readonly concurrency: number,
    private readonly send: (message: GatewayMessage) => void,
    private readonly countTimeoutMs = DEFAULT_COUNT_TIMEOUT_MS,
    /** Whether the worker's stake on the chain earns it the staked payout share (read at registration). */
    readonly staked = false,
    private readonly cancelGraceMs = DEFAULT_CANCEL_GRACE_MS,
  ) {
    this.windows = new Map(models.map((m) => [m.id, m.contextWindow]));
  }

  models(): string[] {
    return [...this.windows.keys()];
  }

  contextWindow(model: string): number {
    const window = this.windows.get(model);
    if (window === undefined) throw new RemoteWorkerError(`worker ${this.address} does not serve ${model}`);
    return window;
  }

  /** Jobs running on the worker now. */
  get running(): number {
    return this.jobs.size;
  }

  countPromptTokens(model: string, messages: ChatMessage[]): Promise<number> {
    const late = () => new ApiError("internal_error", `The worker serving ${model} did not count the prompt in time; nothing was charged. Retrying usually succeeds.`);
    // The worker is there and answered: the prompt, not the worker, is what it could not count.
    const refused = (text: string) => new JobRequestError(`worker ${this.address} could not count the prompt: ${text}`);
    return this.ask<number>((requestId) => ({ type: "count", requestId, model, messages }), { late, refused });
  }

  signSettlement(request: SettlementRequest): Promise<Uint8Array> {
    const jobs = request.jobs.map((job) => ({ ...job, charge: job.charge.toString() }));
    const late = () => new RemoteWorkerError(`worker ${this.address} did not sign the settlement in time`);
    const refused = (text: string) => new SettlementRefusedError(`worker ${this.address} refused to sign the settlement: ${text}`);
    return this.ask<Uint8Array>((requestId) => ({ type: "sign_settlement", requestId, table: request.table, jobs }), { late, refused });
  }

  /** Sends a request the worker answers by its id, failing with `late()` when it does not in time. */
  private ask<T extends number | Uint8Array>(message: (requestId: number) => GatewayMessage, errors: { late(): Error; refused(text: string): Error }): Promise<T> {
    if (this.lostWith !== undefined) return Promise.reject(this.unavailable());
    const requestId = this.nextRequestId++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.requests.delete(requestId);
        reject(errors.late());
      }, this.countTimeoutMs);
      this.requests.set(requestId, { resolve: resolve as (answer: number | Uint8Array) => void, reject, refused: errors.refused, timer });
      this.send(message(requestId));
    });
  }

  async *run(job: WorkerJob, signal: AbortSignal): AsyncIterable<WorkerEvent> {
    if (this.lostWith !== undefined) throw this.unavailable();
    if (signal.aborted) return;
    const events = new Channel<WorkerEvent>();
    this.jobs.set(job.jobId, events);
    let graceTimer: NodeJS.Timeout | undefined;
    const onAbort = () => {
      if (signal.reason !== CALLER_LEFT) {
        this.cancel(job.jobId, "the gateway no longer needs this job (it timed out or moved)");
        return;
      }
      // The worker answers with the proof of what it sent so far; a worker that does not answer
      // in time gets nothing for it.
      this.send({ type: "cancel", jobId: job.jobId, reason: "the gateway no longer needs this job (its client left): answer with the proof of the output so far" });
      graceTimer = setTimeout(() => this.cancel(job.jobId), this.cancelGraceMs);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    let finished = false;
    try {
      this.send({ type: "job", jobId: job.jobId, model: job.model, request: job.request, ...(job.stream === false ? { stream: false } : {}) });
      for await (const event of events) {
        if (event.type === "done") finished = true;
        yield event;
      }
    } finally {
      clearTimeout(graceTimer);
      signal.removeEventListener("abort", onAbort);
      // The consumer stopped early (or the worker failed): the worker must not keep generating.
      if (!finished) this.cancel(job.jobId, "the gateway stopped reading this job");
    }
  }

  settled(jobId: string, earnedBaseUnits: bigint, settlementTx: string): void {
    if (this.lostWith !== undefined) return;
    this.send({ type: "settled", jobId, earnedBaseUnits: earnedBaseUnits.toString(), settlementTx });
  }

  /** A job or count message from the worker (the gateway handles the rest). */
  receive(message: Extract<WorkerMessage, { type: "delta" | "done" | "job_error" } | Answer>): void {
    switch (message.type) {
      case "delta":
        // A job cancelled a moment ago may still have deltas on the wire; they are dropped.
        this.jobs.get(message.jobId)?.push({ type: "delta", text: message.text });
        return;
      case "done": {
        const events = this.jobs.get(message.jobId);
        if (!events) return;
        this.jobs.delete(message.jobId);
        // The job service reads output as deltas, whichever message carried it.
        if (message.text) events.push({ type: "delta", text: message.text });
        events.push({
          type: "done",
          finishReason: message.finishReason,
          usage: message.usage,
          outputHash: message.outputHash,
          signature: new Uint8Array(Buffer.from(message.signature, "base64")),
        });
        events.close();
        return;
      }
      case "job_error": {
        const events = this.jobs.get(message.jobId);
        if (!events) return;
        this.jobs.delete(message.jobId);
        const text = `worker ${this.address} failed job ${message.jobId}: ${message.message}`;
        events.close(message.fault === "request" ? new JobRequestError(text) : new RemoteWorkerError(text));
        return;
      }
      default:
        return this.answered(message);
    }
  }

  private answered(message: Answer): void {
    const pending = this.requests.get(message.requestId);
    if (!pending) return;
    this.requests.delete(message.requestId);
    clearTimeout(pending.timer);
    switch (message.type) {
      case "count_result":
        return pending.resolve(message.tokens);
      case "settlement_signature":
        return pending.resolve(new Uint8Array(Buffer.from(message.signature, "base64")));
      default:
        return pending.reject(pending.refused(message.message));
    }
  }

  /** The connection is gone: whatever was in flight on it fails. */
  lost(reason: string): void {
    if (this.lostWith !== undefined) return;
    this.lostWith = reason;
    const error = this.unavailable();
    for (const events of this.jobs.values()) events.close(error);
    this.jobs.clear();
    for (const pending of this.requests.values()) {
      clearTimeout(pending.timer);
      pending.reject(error);
    }
    this.requests.clear();
  }

  /** Stop listening to a job; with a reason, the worker is told to stop it too. */
  private cancel(jobId: string, reason?: string): void {
    const events = this.jobs.get(jobId);
    if (!events) return;
    this.jobs.delete(jobId);
    events.close();
    if (reason !== undefined) this.send({ type: "cancel", jobId, reason });
  }

  private unavailable(): RemoteWorkerError {
    return new RemoteWorkerError(`worker ${this.address} disconnected: ${this.lostWith}`);
  }
}
