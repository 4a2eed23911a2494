/**
 * The chat-completions wire format as the upstream engine speaks it: the request body built from a
 * GenerationRequest, and the parts of a streamed chunk it reads, tolerant of the servers' spellings.
 */
import type { FinishReason, GenerationRequest } from "./engine.ts";

/**
 * The completion limit's two names. `max_tokens` is the one every server knows; OpenAI's newer
 * `max_completion_tokens` is required by some and ignored (no limit at all) by older ones, so it is
 * only sent after a server has rejected `max_tokens`.
 */
export type TokenLimitField = "max_tokens" | "max_completion_tokens";

export function otherTokenLimitField(field: TokenLimitField): TokenLimitField {
  return field === "max_tokens" ? "max_completion_tokens" : "max_tokens";
}

export function chatRequestBody(model: string, request: GenerationRequest, limitField: TokenLimitField): Record<string, unknown> {
  const body: Record<string, unknown> = {
    model,
    messages: request.messages.map((m) => ({ role: m.role, content: m.content })),
    stream: true,
    stream_options: { include_usage: true },
    [limitField]: request.maxTokens,
    temperature: request.temperature,
    top_p: request.topP,
    frequency_penalty: request.frequencyPenalty,
    presence_penalty: request.presencePenalty,
  };
  if (request.stop.length > 0) body.stop = request.stop;
  if (request.seed !== undefined) body.seed = request.seed;
  return body;
}

/** What a finish_reason spelling means; "failed" for servers that end an aborted or broken generation with one. */
export type FinishMeaning = FinishReason | "failed";

const FINISH_MEANINGS: Record<string, FinishMeaning> = {
  stop: "stop",
  eos: "stop", // llama.cpp-derived servers
  eos_token: "stop",
  end_turn: "stop",
  stop_sequence: "stop",
  content_filter: "stop",
  tool_calls: "stop",
  function_call: "stop",
  length: "length",
  max_tokens: "length",
  model_length: "length",
  abort: "failed", // vLLM, when the engine dropped the request
  error: "failed",
};

/**
 * The meaning of a finish_reason; null for none yet. An unknown spelling still means the server
 * ended the generation for a reason other than the limit it was given, so it reads as "stop".
 */
export function finishMeaning(raw: unknown): FinishMeaning | null {
  if (typeof raw !== "string" || raw === "") return null;
  return FINISH_MEANINGS[raw.toLowerCase()] ?? "stop";
}

export interface WireUsage {
  promptTokens: number | undefined;
  completionTokens: number | undefined;
}

function count(value: unknown): number | undefined {
  return typeof value === "number" && Number.isInteger(value) && value >= 0 ? value : undefined;
}

/** A chunk's usage, or null when it has none (vLLM and the gateway send `"usage": null` meanwhile). */
export function usageOf(chunk: Record<string, unknown>): WireUsage | null {
  const usage = chunk.usage;
  if (typeof usage !== "object" || usage === null) return null;
  const u = usage as Record<string, unknown>;
  return { promptTokens: count(u.prompt_tokens), completionTokens: count(u.completion_tokens) };
}

/** The first choice of a chunk (n is always 1), from `choices`, which may be empty in usage chunks. */
export function firstChoice(chunk: Record<string, unknown>): Record<string, unknown> | undefined {
  const choices = chunk.choices;
  if (!Array.isArray(choices)) return undefined;
  const choice = choices.find((c: unknown) => typeof c === "object" && c !== null && ((c as { index?: unknown }).index ?? 0) === 0);
  return choice as Record<string, unknown> | undefined;
}

/** The text a choice carries: `delta.content` in a stream, `message.content` in a whole completion. */
export function contentOf(choice: Record<string, unknown>): string {
  for (const key of ["delta", "message"] as const) {
    const part = choice[key];
    if (typeof part === "object" && part !== null) {
      const content = (part as Record<string, unknown>).content;
      if (typeof content === "string") return content;
    }
  }
  return "";
}
