/**
 * Validation of a chat-completions request body into the service's own shape, with OpenAI's
 * defaults filled in. Pure: throws ApiError(invalid_request) naming the offending `param`.
 */
import { ApiError } from "../core/errors.ts";
import {
  MAX_MESSAGES,
  MAX_STOP_SEQUENCES,
  MAX_TOKENS,
  PENALTY_RANGE,
  SEED_RANGE,
  TEMPERATURE_RANGE,
  TOP_P_RANGE,
} from "../core/request-limits.ts";
import type { ChatMessage } from "../inference/engine.ts";

type Range = { readonly min: number; readonly max: number };

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  stream: boolean;
  includeUsage: boolean;
  maxTokens: number | undefined;
  temperature: number;
  topP: number;
  stop: string[];
  frequencyPenalty: number;
  presencePenalty: number;
  seed: number | undefined;
}

const ROLES = new Set(["system", "user", "assistant"]);

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

function numberIn(body: Record<string, unknown>, param: string, { min, max }: Range, fallback: number): number {
  const value = body[param];
  if (!isPresent(value)) return fallback;
  if (typeof value !== "number" || !Number.isFinite(value)) throw invalid(param, `'${param}' must be a number.`);
  if (value < min || value > max) throw invalid(param, `'${param}' must be between ${min} and ${max}; got ${value}.`);
  return value;
}

function parseMessages(value: unknown): ChatMessage[] {
  if (!isPresent(value)) throw invalid("messages", "'messages' is required.");
  if (!Array.isArray(value)) throw invalid("messages", "'messages' must be an array of messages.");
  if (value.length === 0) throw invalid("messages", "'messages' must contain at least one message.");
  if (value.length > MAX_MESSAGES) throw invalid("messages", `'messages' holds at most ${MAX_MESSAGES} messages.`);
  return value.map((raw, i) => {
    const param = `messages[${i}]`;
    if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw invalid(param, `'${param}' must be an object.`);
    const message = raw as Record<string, unknown>;
    if (typeof message.role !== "string" || !ROLES.has(message.role)) {
      throw invalid(`${param}.role`, `'${param}.role' must be one of 'system', 'user', 'assistant'.`);
    }
    if (isPresent(message.tool_calls) || isPresent(message.function_call)) {
      throw invalid(`${param}.tool_calls`, "Tool calling is planned and not available yet.");
    }
    if (typeof message.content !== "string") {
      if (Array.isArray(message.content)) {
        throw invalid(`${param}.content`, "Message content other than a text string (such as image inputs) is planned and not available yet.");
      }
      throw invalid(`${param}.content`, `'${param}.content' must be a string.`);
    }
    return { role: message.role as ChatMessage["role"], content: message.content };
  });
}

function parseStop(value: unknown): string[] {
  if (!isPresent(value)) return [];
  if (typeof value === "string") return value === "" ? [] : [value];
  if (Array.isArray(value) && value.every((s) => typeof s === "string")) {
    if (value.length > MAX_STOP_SEQUENCES) throw invalid("stop", `'stop' holds at most ${MAX_STOP_SEQUENCES} sequences.`);
    return (value as string[]).filter((s) => s !== "");
  }
  throw invalid("stop", "'stop' must be a string or an array of strings.");
}

function parseOptionalInteger(body: Record<string, unknown>, param: string, { min, max }: Range): number | undefined {
  const value = body[param];
  if (!isPresent(value)) return undefined;
  if (typeof value !== "number" || !Number.isInteger(value)) throw invalid(param, `'${param}' must be an integer.`);
  if (value < min || value > max) throw invalid(param, `'${param}' must be an integer from ${min} to ${max}; got ${value}.`);
  return value;
}

const TOKENS_RANGE: Range = { min: 1, max: MAX_TOKENS };

export function parseChatRequest(body: unknown): ChatRequest {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw invalid("body", "The request body must be a JSON object.");
  }
  const b = body as Record<string, unknown>;

  if (!isPresent(b.model)) throw invalid("model", "'model' is required.");
  if (typeof b.model !== "string" || b.model === "") throw invalid("model", "'model' must be a non-empty string.");
  const messages = parseMessages(b.messages);

  for (const [field, message] of Object.entries(PLANNED_FEATURES)) {
    if (isPresent(b[field])) throw invalid(field, message);
  }
  if (isPresent(b.n) && b.n !== 1) throw invalid("n", "Only n = 1 is supported; several choices per request are planned.");

  if (isPresent(b.stream) && typeof b.stream !== "boolean") throw invalid("stream", "'stream' must be a boolean.");
  const stream = b.stream === true;
  let includeUsage = false;
  if (isPresent(b.stream_options)) {
    const options = b.stream_options;
    if (typeof options !== "object" || Array.isArray(options)) throw invalid("stream_options", "'stream_options' must be an object.");
    const flag = (options as Record<string, unknown>).include_usage;
    if (isPresent(flag) && typeof flag !== "boolean") throw invalid("stream_options.include_usage", "'include_usage' must be a boolean.");
    includeUsage = flag === true;
  }

  // max_completion_tokens is the newer name of the same limit; SDKs send either.
  const maxTokens = parseOptionalInteger(b, "max_tokens", TOKENS_RANGE) ?? parseOptionalInteger(b, "max_completion_tokens", TOKENS_RANGE);

  return {
    model: b.model,
    messages,
    stream,
    includeUsage: stream && includeUsage,
    maxTokens,
    temperature: numberIn(b, "temperature", TEMPERATURE_RANGE, 1),
    topP: numberIn(b, "top_p", TOP_P_RANGE, 1),
    stop: parseStop(b.stop),
    frequencyPenalty: numberIn(b, "frequency_penalty", PENALTY_RANGE, 0),
    presencePenalty: numberIn(b, "presence_penalty", PENALTY_RANGE, 0),
    seed: parseOptionalInteger(b, "seed", SEED_RANGE),
  };
}
