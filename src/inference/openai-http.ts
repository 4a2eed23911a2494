/**
 * HTTP to an OpenAI-compatible upstream, over undici's `request` (the client Node's own fetch is
 * built on, without the WHATWG Request, Response and stream objects: a streamed exchange measured
 * about a third of fetch's CPU here). One exchange per request, cut short by the caller's signal,
 * by the engine closing, or by the upstream going quiet for longer than the idle timeout.
 * undici's own header and body timeouts (300 s each) still apply above that.
 */
import { STATUS_CODES } from "node:http";
import type { Readable } from "node:stream";
import { Agent, request } from "undici";
import { UpstreamError, upstreamErrorFromBody } from "./openai-errors.ts";

export type CutReason = "caller" | "closed" | "timeout";

const EXCHANGE_ENDED = new Error("the exchange with the upstream ended");

/**
 * One request's lifetime. The idle timer runs only while the engine waits on the upstream: it is
 * paused while a delta sits with a slow consumer, so backpressure is not mistaken for a dead server.
 */
export class Exchange {
  private readonly controller = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  private readonly unlisten: Array<() => void> = [];
  private ended = false;
  cutBy: CutReason | undefined;

  constructor(
    readonly timeoutMs: number,
    sources: { caller?: AbortSignal | undefined; closed: AbortSignal },
  ) {
    this.watch(sources.closed, "closed");
    this.watch(sources.caller, "caller");
    this.touch();
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** The upstream was heard from: restart the idle timer. */
  touch(): void {
    clearTimeout(this.timer);
    if (this.ended || this.cutBy) return;
    this.timer = setTimeout(() => this.cut("timeout"), this.timeoutMs);
  }

  pause(): void {
    clearTimeout(this.timer);
  }

  /** Done with the request: an unread response body is dropped with its connection. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    clearTimeout(this.timer);
    for (const stop of this.unlisten) stop();
    // A reason made once: abort() without one builds a DOMException with its stack every time,
    // which was 1-2% of a busy node's main thread though nothing reads it after a finished request.
    this.controller.abort(EXCHANGE_ENDED);
  }

  /** `end`, once `body` has ended (UpstreamResponse.release). */
  endAfter(body: Readable): void {
    if (this.ended) return;
    if (body.readableEnded || body.destroyed) return this.end();
    const end = () => this.end();
    clearTimeout(this.timer);
    this.timer = setTimeout(end, RELEASE_GRACE_MS);
    body.once("end", end).once("error", end).resume();
  }

  /** What a failure during this exchange means to the engine's caller. */
  failure(url: string, error: unknown): Error {
    if (this.cutBy === "closed") return new Error("the engine is closed");
    if (this.cutBy === "timeout") return new UpstreamError(`the upstream sent nothing for ${this.timeoutMs} ms (${url})`, null);
    if (error instanceof UpstreamError) return error;
    return new UpstreamError(`the request to ${url} failed: ${describe(error)}`, null, null, undefined, { cause: error });
  }

  private watch(signal: AbortSignal | undefined, reason: CutReason): void {
    if (!signal) return;
    if (signal.aborted) return this.cut(reason);
    const onAbort = () => this.cut(reason);
    signal.addEventListener("abort", onAbort, { once: true });
    this.unlisten.push(() => signal.removeEventListener("abort", onAbort));
  }

  private cut(reason: CutReason): void {
    if (this.ended || this.cutBy) return;
    this.cutBy = reason;
    clearTimeout(this.timer);
    this.controller.abort();
  }
}

/** undici sometimes hides the useful part ("ECONNREFUSED", "other side closed") in the error's cause. */
function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? error.cause : undefined;
  if (!cause) return error.message;
  const code = "code" in cause && typeof cause.code === "string" && !cause.message.includes(cause.code) ? `; ${cause.code}` : "";
  return `${error.message} (${cause.message}${code})`;
}

export interface JsonReply {
  status: number;
  ok: boolean;
  /** The parsed body; undefined when it was not JSON. */
  body: unknown;
  text: string;
}

/** An upstream's answer, as the engine reads it. */
export interface UpstreamResponse {
  status: number;
  contentType: string;
  /** The body's bytes as they arrive; read it or `text()` once. */
  body: AsyncIterable<Uint8Array>;
  text(): Promise<string>;
  /**
   * Ends the exchange of a complete answer whose body may still be open: a stream is read up to
   * `[DONE]`, and the response's end often comes in a later write. That end is awaited in the
   * background, for RELEASE_GRACE_MS at most, so the connection goes back to the pool; a body
   * still open then is dropped with its connection.
   */
  release(): void;
}

/** How long a complete answer's body may stay open before its connection is given up. */
export const RELEASE_GRACE_MS = 1_000;

/** Redirects followed, as fetch follows them (a proxy in front of the server may answer one). */
const MAX_REDIRECTIONS = 5;

const isOk = (status: number) => status >= 200 && status < 300;

export interface UpstreamClientOptions {
  baseUrl: string;
  apiKey: string | undefined;
  timeoutMs: number;
  closed: AbortSignal;
}

export class UpstreamClient {
  /** The OpenAI API root, e.g. http://host:8000/v1 (no trailing slash). */
  readonly baseUrl: string;
  /**
   * The server root. vLLM's /tokenize, llama-server's /props and Ollama's /api/show live beside
   * /v1, not under it.
   */
  readonly rootUrl: string;
  readonly timeoutMs: number;
  private readonly apiKey: string | undefined;
  private readonly closed: AbortSignal;
  /** This upstream's pool of keep-alive connections. */
  private readonly dispatcher = new Agent();

  constructor(options: UpstreamClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.rootUrl = this.baseUrl.replace(/\/v1$/, "");
    this.apiKey = options.apiKey;
    this.timeoutMs = options.timeoutMs;
    this.closed = options.closed;
  }

  api(path: string): string {
    return `${this.baseUrl}${path}`;
  }

  root(path: string): string {
    return `${this.rootUrl}${path}`;
  }

  private headers(accept: string, json: boolean): Record<string, string> {
    const headers: Record<string, string> = { accept };
    if (json) headers["content-type"] = "application/json";
    if (this.apiKey) headers.authorization = `Bearer ${this.apiKey}`;
    return headers;
  }

  /** A small JSON request (discovery, tokenization), read to its end. */
  async json(method: "GET" | "POST", url: string, body?: unknown, signal?: AbortSignal): Promise<JsonReply> {
    const exchange = new Exchange(this.timeoutMs, { caller: signal, closed: this.closed });
    try {
      const response = await this.send(method, url, this.headers("application/json", body !== undefined), body, exchange);
      const text = await response.body.text();
      let parsed: unknown = undefined;
      try {
        parsed = JSON.parse(text);
      } catch {
        // Left undefined: callers treat a non-JSON answer as "this server has no such endpoint".
      }
      return { status: response.statusCode, ok: isOk(response.statusCode), body: parsed, text };
    } catch (error) {
      throw exchange.failure(url, error);
    } finally {
      exchange.end();
    }
  }

  /**
   * Opens a streamed POST. Resolves with the response once its headers are in, or with the
   * upstream's error for a non-2xx answer; the caller reads the body and must end the exchange.
   */
  async stream(url: string, body: unknown, signal?: AbortSignal): Promise<{ response: UpstreamResponse; exchange: Exchange }> {
    const exchange = new Exchange(this.timeoutMs, { caller: signal, closed: this.closed });
    try {
      const answer = await this.send("POST", url, this.headers("text/event-stream, application/json", true), body, exchange);
      const status = answer.statusCode;
      if (!isOk(status)) throw upstreamErrorFromBody(status, await answer.body.text(), STATUS_CODES[status] ?? "");
      const contentType = answer.headers["content-type"];
      const response: UpstreamResponse = {
        status,
        contentType: (Array.isArray(contentType) ? contentType[0] : contentType) ?? "",
        // A reader that stops early (at `data: [DONE]`) leaves the body to `release` or to
        // `Exchange.end`. Node's iterator would destroy it there and then, and with it the
        // connection whenever the response's end had not arrived yet (bench/upstream-streams.ts).
        body: answer.body.iterator({ destroyOnReturn: false }),
        text: () => answer.body.text(),
        release: () => exchange.endAfter(answer.body),
      };
      return { response, exchange };
    } catch (error) {
      const failure = exchange.failure(url, error);
      exchange.end();
      throw failure;
    }
  }

  /** Closes the pool's connections; exchanges still open fail. */
  async close(): Promise<void> {
    await this.dispatcher.destroy();
  }

  private async send(method: "GET" | "POST", url: string, headers: Record<string, string>, body: unknown, exchange: Exchange) {
    const answer = await request(url, {
      method,
      headers,
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      signal: exchange.signal,
      dispatcher: this.dispatcher,
      maxRedirections: MAX_REDIRECTIONS,
    });
    exchange.touch();
    return answer;
  }
}
