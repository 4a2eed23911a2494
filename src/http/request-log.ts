/**
 * One structured log line per answered request, through the service's logger: its id, status and
 * time, and for a completion the model, job, tokens and the credits left afterwards.
 */
import { performance } from "node:perf_hooks";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Logger } from "../core/index.ts";
import type { WorkerRunTimes } from "../jobs/index.ts";

/** What the completions route learns as a job runs, for its log line. */
export interface CompletionLog {
  model: string;
  stream: boolean;
  jobId?: string;
  promptTokens?: number;
  completionTokens?: number;
  creditsRemaining?: number;
  /**
   * Settles once the route has done all it will for the request. A caller who hangs up closes the
   * response long before its job ends; the line waits for this so it still tells the tokens and
   * the charge, and whatever the route answered.
   */
  handled?: Promise<unknown>;
  /** The job's run on its worker, when the jobs time runs (metrics on): StartedJob.workerRun. */
  workerRun?: WorkerRunTimes;
  /** performance.now() when a stream's first token was written to the caller; set only with `workerRun`. */
  firstSentAt?: number;
}

declare module "fastify" {
  interface FastifyRequest {
    /** Set by POST /chat/completions; the request log line reports it. */
    completion: CompletionLog | undefined;
  }
}

/** An answered request as metrics count it: the route's pattern (never its ids), the method, the status (0: nothing was answered), its time. */
export interface Answered {
  route: string;
  method: string;
  status: number;
  ms: number;
  /** performance.now() at its arrival. */
  arrivedAt: number;
  /** Its response was written to the end (the caller did not leave first). */
  finished: boolean;
  /** A chat completion's model, stream flag and run (POST /chat/completions once its body was read). */
  completion: CompletionLog | undefined;
}

/**
 * Logged when the response closes rather than from Fastify's onResponse hook, which a streamed
 * (hijacked) reply never reaches, and which also misses a client that hung up. `answered` hears
 * the same moment (the metrics' request counts and times).
 */
export function logWhenClosed(logger: Logger, request: FastifyRequest, reply: FastifyReply, answered?: (a: Answered) => void): void {
  const startedAt = performance.now();
  reply.raw.once("close", () => {
    const ms = performance.now() - startedAt;
    const done = () => {
      logLine(logger, request, reply, Math.round(ms));
      const res = reply.raw;
      answered?.({ route: request.routeOptions.url ?? "unmatched", method: request.method, status: res.headersSent ? res.statusCode : 0, ms, arrivedAt: startedAt, finished: res.writableFinished, completion: request.completion });
    };
    const handled = request.completion?.handled;
    if (handled === undefined || reply.raw.writableFinished) return done();
    // A turn later: a route that failed is answered by the error handler after its promise settles.
    const later = () => setImmediate(done);
    handled.then(later, later);
  });
}

function logLine(logger: Logger, request: FastifyRequest, reply: FastifyReply, ms: number): void {
  const res = reply.raw;
  const completion = request.completion;
  const credits = completion?.creditsRemaining ?? res.getHeader("x-svc-credits-remaining");
  logger.info(
    {
      request_id: request.id,
      method: request.method,
      path: request.url.split("?")[0]!.slice(0, 200),
      // Nothing at all was answered to a caller who left before the reply began.
      status: res.headersSent ? res.statusCode : null,
      ms,
      ...(completion && {
        model: completion.model,
        job_id: completion.jobId ?? null,
        prompt_tokens: completion.promptTokens ?? null,
        completion_tokens: completion.completionTokens ?? null,
        credits_remaining: credits === undefined ? null : Number(credits),
      }),
      ...(!res.writableFinished && { client_gone: true }),
    },
    completion ? "completion" : "request",
  );
}
