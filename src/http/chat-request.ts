/**
 * A chat-completions request body, already checked against its JSON schema (ChatCompletionRequest
 * in schemas.ts: types, ranges, required fields), into the service's own shape with OpenAI's
 * defaults filled in. What stays here is what a schema cannot say in words a caller can act on:
 * the features that are planned, and what `null` and empty stop sequences mean. Pure: throws
 * ApiError(invalid_request) naming the offending `param`.
 */
import { ApiError } from "../core/index.ts";
import type { ChatMessage } from "../inference/index.ts";
import type { ChatRequest } from "../jobs/index.ts";

/** The body as its schema lets it through; `null` stands for a field not given. */
export interface ChatCompletionBody {
  model: string;
  messages: { role: ChatMessage["role"]; content: string | unknown[]; tool_calls?: unknown; function_call?: unknown }[];
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean | null } | null;
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
  temperature?: number | null;
  top_p?: number | null;
  stop?: string | string[] | null;
  frequency_penalty?: number | null;
  presence_penalty?: number | null;
  seed?: number | null;
  n?: number | null;
  [other: string]: unknown;
}

/** Fields of the OpenAI protocol that the service does not offer yet; sending them is a 400. */
const PLANNED_FEATURES: Record<string, string> = {
  tools: "Tool calling is planned and not available yet.",
  functions: "Function calling is planned and not available yet.",
  tool_choice: "Tool calling is planned and not available yet.",
  function_call: "Function calling is planned and not available yet.",
};

function invalid(param: string, message: string): ApiError {
  return new ApiError("invalid_request", message, param);
}

function isPresent(value: unknown): boolean {
  return value !== undefined && value !== null;
}

function refusePlanned(body: ChatCompletionBody): void {
  body.messages.forEach((message, i) => {
    if (isPresent(message.tool_calls) || isPresent(message.function_call)) {
      throw invalid(`messages[${i}].tool_calls`, "Tool calling is planned and not available yet.");
    }
    if (typeof message.content !== "string") {
      throw invalid(`messages[${i}].content`, "Message content other than a text string (such as image inputs) is planned and not available yet.");
    }
  });
  for (const [field, message] of Object.entries(PLANNED_FEATURES)) {
    if (isPresent(body[field])) throw invalid(field, message);
  }
  if (isPresent(body.n) && body.n !== 1) throw invalid("n", "Only n = 1 is supported; several choices per request are planned.");
}

function stopSequences(stop: ChatCompletionBody["stop"]): string[] {
  if (!isPresent(stop)) return [];
  return [stop!].flat().filter((s) => s !== "");
}

export function parseChatRequest(body: ChatCompletionBody): ChatRequest {
  refusePlanned(body);
  const stream = body.stream === true;
  return {
    model: body.model,
    messages: body.messages.map((m) => ({ role: m.role, content: m.content as string })),
    stream,
    includeUsage: stream && body.stream_options?.include_usage === true,
    // max_completion_tokens is the newer name of the same limit; SDKs send either.
    maxTokens: body.max_tokens ?? body.max_completion_tokens ?? undefined,
    temperature: body.temperature ?? 1,
    topP: body.top_p ?? 1,
    stop: stopSequences(body.stop),
    frequencyPenalty: body.frequency_penalty ?? 0,
    presencePenalty: body.presence_penalty ?? 0,
    seed: body.seed ?? undefined,
  };
}
