/**
 * The in-process llama.cpp engine: one loaded model and one context whose sequences form a pool,
 * so concurrent requests are decoded together in shared batches (far faster than a context per
 * request). Requests beyond the pool wait for a free sequence.
 */
import os from "node:os";
import type {
  ChatHistoryItem,
  ChatWrapper,
  Llama,
  LlamaChat,
  LlamaContext,
  LlamaContextSequence,
  LlamaModel,
} from "node-llama-cpp";
import { ContextLengthExceededError } from "./context-length-error.ts";
import type { ChatMessage, Engine, GenerationEvent, GenerationRequest, StopReason } from "./engine.ts";
import { sampleFirstAloneAfterEachDecode } from "./batch-sampling-guard.ts";
import { toLlamaSampling } from "./llama-sampling.ts";
import { SequencePool } from "./sequence-pool.ts";
import { nodeLlamaCpp } from "./node-llama.ts";
import { longestTokenBytes, promptTokensAtLeast } from "./token-bounds.ts";

export { ContextLengthExceededError } from "./context-length-error.ts";

export interface LlamaEngineOptions {
  modelPath: string;
  /** CPU threads for evaluation; pass 1 for tiny models, where more threads only add contention. */
  threads?: number;
  /** Tokens per sequence; capped at the model's training context. */
  contextSize?: number;
  /** Requests served at once; later ones wait. */
  maxSequences?: number;
}

export const DEFAULT_MAX_SEQUENCES = 8;
/** Every sequence owns its own KV cells, so memory grows with contextSize x maxSequences. */
export const DEFAULT_CONTEXT_SIZE_CAP = 4096;

// One native backend per process: a second getLlama() would load llama.cpp again for nothing.
let llamaInstance: Promise<Llama> | undefined;
/** The process-wide CPU llama.cpp backend the engine uses, for code that needs the model's tokenizer. */
export function sharedLlama(): Promise<Llama> {
  llamaInstance ??= nodeLlamaCpp().then(({ getLlama }) => getLlama({ gpu: false, build: "never" }));
  return llamaInstance;
}

interface Slot {
  sequence: LlamaContextSequence;
  chat: LlamaChat;
}

function toHistory(messages: readonly ChatMessage[]): ChatHistoryItem[] {
  const history: ChatHistoryItem[] = messages.map((m): ChatHistoryItem => {
    switch (m.role) {
      case "system":
        return { type: "system", text: m.content };
      case "user":
        return { type: "user", text: m.content };
      case "assistant":
        return { type: "model", response: [m.content] };
    }
  });
  // The empty model turn makes the wrapper render the assistant prefix generation continues from.
  history.push({ type: "model", response: [] });
  return history;
}

/** Turns callback-style chunks into something an async generator can await. */
class ChunkQueue {
  private chunks: string[] = [];
  private wake: (() => void) | undefined;
  closed = false;

  push(text: string): void {
    this.chunks.push(text);
    this.notify();
  }

  close(): void {
    this.closed = true;
    this.notify();
  }

  takeAll(): string[] {
    const taken = this.chunks;
    this.chunks = [];
    return taken;
  }

  /** Resolves once there is something to take or the queue has closed. */
  ready(): Promise<void> {
    if (this.chunks.length > 0 || this.closed) return Promise.resolve();
    return new Promise((resolve) => (this.wake = resolve));
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}

export class LlamaEngine implements Engine {
  readonly contextWindow: number;
  readonly maxSequences: number;
  private readonly pool: SequencePool<Slot>;
  private closed = false;

  private constructor(
    private readonly model: LlamaModel,
    private readonly context: LlamaContext,
    private readonly chatWrapper: ChatWrapper,
    slots: Slot[],
    contextWindow: number,
    /** The vocabulary's longest token, which bounds a prompt's tokens from below by its length. */
    private readonly maxTokenBytes: number,
  ) {
    this.pool = new SequencePool(slots);
    this.maxSequences = slots.length;
    this.contextWindow = contextWindow;
  }

  static async load(opts: LlamaEngineOptions): Promise<LlamaEngine> {
    const threads = opts.threads ?? Math.min(os.availableParallelism(), 2);
    const maxSequences = opts.maxSequences ?? DEFAULT_MAX_SEQUENCES;
    if (!Number.isInteger(threads) || threads < 1) throw new RangeError("threads must be a positive integer");
    if (!Number.isInteger(maxSequences) || maxSequences < 1 || maxSequences > 256) {
      throw new RangeError("maxSequences must be an integer from 1 to 256 (llama.cpp's limit per context)");
    }
    if (opts.contextSize !== undefined && (!Number.isInteger(opts.contextSize) || opts.contextSize < 16)) {
      throw new RangeError("contextSize must be an integer of at least 16 tokens");
    }
    const llama = await sharedLlama();
    const { LlamaChat, resolveChatWrapper } = await nodeLlamaCpp();
    const model = await llama.loadModel({ modelPath: opts.modelPath });
    try {
      const requested = Math.min(opts.contextSize ?? DEFAULT_CONTEXT_SIZE_CAP, model.trainContextSize);
      const context = await model.createContext({ contextSize: requested, sequences: maxSequences, threads });
      sampleFirstAloneAfterEachDecode(context);
      // Resolving a wrapper parses and test-renders the model's Jinja template (0.5-1 s on real
      // models), so it is done once here, never per request.
      const chatWrapper = resolveChatWrapper(model);
      const slots: Slot[] = [];
      for (let i = 0; i < maxSequences; i++) {
        const sequence = context.getSequence();
        slots.push({ sequence, chat: new LlamaChat({ contextSequence: sequence, chatWrapper }) });
      }
      // llama.cpp may round the context up; the promise to callers is what was asked for.
      const contextWindow = Math.min(requested, context.contextSize);
      return new LlamaEngine(model, context, chatWrapper, slots, contextWindow, longestTokenBytes(model));
    } catch (err) {
      await model.dispose();
      throw err;
    }
  }

  /** The chat wrapper node-llama-cpp resolved from the model's template (e.g. "ChatML"). */
  get chatWrapperName(): string {
    return this.chatWrapper.wrapperName;
  }

  /**
   * Exact, unless the prompt's length alone proves it cannot fit the context window: then that
   * lower bound, which already exceeds the window, and nothing is rendered or tokenized (tokenizing
   * one long word takes time quadratic in its length, on this thread).
   */
  async countPromptTokens(messages: ChatMessage[]): Promise<number> {
    const atLeast = promptTokensAtLeast(messages, this.maxTokenBytes);
    return atLeast > this.contextWindow ? atLeast : this.promptTokens(messages);
  }

  private promptTokens(messages: readonly ChatMessage[]): number {
    // The text the wrapper renders is exactly what LlamaChat evaluates; node-llama-cpp's own token
    // meter counts one fewer and skips prefixes cached from earlier requests, so it can't be used.
    const { contextText } = this.chatWrapper.generateContextState({ chatHistory: toHistory(messages) });
    return contextText.tokenize(this.model.tokenizer).length;
  }

  generate(request: GenerationRequest, signal?: AbortSignal): AsyncIterable<GenerationEvent> {
    return this.run(request, signal);
  }

  /** The prompt's tokens, once the prompt and `maxTokens` are known to fit the context window. */
  private fittingPromptTokens(request: GenerationRequest): number {
    if (!Number.isInteger(request.maxTokens) || request.maxTokens < 1) {
      throw new RangeError("maxTokens must be a positive integer");
    }
    // A bound from the text's length refuses a prompt that cannot fit without tokenizing all of it.
    const atLeast = promptTokensAtLeast(request.messages, this.maxTokenBytes);
    if (atLeast + request.maxTokens > this.contextWindow) throw new ContextLengthExceededError(atLeast, request.maxTokens, this.contextWindow);
    const promptTokens = this.promptTokens(request.messages);
    // node-llama-cpp would silently shift the context instead of failing, so the budget is enforced here.
    if (promptTokens + request.maxTokens > this.contextWindow) {
      throw new ContextLengthExceededError(promptTokens, request.maxTokens, this.contextWindow);
    }
    return promptTokens;
  }

  private async *run(request: GenerationRequest, signal?: AbortSignal): AsyncGenerator<GenerationEvent> {
    if (this.closed) throw new Error("the engine is closed");
    const promptTokens = this.fittingPromptTokens(request);
    const slot = await this.pool.acquire(signal);
    if (slot === null) return;
    const stop = new AbortController();
    const onAbort = () => stop.abort(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    if (signal?.aborted) stop.abort(signal.reason);

    const queue = new ChunkQueue();
    const sampling = toLlamaSampling(request);
    const outputBefore = slot.sequence.tokenMeter.usedOutputTokens;
    const generation = slot.chat
      .generateResponse(toHistory(request.messages), {
        ...sampling,
        maxTokens: request.maxTokens,
        customStopTriggers: request.stop.filter((s) => s.length > 0),
        signal: stop.signal,
        // An abort after output began ends the response where it stands, so it can be counted.
        stopOnAbortSignal: true,
        onTextChunk: (text) => {
          if (text.length > 0) queue.push(text);
        },
      })
      .finally(() => queue.close());
    // Observed through `settled` below; this keeps an abort's rejection from going unhandled meanwhile.
    const settled = generation.then(
      (response) => ({ response }),
      (error: unknown) => ({ error }),
    );

    try {
      // After an abort the text generated before the stop still comes out, so that the output
      // and the count in `done` describe the same tokens.
      let yielded = false;
      for (;;) {
        await queue.ready();
        for (const text of queue.takeAll()) {
          yielded = true;
          yield { type: "delta", text };
        }
        if (queue.closed) break;
      }
      const outcome = await settled;
      if (stop.signal.aborted && (!yielded || "error" in outcome)) return;
      if ("error" in outcome) throw this.closed ? new Error("the engine is closed") : outcome.error;
      const { stopReason } = outcome.response.metadata;
      const finishReason: StopReason = stopReason === "abort" ? "cancelled" : stopReason === "maxTokens" ? "length" : "stop";
      // Every sampled token counts, stop-sequence tokens included, except the end-of-generation
      // token, which is a signal rather than output.
      const sampled = slot.sequence.tokenMeter.usedOutputTokens - outputBefore;
      const completionTokens = stopReason === "eogToken" ? sampled - 1 : sampled;
      yield { type: "done", finishReason, usage: { promptTokens, completionTokens } };
    } finally {
      // Reached also when the consumer stops iterating early: stop generating before freeing the slot.
      stop.abort();
      signal?.removeEventListener("abort", onAbort);
      await settled;
      this.pool.release(slot);
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.pool.close(new Error("the engine is closed"));
    await this.context.dispose();
    await this.model.dispose();
  }
}
