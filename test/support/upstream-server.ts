/**
 * A protocol peer for the OpenAI-compatible upstream engine's tests: a node:http server on
 * 127.0.0.1 that answers as vLLM, llama-server (llama.cpp) or Ollama do on the wire. The real
 * servers can't be installed here (CUDA/Python, native builds, model downloads), so this peer
 * reproduces, from their sources and docs, the parts the engine must cope with:
 *
 *  - discovery: vLLM's /v1/models `max_model_len`; llama-server's /props
 *    `default_generation_settings.n_ctx` (and a bigger `n_ctx_train` in /v1/models that must not be
 *    used); Ollama's /api/show `model_info["<arch>.context_length"]` and `num_ctx` parameter;
 *  - tokenizers: vLLM's /tokenize `{model, messages}` -> `{count}`; llama-server's /apply-template
 *    then /tokenize `{content, add_special}` -> `{tokens}` (its prompts get a BOS token);
 *  - where usage appears (its own chunk with empty choices, in the finishing chunk, nowhere), the
 *    finish_reason spelling, the completion-limit field accepted, the error body shape, errors
 *    inside a stream (vLLM's `data: {"error":..}` then [DONE], llama-server's `error:` field);
 *  - the context-length rejections in each server's words, and each one's 404 body.
 *
 * Every event is written in several TCP writes that split lines mid-way (and, for CRLF streams,
 * between CR and LF; for non-ASCII text, inside a UTF-8 character), the tail of one event sharing
 * a write with the start of the next. The "model" is a scripted reply, one token per piece, with a
 * deterministic word-piece tokenizer so token counts are exact.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { ChatMessage } from "../../src/inference/engine.ts";

export type Dialect = "vllm" | "llama-server" | "ollama";
export type ErrorShape = "openai" | "vllm-legacy" | "string" | "detail" | "detail-list" | "text";

export interface UpstreamBehaviour {
  /** The name it serves; vLLM and Ollama reject others, llama-server ignores the field. */
  model: string;
  /** Reported by discovery and enforced the way the dialect enforces it. */
  contextWindow: number;
  /** Whether the discovery endpoint reports the window at all. */
  discovery: boolean;
  /** Ollama only: a `num_ctx` in /api/show's parameters (what Ollama really runs with). */
  ollamaNumCtx: number | undefined;
  /** Whether the dialect's tokenizer endpoints exist (Ollama never has any). */
  tokenizer: boolean;
  /** The scripted reply, one token per piece; the end of the list is end-of-generation. */
  reply: string[];
  /** Repeat the reply until the token limit (for abort tests). */
  loop: boolean;
  /** Tokens per streamed chunk: vLLM's stream_interval packs several into one. */
  tokensPerChunk: number;
  pieceDelayMs: number;
  /** Time before the first token, as a real server spends reading the prompt (JSON answers wait it too). */
  firstTokenDelayMs: number;
  /** Time before /tokenize answers. */
  tokenizeDelayMs: number;
  usage: "separate" | "final-chunk" | "none";
  /** The completion-limit field accepted; the other one is a 400 naming it. */
  tokenField: "max_tokens" | "max_completion_tokens" | "either";
  finishReasons: { stop: string | null; length: string | null };
  errorShape: ErrorShape;
  lineEnding: "\n" | "\r\n";
  dataPrefix: "data: " | "data:";
  /**
   * Each event written in awkward pieces with a pause between them, so parsers meet split lines
   * and characters (the default); off, each event leaves in one write at once, as an instant
   * server's would (the benchmarks).
   */
  splitWrites: boolean;
  /** `: ping` comment lines between events, as proxies and some servers send. */
  keepAlives: boolean;
  sendDone: boolean;
  /** Answer with one JSON completion even when asked to stream. */
  ignoreStream: boolean;
  /** Fail after this many content chunks: an error event, a dropped connection, or a clean end. */
  failAfter: { chunks: number; how: "error-event" | "drop" | "end" } | null;
  /** Send the stream's headers, then nothing. */
  stall: boolean;
  /** After `data: [DONE]`, keep the response open instead of ending it. */
  holdAfterDone: boolean;
  /** llama-server: report a prompt that fills the context as an `error:` event after a 200, as older builds do. */
  contextErrorInStream: boolean;
  apiKey: string | null;
}

const COMMON: Omit<UpstreamBehaviour, "model" | "usage" | "errorShape"> = {
  contextWindow: 4096,
  discovery: true,
  ollamaNumCtx: undefined,
  tokenizer: true,
  reply: ["Grüße", ",", " Welt", "!", " 👋", " Bye", "."],
  loop: false,
  tokensPerChunk: 1,
  pieceDelayMs: 0,
  firstTokenDelayMs: 0,
  tokenizeDelayMs: 0,
  splitWrites: true,
  tokenField: "either",
  finishReasons: { stop: "stop", length: "length" },
  lineEnding: "\n",
  dataPrefix: "data: ",
  keepAlives: false,
  sendDone: true,
  ignoreStream: false,
  failAfter: null,
  stall: false,
  holdAfterDone: false,
  contextErrorInStream: false,
  apiKey: null,
};

const DEFAULTS: Record<Dialect, UpstreamBehaviour> = {
  vllm: { ...COMMON, model: "Qwen/Qwen2.5-0.5B-Instruct", usage: "separate", errorShape: "openai" },
  "llama-server": { ...COMMON, model: "qwen2.5-0.5b-instruct", usage: "final-chunk", errorShape: "openai" },
  ollama: { ...COMMON, model: "qwen2.5:0.5b", usage: "separate", errorShape: "openai", tokenizer: false },
};

// ---- the fake tokenizer: ChatML special tokens count one each, other text splits GPT-2 style ----

const SPECIAL = /(<\|im_start\|>|<\|im_end\|>)/;
const PIECE = / ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]|\s+/gu;

export function fakeTokenCount(text: string): number {
  let count = 0;
  for (const part of text.split(SPECIAL)) {
    if (part === "") continue;
    count += SPECIAL.test(part) ? 1 : (part.match(PIECE)?.length ?? 0);
  }
  return count;
}

export function renderChatMl(messages: ReadonlyArray<{ role: string; content: string }>): string {
  return messages.map((m) => `<|im_start|>${m.role}\n${m.content}<|im_end|>\n`).join("") + "<|im_start|>assistant\n";
}

// ---- generation: the scripted reply under max_tokens and stop sequences ----

interface Step {
  /** Text released by this token; a possible stop sequence's start is held back, as servers do. */
  text: string;
}

interface Generation {
  steps: Generator<Step>;
  result: { tokens: number; finish: "stop" | "length" };
}

function generate(b: UpstreamBehaviour, maxTokens: number, stops: string[]): Generation {
  const result = { tokens: 0, finish: "stop" as "stop" | "length" };
  function* steps(): Generator<Step> {
    let text = "";
    let released = 0;
    for (let i = 0; ; i++) {
      // The limit is checked first: a server stops at max_tokens without sampling the end token.
      if (result.tokens >= maxTokens) {
        result.finish = "length";
        break;
      }
      if (!b.loop && i >= b.reply.length) break;
      text += b.reply[i % b.reply.length]!;
      result.tokens++;
      const hits = stops.map((s) => text.indexOf(s)).filter((at) => at >= 0);
      if (hits.length > 0) {
        yield { text: text.slice(released, Math.min(...hits)) };
        return;
      }
      let held = 0;
      for (const s of stops) {
        for (let n = Math.min(s.length - 1, text.length); n > held; n--) if (text.endsWith(s.slice(0, n))) held = n;
      }
      yield { text: text.slice(released, text.length - held) };
      released = text.length - held;
    }
    if (released < text.length) yield { text: text.slice(released) };
  }
  return { steps: steps(), result };
}

// ---- writing an event stream in awkward pieces ----

class SplitWriter {
  private carry: Buffer = Buffer.alloc(0);
  constructor(
    private readonly res: ServerResponse,
    private readonly split: boolean,
  ) {}

  async send(text: string): Promise<void> {
    if (!this.split) {
      if (!this.res.destroyed) this.res.write(text);
      return;
    }
    const bytes = Buffer.from(text, "utf8");
    const nonAscii = bytes.findIndex((byte) => byte >= 0x80);
    // Inside the first multi-byte character if there is one, else 40% in: mid-line either way.
    const first = nonAscii >= 0 ? nonAscii + 1 : Math.max(1, Math.floor(bytes.length * 0.4));
    const crAt = text.endsWith("\r\n\r\n") ? bytes.length - 4 : -1;
    // Between the CR and LF that end the last line, or 80% in.
    const second = Math.max(first, crAt >= 0 ? crAt + 1 : Math.floor(bytes.length * 0.8));
    await this.write(Buffer.concat([this.carry, bytes.subarray(0, first)]));
    await this.write(bytes.subarray(first, second));
    this.carry = bytes.subarray(second);
  }

  async flush(): Promise<void> {
    await this.write(this.carry);
    this.carry = Buffer.alloc(0);
  }

  private async write(bytes: Buffer): Promise<void> {
    if (bytes.length === 0 || this.res.destroyed) return;
    this.res.write(bytes);
    // A pause, so each write leaves as its own TCP segment rather than being coalesced.
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

// ---- the server ----

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingMessage["headers"];
  body: Record<string, unknown> | undefined;
  /** Resolves true if the client went away before the answer was complete, false once it was. */
  disconnected: Promise<boolean>;
  /** The client's port: the same on two requests when they share a kept-alive connection. */
  clientPort: number | undefined;
}

export interface UpstreamServer {
  dialect: Dialect;
  /** The OpenAI API root, http://127.0.0.1:<port>/v1. */
  baseUrl: string;
  /** Mutable: tests change the behaviour between requests. */
  behaviour: UpstreamBehaviour;
  requests: RecordedRequest[];
  chatRequests(): RecordedRequest[];
  /** The prompt tokens this server counts for a conversation, as its usage reports them. */
  promptTokens(messages: readonly ChatMessage[]): number;
  close(): Promise<void>;
}

type Json = Record<string, unknown>;

function isRecord(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

async function readBody(req: IncomingMessage): Promise<Json | undefined> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  if (chunks.length === 0) return undefined;
  try {
    const parsed: unknown = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    return isRecord(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

export async function startUpstream(dialect: Dialect, overrides: Partial<UpstreamBehaviour> = {}): Promise<UpstreamServer> {
  const behaviour: UpstreamBehaviour = { ...DEFAULTS[dialect], ...overrides };
  const requests: RecordedRequest[] = [];
  let sequence = 0;

  const promptTokens = (messages: ReadonlyArray<{ role: string; content: string }>) =>
    fakeTokenCount(renderChatMl(messages)) + (dialect === "llama-server" ? 1 : 0);

  const sendError = (res: ServerResponse, status: number, message: string, extra: { type: string; param?: string | null; fields?: Json }): void => {
    const b = server.behaviour;
    switch (b.errorShape) {
      case "openai":
        return sendJson(res, status, {
          error: { message, type: extra.type, param: extra.param ?? null, code: dialect === "ollama" ? null : status, ...extra.fields },
        });
      case "vllm-legacy":
        return sendJson(res, status, { object: "error", message, type: extra.type, param: extra.param ?? null, code: status });
      case "string":
        return sendJson(res, status, { error: message });
      case "detail":
        return sendJson(res, status, { detail: message });
      case "detail-list":
        return sendJson(res, status, { detail: [{ type: extra.type, loc: ["body", extra.param ?? "body"], msg: message, input: null }] });
      case "text":
        res.writeHead(status, { "content-type": "text/plain; charset=utf-8" });
        res.end(message);
        return;
    }
  };

  const notFound = (res: ServerResponse): void => {
    if (dialect === "vllm") return sendJson(res, 404, { detail: "Not Found" });
    if (dialect === "llama-server") return sendJson(res, 404, { error: { code: 404, message: "File Not Found", type: "not_found_error" } });
    res.writeHead(404, { "content-type": "text/plain; charset=utf-8" });
    res.end("404 page not found");
  };

  const servesModel = (name: unknown) => {
    const b = server.behaviour;
    if (dialect === "llama-server") return true;
    return name === b.model || (dialect === "ollama" && name === `${b.model}:latest`);
  };

  const handlers: Record<string, (req: IncomingMessage, res: ServerResponse, body: Json | undefined) => Promise<void> | void> = {
    "GET /v1/models": (_req, res) => {
      const b = server.behaviour;
      const created = 1_700_000_000;
      const entry: Json =
        dialect === "vllm"
          ? { id: b.model, object: "model", created, owned_by: "vllm", root: b.model, parent: null, ...(b.discovery ? { max_model_len: b.contextWindow } : {}) }
          : dialect === "llama-server"
            ? { id: b.model, object: "model", created, owned_by: "llamacpp", meta: { n_ctx_train: b.contextWindow * 8, n_vocab: 151_936 } }
            : { id: b.model.includes(":") ? b.model : `${b.model}:latest`, object: "model", created, owned_by: "library" };
      sendJson(res, 200, { object: "list", data: [entry] });
    },
    "GET /props": (_req, res) => {
      const b = server.behaviour;
      if (dialect !== "llama-server") return notFound(res);
      const settings = b.discovery ? { n_ctx: b.contextWindow, params: { n_predict: -1 } } : { params: { n_predict: -1 } };
      sendJson(res, 200, { default_generation_settings: settings, total_slots: 1, model_path: `/models/${b.model}.gguf`, chat_template: "chatml" });
    },
    "POST /api/show": (_req, res, body) => {
      const b = server.behaviour;
      if (dialect !== "ollama") return notFound(res);
      const name = body?.model ?? body?.name;
      if (!servesModel(name)) return sendJson(res, 404, { error: `model '${String(name)}' not found` });
      const parameters = (b.ollamaNumCtx !== undefined ? `num_ctx                        ${b.ollamaNumCtx}\n` : "") + 'stop                           "<|im_end|>"';
      sendJson(res, 200, {
        modelfile: `FROM /models/${b.model}`,
        parameters,
        template: "{{ .Prompt }}",
        details: { format: "gguf", family: "qwen2", parameter_size: "494.03M", quantization_level: "Q4_K_M" },
        model_info: b.discovery
          ? { "general.architecture": "qwen2", "qwen2.context_length": b.contextWindow, "qwen2.embedding_length": 896 }
          : { "general.architecture": "qwen2" },
      });
    },
    "POST /tokenize": async (_req, res, body) => {
      const b = server.behaviour;
      if (dialect === "ollama" || !b.tokenizer) return notFound(res);
      if (b.tokenizeDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, b.tokenizeDelayMs));
      if (dialect === "vllm") {
        let count: number;
        if (Array.isArray(body?.messages)) count = promptTokens(body.messages as ChatMessage[]);
        else if (typeof body?.prompt === "string") count = fakeTokenCount(body.prompt);
        else return sendError(res, 400, "Either prompt or messages is required.", { type: "BadRequestError" });
        return sendJson(res, 200, { count, max_model_len: b.contextWindow, tokens: Array.from({ length: count }, (_, i) => 100 + i) });
      }
      // llama-server reads only `content`; vLLM's body gives it nothing to tokenize, so an empty list.
      const content = typeof body?.content === "string" ? body.content : "";
      const count = content === "" ? 0 : fakeTokenCount(content) + (body?.add_special === true ? 1 : 0);
      sendJson(res, 200, { tokens: Array.from({ length: count }, (_, i) => 100 + i) });
    },
    "POST /apply-template": (_req, res, body) => {
      const b = server.behaviour;
      if (dialect !== "llama-server" || !b.tokenizer) return notFound(res);
      if (!Array.isArray(body?.messages)) return sendError(res, 400, "'messages' is required", { type: "invalid_request_error" });
      sendJson(res, 200, { prompt: renderChatMl(body.messages as ChatMessage[]) });
    },
    "POST /v1/chat/completions": (req, res, body) => chat(req, res, body),
    "POST /chat/completions": (req, res, body) => (dialect === "llama-server" ? chat(req, res, body) : notFound(res)),
  };

  async function chat(_req: IncomingMessage, res: ServerResponse, body: Json | undefined): Promise<void> {
    const b = server.behaviour;
    if (!body || !Array.isArray(body.messages)) return sendError(res, 400, "messages is required", { type: "BadRequestError", param: "messages" });
    if (!servesModel(body.model)) {
      const message = dialect === "ollama" ? `model "${String(body.model)}" not found, try pulling it first` : `The model \`${String(body.model)}\` does not exist.`;
      return sendError(res, 404, message, { type: dialect === "ollama" ? "api_error" : "NotFoundError", param: "model" });
    }
    if (b.tokenField === "max_completion_tokens" && body.max_tokens !== undefined) {
      return sendError(res, 400, "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.", {
        type: "invalid_request_error",
        param: "max_tokens",
      });
    }
    if (b.tokenField === "max_tokens" && body.max_completion_tokens !== undefined) {
      return sendError(res, 400, "Unrecognized request argument supplied: max_completion_tokens", {
        type: "invalid_request_error",
        param: "max_completion_tokens",
      });
    }
    const messages = body.messages as ChatMessage[];
    const prompt = promptTokens(messages);
    const requested = (body.max_tokens ?? body.max_completion_tokens) as number | undefined;
    const maxTokens = requested ?? b.contextWindow - prompt;
    if (dialect === "vllm" && prompt + maxTokens > b.contextWindow) {
      return sendError(
        res,
        400,
        `This model's maximum context length is ${b.contextWindow} tokens. However, you requested ${prompt + maxTokens} tokens ` +
          `(${prompt} in the messages, ${maxTokens} in the completion). Please reduce the length of the messages or completion.`,
        { type: "BadRequestError" },
      );
    }
    const overflow = dialect === "llama-server" && prompt >= b.contextWindow;
    const overflowMessage = `request (${prompt} tokens) exceeds the available context size (${b.contextWindow} tokens), try increasing it`;
    if (overflow && b.contextErrorInStream && body.stream === true) {
      res.writeHead(200, { "content-type": "text/event-stream" });
      const payload = { code: 400, message: overflowMessage, type: "exceed_context_size_error", n_prompt_tokens: prompt, n_ctx: b.contextWindow };
      res.end(`error: ${JSON.stringify(payload)}${b.lineEnding}${b.lineEnding}`);
      return;
    }
    if (overflow) {
      return sendError(res, 400, overflowMessage, {
        type: "exceed_context_size_error",
        fields: { n_prompt_tokens: prompt, n_ctx: b.contextWindow },
      });
    }
    const stops = typeof body.stop === "string" ? [body.stop] : Array.isArray(body.stop) ? (body.stop as string[]) : [];
    const generation = generate(b, maxTokens, stops);
    const id = `chatcmpl-${++sequence}`;
    const created = Math.floor(Date.now() / 1000);
    const usageBody = () => ({
      prompt_tokens: prompt,
      completion_tokens: generation.result.tokens,
      total_tokens: prompt + generation.result.tokens,
    });

    if (b.firstTokenDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, b.firstTokenDelayMs));
    if (body.stream !== true || b.ignoreStream) {
      let content = "";
      for (const step of generation.steps) content += step.text;
      return sendJson(res, 200, {
        id,
        object: "chat.completion",
        created,
        model: b.model,
        choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: b.finishReasons[generation.result.finish] }],
        usage: usageBody(),
      });
    }

    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
    res.flushHeaders();
    if (b.stall) return;
    const le = b.lineEnding;
    const includeUsage = isRecord(body.stream_options) && body.stream_options.include_usage === true;
    const writer = new SplitWriter(res, b.splitWrites);
    let events = 0;
    const event = async (payload: unknown, field: string = b.dataPrefix) => {
      if (b.keepAlives && events > 0) await writer.send(`: ping${le}${le}`);
      events++;
      await writer.send(`${field}${typeof payload === "string" ? payload : JSON.stringify(payload)}${le}${le}`);
    };
    const chunk = (delta: Json, finish: string | null, extra: Json = {}) => ({
      id,
      object: "chat.completion.chunk",
      created,
      model: b.model,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      ...(dialect === "vllm" && includeUsage ? { usage: null } : {}),
      ...extra,
    });

    const fail = async (how: "error-event" | "drop" | "end") => {
      if (how === "drop") {
        await writer.flush();
        res.socket?.destroy();
        return;
      }
      if (how === "error-event") {
        const message = "CUDA error: an illegal memory access was encountered";
        if (dialect === "llama-server") await event({ code: 500, message, type: "server_error" }, "error: ");
        else if (b.errorShape === "vllm-legacy") await event({ object: "error", message, type: "InternalServerError", param: null, code: 500 });
        else await event({ error: { message, type: "InternalServerError", param: null, code: 500 } });
        if (dialect === "vllm") await event("[DONE]");
      }
      await writer.flush();
      res.end();
    };

    await event(chunk({ role: "assistant", content: "" }, null));
    let pending = "";
    let tokensPending = 0;
    let chunksSent = 0;
    for (const step of generation.steps) {
      if (res.destroyed) return;
      pending += step.text;
      tokensPending++;
      if (tokensPending < b.tokensPerChunk) continue;
      if (pending !== "") {
        if (b.failAfter && chunksSent >= b.failAfter.chunks) return fail(b.failAfter.how);
        await event(chunk({ content: pending }, null));
        chunksSent++;
      }
      pending = "";
      tokensPending = 0;
      if (b.pieceDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, b.pieceDelayMs));
    }
    if (res.destroyed) return;
    if (pending !== "") await event(chunk({ content: pending }, null));
    if (b.failAfter) return fail(b.failAfter.how);
    const finish = b.finishReasons[generation.result.finish];
    const timings = dialect === "llama-server" ? { timings: { prompt_n: prompt, predicted_n: generation.result.tokens } } : {};
    await event(chunk({}, finish, b.usage === "final-chunk" ? { usage: usageBody(), ...timings } : timings));
    if (b.usage === "separate" && includeUsage) {
      await event({ id, object: "chat.completion.chunk", created, model: b.model, choices: [], usage: usageBody() });
    }
    if (b.sendDone) await event("[DONE]");
    await writer.flush();
    if (!b.holdAfterDone) res.end();
  }

  const http: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0]!;
    let settle: (gone: boolean) => void = () => undefined;
    const record: RecordedRequest = {
      method: req.method ?? "GET",
      path,
      headers: req.headers,
      body: undefined,
      disconnected: new Promise((resolve) => (settle = resolve)),
      clientPort: req.socket.remotePort,
    };
    res.on("close", () => settle(!res.writableFinished));
    requests.push(record);
    void (async () => {
      record.body = await readBody(req);
      const b = server.behaviour;
      if (b.apiKey !== null && path.startsWith("/v1/") && req.headers.authorization !== `Bearer ${b.apiKey}`) {
        // vLLM's --api-key middleware answers with exactly this body.
        return sendJson(res, 401, { error: "Unauthorized" });
      }
      const handler = handlers[`${record.method} ${path}`];
      if (!handler) return notFound(res);
      await handler(req, res, record.body);
    })().catch((error: unknown) => {
      if (!res.headersSent) sendJson(res, 500, { error: { message: String(error), type: "server_error", code: 500 } });
      else res.destroy();
    });
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const { port } = http.address() as AddressInfo;

  const server: UpstreamServer = {
    dialect,
    baseUrl: `http://127.0.0.1:${port}/v1`,
    behaviour,
    requests,
    chatRequests: () => requests.filter((r) => r.path.endsWith("/chat/completions")),
    promptTokens: (messages) => promptTokens(messages),
    close: async () => {
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
  return server;
}
