/**
 * The playground: POST /app/api/playground/completions starts a chat completion for the signed-in
 * wallet through the same job service as /v1's POST /chat/completions (the same admission,
 * escrow lock, charge and settlement; the caller is the session's wallet, which needs no API key)
 * and always streams it, in the contract's chunks. Tighter than /v1: one conversation of a few
 * short messages, max_tokens capped, one job at a time per wallet and a token bucket per wallet
 * on top of the per-IP limit every request meets. GET /app/api/models lists the served models
 * as /v1/models does.
 */
import type { FastifyInstance } from "fastify";
import { ApiError, RateLimiter, type RateLimitOptions } from "../core/index.ts";
import { type ChatCompletionBody, ERROR_RESPONSES, modelRoutes, type ModelRoutesOptions, parseChatRequest, streamJob } from "../http/index.ts";
import type { ChatRequest, JobCaller, StartedJob } from "../jobs/index.ts";

/** The answer's length: enough to try a model, little enough that a click never costs much. */
export const PLAYGROUND_MAX_TOKENS = 512;
export const PLAYGROUND_MAX_MESSAGES = 8;
export const PLAYGROUND_MAX_CHARS = 4_000;
/** Completions one wallet may start from the app: 5 at once, then 20 a minute. */
export const PLAYGROUND_RATE_LIMIT: RateLimitOptions = { ratePerSecond: 20 / 60, burst: 5 };

export interface PlaygroundOptions {
  /** The job service's start, as /v1's POST /chat/completions calls it. */
  startJob(caller: JobCaller, chat: ChatRequest, signal: AbortSignal): Promise<StartedJob>;
  /** The served models, as /v1/models reads them. */
  models: ModelRoutesOptions;
  /** Error bodies link into `<appUrl>/docs/errors`. */
  appUrl(): string;
}

const message = {
  type: "object",
  required: ["role", "content"],
  additionalProperties: false,
  properties: {
    role: { type: "string", enum: ["system", "user", "assistant"] },
    content: { type: "string", minLength: 1, maxLength: PLAYGROUND_MAX_CHARS, description: `text of at most ${PLAYGROUND_MAX_CHARS} characters` },
  },
};

/** A chat-completions request with only the fields the page sends, each bounded. */
const playgroundBody = {
  type: "object",
  required: ["model", "messages"],
  properties: {
    model: { type: "string", minLength: 1 },
    messages: { type: "array", minItems: 1, maxItems: PLAYGROUND_MAX_MESSAGES, items: message },
    max_tokens: { type: "integer", minimum: 1, maximum: PLAYGROUND_MAX_TOKENS, description: `a whole number from 1 to ${PLAYGROUND_MAX_TOKENS}` },
  },
};

type PlaygroundBody = Pick<ChatCompletionBody, "model" | "messages"> & { max_tokens?: number };

export async function playgroundRoutes(app: FastifyInstance, options: PlaygroundOptions): Promise<void> {
  await app.register(modelRoutes, options.models);
  const limit = PLAYGROUND_RATE_LIMIT;
  const perWallet = new RateLimiter(limit);
  const running = new Set<string>();

  app.post("/playground/completions", { schema: { body: playgroundBody, response: ERROR_RESPONSES } }, async (request, reply) => {
    const body = request.body as PlaygroundBody;
    // Refused rather than dropped: a caller sending stream or tools here should hear they do nothing.
    const other = Object.keys(body).find((field) => !(field in playgroundBody.properties));
    if (other !== undefined) throw new ApiError("invalid_request", `The playground takes model, messages and max_tokens; '${other}' is not one of them.`, other);
    // The page's answers are always streamed; the lock is always for a bounded price.
    const chat = parseChatRequest({ model: body.model, messages: body.messages, max_tokens: body.max_tokens ?? PLAYGROUND_MAX_TOKENS, stream: true, stream_options: { include_usage: true } });
    const wallet = request.appWallet;
    if (running.has(wallet)) throw new ApiError("rate_limited", "The playground runs one completion at a time per wallet; wait for the current answer to finish.", null, { retry_after: 1 });
    const wait = perWallet.take(wallet);
    if (wait > 0) {
      const message = `The playground takes ${limit.burst} completions at once, then ${+(limit.ratePerSecond * 60).toFixed(2)} a minute, per wallet; try again in ${wait} s.`;
      throw new ApiError("rate_limited", message, null, { retry_after: wait });
    }
    running.add(wallet);
    try {
      await streamJob(reply, chat, (signal) => options.startJob({ wallet }, chat, signal), options.appUrl);
    } finally {
      running.delete(wallet);
    }
  });
}
