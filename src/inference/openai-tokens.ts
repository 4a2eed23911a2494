/**
 * Counting tokens for an upstream server: with the server's own tokenizer and chat template when
 * it exposes them, else with a documented conservative estimate.
 *
 *  - vLLM: POST /tokenize `{model, messages, add_generation_prompt}` renders the chat template and
 *    answers `{count}`, the same number its usage reports as prompt_tokens.
 *  - llama-server: POST /apply-template `{messages}` answers `{prompt}`; POST /tokenize
 *    `{content, add_special}` answers `{tokens: [...]}`. Chat completions tokenize with special
 *    tokens added, so the count does too.
 *  - Ollama has no tokenizer endpoint: estimate.
 */
import type { ChatMessage } from "./engine.ts";
import type { UpstreamClient } from "./openai-http.ts";
import { UpstreamError, upstreamErrorFromBody } from "./openai-errors.ts";

export type ServerTokenizer = "vllm" | "llama-server";

/**
 * The estimate's constants. Typical BPE vocabularies spend 3.5-4.5 UTF-8 bytes per token on
 * English and about one token per 3-byte CJK character, so bytes / 3 over-counts them; text that
 * falls back to single-byte tokens (rare scripts, random strings) can still exceed it, which is why
 * the server's own usage, not this estimate, is what a finished generation reports. The overheads
 * cover role markers and separators per message, plus what templates add once (a default system
 * prompt such as Llama 3.1's date header or Qwen's identity line, and the assistant header).
 */
export const ESTIMATE_BYTES_PER_TOKEN = 3;
export const ESTIMATE_TOKENS_PER_MESSAGE = 8;
export const ESTIMATE_TEMPLATE_TOKENS = 32;

export function estimatePromptTokens(messages: readonly ChatMessage[]): number {
  let tokens = ESTIMATE_TEMPLATE_TOKENS;
  for (const message of messages) {
    tokens += ESTIMATE_TOKENS_PER_MESSAGE + Math.ceil(Buffer.byteLength(message.content, "utf8") / ESTIMATE_BYTES_PER_TOKEN);
  }
  return tokens;
}

function wireMessages(messages: readonly ChatMessage[]): Array<{ role: string; content: string }> {
  return messages.map((m) => ({ role: m.role, content: m.content }));
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function tokenCount(body: unknown, field: "count" | "tokens"): number | undefined {
  if (!isRecord(body)) return undefined;
  const value = body[field];
  if (field === "count") return typeof value === "number" && Number.isInteger(value) && value >= 0 ? value : undefined;
  return Array.isArray(value) ? value.length : undefined;
}

function malformed(url: string, text: string): UpstreamError {
  return new UpstreamError(`the upstream's tokenizer at ${url} answered without a token count: ${text.slice(0, 200)}`, 200);
}

/** Prompt tokens of a conversation as the server will count them. */
export async function serverPromptTokens(
  client: UpstreamClient,
  kind: ServerTokenizer,
  model: string,
  messages: readonly ChatMessage[],
  signal?: AbortSignal,
): Promise<number> {
  if (kind === "vllm") {
    const url = client.root("/tokenize");
    const reply = await client.json("POST", url, { model, messages: wireMessages(messages), add_generation_prompt: true }, signal);
    if (!reply.ok) throw upstreamErrorFromBody(reply.status, reply.text);
    const count = tokenCount(reply.body, "count");
    if (count === undefined) throw malformed(url, reply.text);
    return count;
  }
  const templateUrl = client.root("/apply-template");
  const rendered = await client.json("POST", templateUrl, { messages: wireMessages(messages) }, signal);
  if (!rendered.ok) throw upstreamErrorFromBody(rendered.status, rendered.text);
  const prompt = isRecord(rendered.body) ? rendered.body.prompt : undefined;
  if (typeof prompt !== "string") throw malformed(templateUrl, rendered.text);
  return serverTextTokens(client, kind, model, prompt, true, signal);
}

/** Tokens of plain text (no template); `special` adds the BOS and the like, as a prompt gets. */
export async function serverTextTokens(
  client: UpstreamClient,
  kind: ServerTokenizer,
  model: string,
  text: string,
  special: boolean,
  signal?: AbortSignal,
): Promise<number> {
  const url = client.root("/tokenize");
  const body = kind === "vllm" ? { model, prompt: text, add_special_tokens: special } : { content: text, add_special: special };
  const reply = await client.json("POST", url, body, signal);
  if (!reply.ok) throw upstreamErrorFromBody(reply.status, reply.text);
  const count = tokenCount(reply.body, kind === "vllm" ? "count" : "tokens");
  if (count === undefined) throw malformed(url, reply.text);
  return count;
}

const PROBE: ChatMessage[] = [{ role: "user", content: "Hi" }];

/**
 * Which tokenizer dialect the server speaks, if any, found by asking both with a tiny
 * conversation. A server without them answers 404 (or, for llama-server's /tokenize given vLLM's
 * body, an empty token list), which falls through to the next or to the estimate.
 */
export async function probeTokenizer(client: UpstreamClient, model: string): Promise<ServerTokenizer | null> {
  for (const kind of ["vllm", "llama-server"] as const) {
    try {
      if ((await serverPromptTokens(client, kind, model, PROBE)) > 0) return kind;
    } catch (error) {
      // An HTTP answer of any kind means "not this dialect"; no answer at all is a broken upstream.
      if (!(error instanceof UpstreamError) || error.status === null) throw error;
    }
  }
  return null;
}
