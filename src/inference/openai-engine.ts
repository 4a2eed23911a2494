/**
 * An engine that forwards to an OpenAI-compatible server the worker operator already runs (vLLM,
 * llama-server, Ollama), streaming chat completions over HTTP. The servers agree on the protocol
 * only roughly; the differences smoothed over here:
 *
 *  - usage: in a separate last chunk with empty `choices` (vLLM, Ollama >= 0.5.2, the gateway), in
 *    the finishing chunk itself (llama-server), or absent (older Ollama);
 *  - finish_reason spellings ("stop", "eos", "length", ...) or none at all;
 *  - error bodies (see openai-errors.ts), and errors inside a stream: vLLM's `data: {"error":..}`
 *    followed by [DONE], llama-server's `error: {...}` field;
 *  - the completion limit's name (max_tokens vs max_completion_tokens);
 *  - where the context window and the tokenizer are found (openai-discovery.ts, openai-tokens.ts);
 *  - a server that ignores `stream: true` and answers with one JSON completion.
 */
import { createHash } from "node:crypto";
import { setMaxListeners } from "node:events";
import { BoundedMap } from "../core/index.ts";
import { ContextLengthExceededError } from "./context-length-error.ts";
import type { ChatMessage, Engine, FinishReason, GenerationEvent, GenerationRequest, Usage } from "./engine.ts";
import { discoverContextWindow, type ContextWindowSource } from "./openai-discovery.ts";
import { contextOverflowOf, UpstreamError, upstreamErrorFromEvent } from "./openai-errors.ts";
import { UpstreamClient, type Exchange, type UpstreamResponse } from "./openai-http.ts";
import { readSse } from "./openai-sse.ts";
import { estimatePromptTokens, probeTokenizer, serverPromptTokens, serverTextTokens, type ServerTokenizer } from "./openai-tokens.ts";
import {
  chatRequestBody,
  contentOf,
  finishMeaning,
  firstChoice,
  otherTokenLimitField,
  usageOf,
  type TokenLimitField,
  type WireUsage,
} from "./openai-wire.ts";

export { UpstreamError } from "./openai-errors.ts";
export type { ContextWindowSource } from "./openai-discovery.ts";
export type { TokenLimitField } from "./openai-wire.ts";

export interface OpenAiEngineOptions {
  /** The OpenAI API root, e.g. http://127.0.0.1:8000/v1. */
  baseUrl: string;
  /** The upstream's own name for the model. */
  model: string;
  apiKey?: string;
  /**
   * Required when the server does not report its context window; when it does, this can only
   * lower it (headroom, or an Ollama running below the model's trained length).
   */
  contextWindow?: number;
  /** Longest silence from the upstream (before its answer starts, or between chunks) before failing. */
  timeoutMs?: number;
}

/** Generous: a long prompt on a loaded server can take a while before its first byte. */
export const DEFAULT_UPSTREAM_TIMEOUT_MS = 120_000;

interface StreamState {
  text: string;
  contentChunks: number;
  usage: WireUsage | null;
  finish: FinishReason | null;
  sawDone: boolean;
}

/** How many distinct prompts' counts an engine keeps. */
const KEPT_COUNTS = 256;

/** `promise`, or a rejection with the signal's reason as soon as `signal` aborts. */
function untilAborted<T>(promise: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A 400 that names the completion-limit field we sent is the server asking for the other name. */
function rejectsLimitField(error: unknown, field: TokenLimitField): boolean {
  if (!(error instanceof UpstreamError) || error.status !== 400 || contextOverflowOf(error)) return false;
  const named = new RegExp(`\\b${field}\\b`);
  return named.test(error.message) || named.test(JSON.stringify(error.body ?? ""));
}

export class OpenAiEngine implements Engine {
  readonly model: string;
  readonly baseUrl: string;
  readonly contextWindow: number;
  /** Where the context window came from: the server's own report, or the operator's option. */
  readonly contextWindowSource: ContextWindowSource | "option";
  /** "estimate" when the server has no tokenizer endpoint: prompt counts are then estimatePromptTokens'. */
  readonly tokenCounting: "server" | "estimate";
  private readonly tokenizer: ServerTokenizer | null;
  private limitField: TokenLimitField = "max_tokens";
  private closed = false;
  /** Recent prompts' counts by a hash of their messages (promptTokens). */
  private readonly counts = new BoundedMap<Promise<number>>(KEPT_COUNTS);

  private constructor(
    private readonly client: UpstreamClient,
    private readonly closing: AbortController,
    model: string,
    contextWindow: number,
    contextWindowSource: ContextWindowSource | "option",
    tokenizer: ServerTokenizer | null,
  ) {
    this.model = model;
    this.baseUrl = client.baseUrl;
    this.contextWindow = contextWindow;
    this.contextWindowSource = contextWindowSource;
    this.tokenizer = tokenizer;
    this.tokenCounting = tokenizer ? "server" : "estimate";
  }

  static async connect(opts: OpenAiEngineOptions): Promise<OpenAiEngine> {
    let base: URL;
    try {
      base = new URL(opts.baseUrl);
    } catch {
      throw new TypeError(`baseUrl must be an http(s) URL such as http://127.0.0.1:8000/v1; got ${JSON.stringify(opts.baseUrl)}`);
    }
    if (base.protocol !== "http:" && base.protocol !== "https:") throw new TypeError(`baseUrl must be http or https; got ${base.protocol}`);
    if (typeof opts.model !== "string" || opts.model === "") throw new TypeError("model must be the upstream's non-empty model name");
    if (opts.contextWindow !== undefined && (!Number.isInteger(opts.contextWindow) || opts.contextWindow < 2)) {
      throw new RangeError("contextWindow must be an integer of at least 2 tokens");
    }
    const timeoutMs = opts.timeoutMs ?? DEFAULT_UPSTREAM_TIMEOUT_MS;
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new RangeError("timeoutMs must be a positive number");

    const closing = new AbortController();
    // Every exchange in flight listens on it until it ends: dozens at once under load is normal, not a leak.
    setMaxListeners(0, closing.signal);
    const client = new UpstreamClient({ baseUrl: opts.baseUrl, apiKey: opts.apiKey, timeoutMs, closed: closing.signal });
    try {
      return await OpenAiEngine.discover(client, closing, opts);
    } catch (error) {
      await client.close();
      throw error;
    }
  }

  /** What the upstream says of the model: its context window, and whether it has a tokenizer. */
  private static async discover(client: UpstreamClient, closing: AbortController, opts: { model: string; contextWindow?: number | undefined }): Promise<OpenAiEngine> {
    const discovered = await discoverContextWindow(client, opts.model);
    let contextWindow: number;
    let source: ContextWindowSource | "option";
    if (discovered && (opts.contextWindow === undefined || discovered.tokens <= opts.contextWindow)) {
      contextWindow = discovered.tokens;
      source = discovered.source;
    } else if (opts.contextWindow !== undefined) {
      contextWindow = opts.contextWindow;
      source = "option";
    } else {
      throw new Error(
        `${client.baseUrl} does not report the context window of ${opts.model} (looked for vLLM's /v1/models ` +
          "max_model_len, llama-server's /props n_ctx and Ollama's /api/show context_length); pass contextWindow",
      );
    }
    const tokenizer = await probeTokenizer(client, opts.model);
    return new OpenAiEngine(client, closing, opts.model, contextWindow, source, tokenizer);
  }

  /** The completion-limit field this server accepts, as learnt from its rejections. */
  get tokenLimitField(): TokenLimitField {
    return this.limitField;
  }

  async countPromptTokens(messages: ChatMessage[]): Promise<number> {
    return this.promptTokens(messages);
  }

  /**
   * A gateway asks a worker to count a prompt and then sends it the job with that same prompt,
   * which the engine counts again while its request opens: each distinct prompt's count is asked
   * of the upstream once (the same tokenizer gives the same count), and callers asking while it is
   * under way share the request. A count that failed is asked again next time.
   */
  private async promptTokens(messages: readonly ChatMessage[], signal?: AbortSignal): Promise<number> {
    if (this.closed) throw new Error("the engine is closed");
    if (!this.tokenizer) return estimatePromptTokens(messages);
    const key = createHash("sha256").update(JSON.stringify(messages)).digest("base64");
    let counting = this.counts.get(key);
    if (counting === undefined) {
      // Shared, so no one caller's signal cuts it; the client's idle timeout and close still do.
      const asked = serverPromptTokens(this.client, this.tokenizer, this.model, messages);
      asked.catch(() => {
        if (this.counts.get(key) === asked) this.counts.delete(key);
      });
      this.counts.set(key, (counting = asked));
    }
    return untilAborted(counting, signal);
  }

  generate(request: GenerationRequest, signal?: AbortSignal): AsyncIterable<GenerationEvent> {
    return this.run(request, signal);
  }

  private async *run(request: GenerationRequest, signal?: AbortSignal): AsyncGenerator<GenerationEvent> {
    if (this.closed) throw new Error("the engine is closed");
    if (!Number.isInteger(request.maxTokens) || request.maxTokens < 1) {
      throw new RangeError("maxTokens must be a positive integer");
    }
    if (signal?.aborted) return;
    const opened = await this.countAndOpen(request, signal);
    if (opened === undefined) return;
    const { promptTokens, response, exchange } = opened;
    const state: StreamState = { text: "", contentChunks: 0, usage: null, finish: null, sawDone: false };
    let complete = false;
    try {
      if (response.contentType.includes("application/json")) {
        // The server ignored `stream: true` and sent one whole completion.
        this.takeChunk(parseChunk(await response.text(), response.status), state, response.status);
        state.sawDone = true;
        if (signal?.aborted) return;
        if (state.text !== "") yield { type: "delta", text: state.text };
      } else {
        yield* this.streamedDeltas(response, exchange, state, signal);
      }
      if (signal?.aborted) return;
      if (!state.sawDone && state.finish === null) {
        throw new UpstreamError("the upstream's stream ended before the generation finished", response.status);
      }
      complete = true;
      const usage = await this.finalUsage(state, promptTokens, request.maxTokens, signal);
      const finishReason = state.finish ?? inferFinish(usage, request.maxTokens);
      if (signal?.aborted) return;
      yield { type: "done", finishReason, usage };
    } catch (error) {
      if (signal?.aborted) return;
      const failure = exchange.failure(this.client.api("/chat/completions"), error);
      // Before any text, a rejection sent as a stream event (llama-server builds that check the
      // prompt after answering 200) still means nothing was generated.
      throw state.contentChunks === 0 ? this.asContextError(failure, promptTokens, request.maxTokens) : failure;
    } finally {
      if (complete) response.release();
      else exchange.end();
    }
  }

  /**
   * Counts the prompt and opens the request. The upstream's tokenizer is asked while the request
   * opens: asking first would put that round trip before the first token, and an upstream with a
   * tokenizer refuses an over-long prompt itself. A local estimate costs no round trip, so a
   * prompt it finds too long is never sent. Either way such a prompt fails as
   * ContextLengthExceededError, its request closed if it was sent. Undefined when `signal`
   * aborted the attempt.
   */
  private async countAndOpen(
    request: GenerationRequest,
    signal?: AbortSignal,
  ): Promise<{ promptTokens: number; response: UpstreamResponse; exchange: Exchange } | undefined> {
    const fits = (promptTokens: number) => promptTokens + request.maxTokens <= this.contextWindow;
    const counting = this.promptTokens(request.messages, signal);
    const opening = this.tokenizer ? this.open(request, signal) : counting.then((n) => (fits(n) ? this.open(request, signal) : undefined));
    const [counted, opened] = await Promise.allSettled([counting, opening]);
    const close = () => (opened.status === "fulfilled" ? opened.value?.exchange.end() : undefined);
    if (counted.status === "rejected") {
      close();
      if (signal?.aborted) return undefined;
      throw counted.reason;
    }
    const promptTokens = counted.value;
    if (!fits(promptTokens)) {
      close();
      throw new ContextLengthExceededError(promptTokens, request.maxTokens, this.contextWindow);
    }
    if (opened.status === "rejected") {
      if (signal?.aborted) return undefined;
      throw this.asContextError(opened.reason, promptTokens, request.maxTokens);
    }
    return { promptTokens, ...opened.value! };
  }

  /** The deltas of a streamed (SSE) reply, with what its chunks say recorded in `state`. */
  private async *streamedDeltas(response: UpstreamResponse, exchange: Exchange, state: StreamState, signal?: AbortSignal): AsyncGenerator<GenerationEvent> {
    for await (const event of readSse(response.body, () => exchange.touch())) {
      if (event.event === "error") throw upstreamErrorFromEvent(event.data, response.status);
      const data = event.data.trim();
      if (data === "[DONE]") {
        state.sawDone = true;
        return;
      }
      if (data === "") continue;
      const text = this.takeChunk(parseChunk(data, response.status), state, response.status);
      if (text === "") continue;
      // The consumer may abort while holding a delta; nothing more reaches it after that.
      if (signal?.aborted) return;
      exchange.pause();
      yield { type: "delta", text };
      exchange.touch();
    }
  }

  /** Records what a chunk says and returns the text it adds. */
  private takeChunk(chunk: Record<string, unknown>, state: StreamState, status: number): string {
    if ((chunk.error !== undefined && chunk.error !== null) || chunk.object === "error") {
      throw upstreamErrorFromEvent(JSON.stringify(chunk), status);
    }
    // Last one wins: vLLM's continuous_usage_stats repeats a growing usage in every chunk.
    const usage = usageOf(chunk);
    if (usage) state.usage = usage;
    const choice = firstChoice(chunk);
    if (!choice) return "";
    const meaning = finishMeaning(choice.finish_reason);
    if (meaning === "failed") {
      throw new UpstreamError(`the upstream ended the generation with finish_reason "${String(choice.finish_reason)}"`, status);
    }
    if (meaning) state.finish = meaning;
    const text = contentOf(choice);
    if (text !== "") {
      state.contentChunks++;
      state.text += text;
    }
    return text;
  }

  /**
   * The server's own numbers when it reported usage. Without them: the prompt as counted before
   * sending, and the completion as the larger of two counts that can only fall short of the truth:
   * content-bearing chunks (a server may pack several tokens into one chunk, as vLLM's
   * stream_interval does) and, when the server has a tokenizer, the tokens of the text received
   * (which lacks a stop sequence's tokens). A generation that hit the limit produced exactly it.
   */
  private async finalUsage(state: StreamState, promptTokens: number, maxTokens: number, signal?: AbortSignal): Promise<Usage> {
    const prompt = state.usage?.promptTokens ?? promptTokens;
    let completion = state.usage?.completionTokens;
    if (completion === undefined) {
      if (state.finish === "length") {
        completion = maxTokens;
      } else {
        completion = state.contentChunks;
        if (this.tokenizer && state.text !== "") {
          completion = Math.max(completion, await serverTextTokens(this.client, this.tokenizer, this.model, state.text, false, signal));
        }
        completion = Math.min(completion, maxTokens);
      }
    }
    return { promptTokens: prompt, completionTokens: completion };
  }

  /** POST the request; on a 400 naming the limit field, retry once with its other name and keep that. */
  private async open(request: GenerationRequest, signal?: AbortSignal): Promise<{ response: UpstreamResponse; exchange: Exchange }> {
    const url = this.client.api("/chat/completions");
    const field = this.limitField;
    try {
      return await this.client.stream(url, chatRequestBody(this.model, request, field), signal);
    } catch (error) {
      if (signal?.aborted || !rejectsLimitField(error, field)) throw error;
      const other = otherTokenLimitField(field);
      try {
        const opened = await this.client.stream(url, chatRequestBody(this.model, request, other), signal);
        this.limitField = other;
        return opened;
      } catch (retryError) {
        // Rejecting both names is some other problem, which the first answer describes.
        throw rejectsLimitField(retryError, other) ? error : retryError;
      }
    }
  }

  /**
   * The upstream's own "does not fit" (our estimate was low, or its window is smaller than it
   * reports) as the error the gateway maps to context_length_exceeded, with the server's numbers
   * where it gave them. Without a prompt count, the smallest one consistent with the rejection.
   */
  private asContextError(error: unknown, promptTokens: number, maxTokens: number): unknown {
    if (!(error instanceof UpstreamError)) return error;
    const overflow = contextOverflowOf(error);
    if (!overflow) return error;
    const window = overflow.contextWindow ?? this.contextWindow;
    const prompt = overflow.promptTokens ?? Math.max(promptTokens, window - maxTokens + 1);
    return new ContextLengthExceededError(prompt, maxTokens, window);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.closing.abort();
    await this.client.close();
  }
}

function parseChunk(data: string, status: number): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(data);
  } catch {
    throw new UpstreamError(`the upstream sent a chunk that is not JSON: ${data.slice(0, 200)}`, status);
  }
  if (!isRecord(parsed)) throw new UpstreamError(`the upstream sent a chunk that is not an object: ${data.slice(0, 200)}`, status);
  return parsed;
}

/** No finish_reason at all (the stream still ended with [DONE]): only the count can tell. */
function inferFinish(usage: Usage, maxTokens: number): FinishReason {
  return usage.completionTokens >= maxTokens ? "length" : "stop";
}
