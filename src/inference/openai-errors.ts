/**
 * Failures of an OpenAI-compatible upstream server, read from whichever error body shape the
 * server uses: OpenAI's and current vLLM's `{error:{message}}`, Ollama's native `{error:"..."}`,
 * FastAPI's `{detail:...}` (a string, or pydantic's list of `{loc, msg}`), older vLLM's top-level
 * `{object:"error", message}`, or plain text from a proxy in front of the server.
 */

const MAX_MESSAGE_CHARS = 2000;

export class UpstreamError extends Error {
  /**
   * @param status The upstream's HTTP status; for a failure reported inside a streamed 200, the
   *   numeric code the error event carried, else 200; null when no HTTP answer arrived at all
   *   (connection refused, reset, timeout).
   * @param code The upstream's own error code or type when it gave one (e.g. `model_not_found`).
   * @param body The parsed error body (or its text), kept for diagnosis.
   */
  constructor(
    message: string,
    readonly status: number | null,
    readonly code: string | null = null,
    readonly body: unknown = undefined,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "UpstreamError";
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function clip(text: string): string {
  const trimmed = text.trim();
  return trimmed.length > MAX_MESSAGE_CHARS ? `${trimmed.slice(0, MAX_MESSAGE_CHARS)}...` : trimmed;
}

/** FastAPI's validation errors: `[{loc: ["body", "max_tokens"], msg: "..."}]`; the location names the field. */
function detailText(detail: unknown): string {
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    return detail
      .map((item) => {
        if (!isRecord(item)) return JSON.stringify(item);
        const loc = Array.isArray(item.loc) ? item.loc.join(".") : "";
        const msg = typeof item.msg === "string" ? item.msg : JSON.stringify(item);
        return loc ? `${loc}: ${msg}` : msg;
      })
      .join("; ");
  }
  if (isRecord(detail) && typeof detail.message === "string") return detail.message;
  return JSON.stringify(detail);
}

function codeOf(error: Record<string, unknown>): string | null {
  if (typeof error.code === "string" && error.code !== "") return error.code;
  if (typeof error.type === "string" && error.type !== "") return error.type;
  return null;
}

/** The message and code of a parsed error payload, or null when it is not one of the known shapes. */
export function readErrorPayload(payload: unknown): { message: string; code: string | null } | null {
  if (!isRecord(payload)) return null;
  const { error } = payload;
  if (isRecord(error)) {
    const message = typeof error.message === "string" ? error.message : JSON.stringify(error);
    return { message, code: codeOf(error) };
  }
  if (typeof error === "string") return { message: error, code: null };
  if ("detail" in payload) return { message: detailText(payload.detail), code: null };
  if (payload.object === "error" && typeof payload.message === "string") return { message: payload.message, code: codeOf(payload) };
  return null;
}

/** An UpstreamError from a non-2xx answer's status and body text. */
export function upstreamErrorFromBody(status: number, text: string, statusText = ""): UpstreamError {
  let parsed: unknown = undefined;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Plain text (a proxy's error page, a crashed server's last words): the text is the message.
  }
  const read = readErrorPayload(parsed);
  if (read) return new UpstreamError(clip(read.message) || `HTTP ${status}`, status, read.code, parsed);
  const message = clip(text) || `HTTP ${status}${statusText ? ` ${statusText}` : ""}`;
  return new UpstreamError(message, status, null, parsed ?? text);
}

/** An error event inside a stream: vLLM's `data: {"error":{...}}`, llama-server's `error: {...}`. */
export function upstreamErrorFromEvent(data: string, httpStatus: number): UpstreamError {
  let parsed: unknown = undefined;
  try {
    parsed = JSON.parse(data);
  } catch {
    return new UpstreamError(`the upstream failed while streaming: ${clip(data) || "no details"}`, httpStatus, null, data);
  }
  const read = readErrorPayload(parsed) ?? (isRecord(parsed) && typeof parsed.message === "string" ? { message: parsed.message, code: codeOf(parsed) } : null);
  const inner = isRecord(parsed) && isRecord(parsed.error) ? parsed.error : isRecord(parsed) ? parsed : {};
  const status = typeof inner.code === "number" ? inner.code : httpStatus;
  const message = read ? clip(read.message) : clip(data);
  return new UpstreamError(`the upstream failed while streaming: ${message}`, status, read?.code ?? null, parsed);
}

/** What a context-length rejection says about the sizes involved, as far as it says anything. */
export interface ContextOverflow {
  promptTokens: number | undefined;
  contextWindow: number | undefined;
}

const CONTEXT_CODES = new Set(["context_length_exceeded", "exceed_context_size_error"]);
const CONTEXT_WORDING = /context length|context window|context size|maximum context/i;

function firstNumber(text: string, patterns: RegExp[]): number | undefined {
  for (const pattern of patterns) {
    const match = pattern.exec(text);
    if (match?.[1] !== undefined) return Number(match[1]);
  }
  return undefined;
}

/**
 * Recognises an upstream's "prompt plus completion does not fit" rejection and pulls out its
 * numbers: llama-server sends `n_prompt_tokens`/`n_ctx` fields; vLLM, OpenAI and this project's
 * gateway only say them in the message.
 */
export function contextOverflowOf(error: UpstreamError): ContextOverflow | null {
  if (error.status !== 400 && error.status !== 413) return null;
  if (!(error.code !== null && CONTEXT_CODES.has(error.code)) && !CONTEXT_WORDING.test(error.message)) return null;
  const fields = isRecord(error.body) && isRecord(error.body.error) ? error.body.error : {};
  const promptTokens =
    typeof fields.n_prompt_tokens === "number"
      ? fields.n_prompt_tokens
      : firstNumber(error.message, [
          /\((\d+) in the messages/i, // vLLM: "(1000 in the messages, 4000 in the completion)"
          /(\d+) input tokens/i, // vLLM: "your request has 3000 input tokens"
          /requested (\d+) tokens in the messages/i,
          /messages take (\d+)/i, // this project's gateway
          /request \((\d+) tokens\)/i, // llama-server
        ]);
  const contextWindow =
    typeof fields.n_ctx === "number"
      ? fields.n_ctx
      : firstNumber(error.message, [/maximum context length is (\d+)/i, /context window is (\d+)/i, /context size \((\d+) tokens\)/i]);
  return { promptTokens, contextWindow };
}
