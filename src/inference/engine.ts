/**
 * The inference engine interface: an OpenAI-style chat request in; text deltas, then the
 * finish reason and token usage out. Engines are the llama.cpp engine (in-process) and, later,
 * an OpenAI-compatible upstream server.
 */

export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

/** Sampling parameters, already resolved to OpenAI's defaults by the caller's request parser. */
export interface GenerationRequest {
  messages: ChatMessage[];
  /** Hard upper bound on generated tokens (from max_tokens or from what the escrow can pay for). */
  maxTokens: number;
  /** 0.0-2.0; OpenAI's default is 1. 0 means greedy. */
  temperature: number;
  /** OpenAI's default is 1 (no nucleus cutoff). */
  topP: number;
  /** Sequences that end generation; they are not part of the output. */
  stop: string[];
  /** -2.0-2.0, OpenAI's default 0. */
  frequencyPenalty: number;
  /** -2.0-2.0, OpenAI's default 0. */
  presencePenalty: number;
  /** Seed for reproducible sampling; absent means a fresh random seed. */
  seed?: number;
}

export type FinishReason = "stop" | "length";

/**
 * How a generation ended: a finish reason, or "cancelled" when its caller stopped it mid-way; the
 * output up to that point is then complete as it stands (and is charged: it was generated for the caller).
 */
export type StopReason = FinishReason | "cancelled";

export interface Usage {
  promptTokens: number;
  completionTokens: number;
}

export type GenerationEvent =
  | { type: "delta"; text: string }
  | { type: "done"; finishReason: StopReason; usage: Usage };

export interface Engine {
  /** Largest context, prompt plus completion, in tokens. */
  readonly contextWindow: number;
  /** Prompt tokens of this conversation, counted with the model's own tokenizer and chat template. */
  countPromptTokens(messages: ChatMessage[]): Promise<number>;
  /**
   * Run generation. Yields deltas as they are produced and exactly one `done` event last.
   * Aborting `signal` (the client went away) stops generation promptly. An engine that can count
   * what it generated then yields the output it still holds and a `done` with finishReason
   * "cancelled" counting the tokens generated up to the stop; without any output so far (or
   * an engine that cannot count) the iterator ends without a `done` event.
   */
  generate(request: GenerationRequest, signal?: AbortSignal): AsyncIterable<GenerationEvent>;
  close(): Promise<void>;
}
