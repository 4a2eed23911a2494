/**
 * One structured log line per answered request, through the service's logger: its id, status and
 * time, and for a completion the model, job, tokens and the credits left afterwards.
 */
import { performance } from "node:perf_hooks";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Logger } from "../core/index.ts";

/** What the completions route learns as a job runs, for its log line. */
export interface CompletionLog {
  model: string;
  jobId?: string;
  promptTokens?: number;
  completionTokens?: number;
  creditsRemaining?: number;
}

declare module "fastify" {
  interface FastifyRequest {
    /** Set by POST /chat/completions; the request log line reports it. */
    completion: CompletionLog | undefined;
  }
}

/**
 * Logged when the response closes rather than from Fastify's onResponse hook, which a streamed
 * (hijacked) reply never reaches, and which also misses a client that hung up.
 */
export function logWhenClosed(logger: Logger, request: FastifyRequest, reply: FastifyReply): void {
  const startedAt = performance.now();
  reply.raw.once("close", () => {
    const res = reply.raw;
    const completion = request.completion;
    const credits = completion?.creditsRemaining ?? res.getHeader("x-svc-credits-remaining");
    logger.info(
      {
        request_id: request.id,
        method: request.method,
        path: request.url.split("?")[0]!.slice(0, 200),
        status: res.statusCode,
        ms: Math.round(performance.now() - startedAt),
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
  });
}
