/**
 * A chat completion under an `Idempotency-Key`: the job's events noted as the answer reads them,
 * stored once it is answered, and answered again to a retry: a JSON request gets the same body
 * and x-svc-* headers, a stream its recorded text as SSE in the same chunk format.
 */
import type { FastifyReply } from "fastify";
import { ApiError, awaitedLater } from "../core/index.ts";
import type { ChatRequest, JobEvent, StartedJob } from "../jobs/index.ts";
import type { FinishReason, Usage } from "../inference/index.ts";
import { completionBody, deltaChunk, finishChunk, sseData, usageChunk, type ChunkContext } from "./completion-body.ts";
import { apiErrorOf, type HeldKey, REPLAYED_HEADER, replayJson, type StoredError, storedError, type StoredOutcome } from "./idempotency.ts";

/** What a keyed job's events said, as its answer read them. */
export class CompletionTape {
  private content = "";
  private finish: { finishReason: FinishReason; usage: Usage } | undefined;
  private creditsRemaining: number | undefined;
  private settlementTx: string | null = null;
  private error: StoredError | undefined;
  /** Any event read: a stream has begun (its 200 is out). */
  private begun = false;

  constructor(
    private readonly held: HeldKey,
    private readonly job: StartedJob,
    private readonly chat: ChatRequest,
  ) {}

  /**
   * Stores the job's outcome once `answering` settles, whatever it settles to, and answers as it
   * did. The job's id is linked to the key beside the answer, and before the outcome is stored,
   * so a retry that finds the request running names the job. A key that cannot be stored fails
   * the request: its caller must not take a retry for safe when it is not.
   */
  async answered<T>(answering: Promise<T>): Promise<T> {
    const linked = awaitedLater(this.held.linkJob(this.job.id));
    let failure: unknown;
    try {
      return await answering;
    } catch (error) {
      failure = error;
      throw error;
    } finally {
      await linked;
      await this.held.record(this.outcome(failure));
    }
  }

  /** The job's events as the answer reads them, each noted on the way. */
  watch(events: AsyncIterator<JobEvent>): AsyncIterator<JobEvent> {
    return {
      next: async () => {
        try {
          const next = await events.next();
          if (!next.done) this.note(next.value);
          return next;
        } catch (error) {
          this.error = storedError(error);
          throw error;
        }
      },
    };
  }

  private note(event: JobEvent): void {
    this.begun = true;
    if (event.type === "delta") this.content += event.text;
    else if (event.type === "finished") this.finish = { finishReason: event.finishReason, usage: event.usage };
    else {
      this.creditsRemaining = event.creditsRemaining;
      this.settlementTx = event.settlementTx;
    }
  }

  private headers(creditsRemaining: number): Record<string, string> {
    const { job } = this;
    const headers: Record<string, string> = {
      "x-svc-job-id": job.id,
      "x-svc-escrow-tx": job.escrowTx,
      "x-svc-worker": job.workerAddress,
      "x-svc-credits-remaining": String(creditsRemaining),
    };
    if (this.settlementTx !== null) headers["x-svc-settlement-tx"] = this.settlementTx;
    return headers;
  }

  /**
   * The outcome to store once the answer is done, `failure` being what the answer threw. A job
   * that produced its whole output stores its answer even if a later step failed: the job's
   * outcome is that output. A stream that had begun stores its text and how it ended.
   */
  private outcome(failure: unknown): StoredOutcome {
    const { job, chat, finish } = this;
    const error = this.error ?? (failure === undefined ? undefined : storedError(failure));
    if (!chat.stream && finish) {
      const body = completionBody({ jobId: job.id, created: job.created, model: job.model, content: this.content, ...finish });
      return { kind: "response", headers: this.headers(this.creditsRemaining ?? job.creditsRemaining), body };
    }
    if (chat.stream && this.begun) {
      const { id: jobId, created, model } = job;
      return { kind: "stream", headers: this.headers(job.creditsAfterLock), jobId, created, model, includeUsage: chat.includeUsage, content: this.content, finish: finish ?? null, error: finish ? null : (error ?? null) };
    }
    const headers = this.headers(job.creditsRemaining);
    return { kind: "error", headers, error: error ?? storedError(new ApiError("internal_error", "The job ended without a result; nothing was charged.")) };
  }
}

/** A signal that never fires: a keyed job is not tied to its caller's connection. */
const RUNS_TO_ITS_END = new AbortController().signal;

/**
 * Starts a keyed request's job: it runs to its end if its caller leaves (a retry is answered from
 * it), and a start that fails before any job exists (400, 402, 503) lets the key go, so that a
 * retry, after a top-up say, runs anew.
 */
export async function startUnderKey(held: HeldKey, start: (signal: AbortSignal) => Promise<StartedJob>): Promise<StartedJob> {
  try {
    return await start(RUNS_TO_ITS_END);
  } catch (error) {
    await held.release();
    throw error;
  }
}

/** A stored stream answered again: one chunk with the whole text, its end, `[DONE]` (or its error event). */
function replayStream(reply: FastifyReply, outcome: Extract<StoredOutcome, { kind: "stream" }>, appUrl: string): void {
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, { ...outcome.headers, [REPLAYED_HEADER]: "true", "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" });
  const ctx: ChunkContext = { jobId: outcome.jobId, created: outcome.created, model: outcome.model, includeUsage: outcome.includeUsage };
  res.write(sseData(deltaChunk(ctx, outcome.content, true)));
  if (outcome.finish) {
    res.write(sseData(finishChunk(ctx, outcome.finish.finishReason as FinishReason)));
    if (outcome.includeUsage) res.write(sseData(usageChunk(ctx, outcome.finish.usage)));
    res.write(sseData("[DONE]"));
  } else if (outcome.error) {
    res.write(sseData(apiErrorOf(outcome.error).toBody(appUrl)));
  }
  res.end();
}

/** Answers a completion's stored outcome again, marked `Idempotent-Replayed: true`. */
export function replayCompletion(reply: FastifyReply, outcome: StoredOutcome, appUrl: string): unknown {
  if (outcome.kind !== "stream") return replayJson(reply, outcome);
  replayStream(reply, outcome, appUrl);
  return undefined;
}
