/**
 * What every response gets whichever route answers it: a request id, CORS for browser callers of
 * /v1, a 405 with `Allow` derived from the registered routes, and the spec's error body for the
 * requests that Node's HTTP parser or Fastify's router refuse before any route runs.
 */
import { randomFillSync } from "node:crypto";
import { STATUS_CODES, type IncomingMessage } from "node:http";
import type { Socket } from "node:net";
import type { FastifyReply, FastifyRequest } from "fastify";
import { ApiError } from "../core/index.ts";

export const REQUEST_ID_HEADER = "x-request-id";
/** A client's own request id is echoed only when it is short and plain enough to log as is. */
const SANE_REQUEST_ID = /^[A-Za-z0-9._:=+/-]{1,128}$/;

/** The request's id: the client's `x-request-id` when it sent a sane one, else a new `req_...`. */
export function requestIdFor(raw: IncomingMessage): string {
  const sent = raw.headers[REQUEST_ID_HEADER];
  if (typeof sent === "string" && SANE_REQUEST_ID.test(sent)) return sent;
  return newRequestId();
}

/** A request id's 12 random bytes come from a pool filled 341 ids at a time: one call into OpenSSL per fill, not per request. */
const ID_BYTES = 12;
const idPool = Buffer.alloc(ID_BYTES * 341);
let idPoolOffset = idPool.length;

function newRequestId(): string {
  if (idPoolOffset === idPool.length) {
    randomFillSync(idPool);
    idPoolOffset = 0;
  }
  const id = idPool.toString("hex", idPoolOffset, idPoolOffset + ID_BYTES);
  idPoolOffset += ID_BYTES;
  return `req_${id}`;
}

/** Response headers a browser script may read (everything the API documents on a response). */
const EXPOSED_HEADERS = [
  REQUEST_ID_HEADER,
  "x-svc-job-id",
  "x-svc-escrow-tx",
  "x-svc-worker",
  "x-svc-credits-remaining",
  "x-svc-settlement-tx",
  "retry-after",
].join(", ");
const DEFAULT_ALLOWED_HEADERS = "authorization, content-type, x-request-id";
/** A comma-separated list of HTTP header names (RFC 9110 tokens), as a preflight asks for. */
const HEADER_LIST = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+(\s*,\s*[!#$%&'*+.^_`|~0-9A-Za-z-]+)*$/;

/**
 * CORS is for the key-authenticated API only. Its keys travel in a header, never a cookie, so any
 * origin may call it; the web app's /app/api routes ride on a session cookie and get no CORS.
 */
function isApiPath(url: string): boolean {
  return /^\/v1(?:[/?]|$)/.test(url);
}

/**
 * Set on the raw response so that a reply Fastify sends and a stream a route writes itself
 * (SSE, after `reply.hijack()`) both carry them.
 */
export function setEdgeHeaders(request: FastifyRequest, reply: FastifyReply): void {
  reply.raw.setHeader(REQUEST_ID_HEADER, request.id);
  if (request.headers.origin !== undefined && isApiPath(request.url)) {
    reply.raw.setHeader("access-control-allow-origin", "*");
    reply.raw.setHeader("access-control-expose-headers", EXPOSED_HEADERS);
  }
}

function isPreflight(request: FastifyRequest): boolean {
  const { headers } = request;
  return request.method === "OPTIONS" && headers.origin !== undefined && headers["access-control-request-method"] !== undefined && isApiPath(request.url);
}

/** The routes as registered, to answer a method a path does not take with 405 and its `Allow`. */
export class RouteTable {
  private readonly routes: { pattern: RegExp; methods: Set<string> }[] = [];

  add(url: string, method: string | string[]): void {
    const segments = url.split("/").map((s) => (s.startsWith(":") ? "[^/]+" : s === "*" ? ".*" : s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")));
    const source = `^${segments.join("/").replace(/\/$/, "")}/?$`;
    let route = this.routes.find((r) => r.pattern.source === source);
    if (!route) this.routes.push((route = { pattern: new RegExp(source), methods: new Set() }));
    for (const m of [method].flat()) route.methods.add(m.toUpperCase());
  }

  /** The methods a path takes, or undefined when no route has this path. */
  allowed(path: string): string[] | undefined {
    const methods = new Set(this.routes.filter((r) => r.pattern.test(path)).flatMap((r) => [...r.methods]));
    return methods.size > 0 ? [...methods].sort() : undefined;
  }
}

/** What no route answered: a CORS preflight, a method the path does not take (405), or a 404. */
export function answerUnrouted(routes: RouteTable, request: FastifyRequest, reply: FastifyReply, appUrl: string): FastifyReply {
  const path = request.url.split("?")[0]!;
  const allowed = routes.allowed(path);
  if (allowed && isPreflight(request)) {
    const asked = request.headers["access-control-request-headers"];
    return reply
      .status(204)
      .headers({
        "access-control-allow-methods": allowed.join(", "),
        // Keys are sent in a header, so echoing what the client asks for lets SDKs add their own.
        "access-control-allow-headers": typeof asked === "string" && HEADER_LIST.test(asked) ? asked : DEFAULT_ALLOWED_HEADERS,
        "access-control-max-age": "600",
      })
      .send();
  }
  const error = allowed
    ? new ApiError("method_not_allowed", `${request.method} is not allowed here; use ${allowed.join(" or ")}.`)
    : new ApiError("not_found", `No route matches ${request.method} ${path.slice(0, 200)}.`);
  if (allowed) reply.header("allow", allowed.join(", "));
  return reply.status(error.status).send(error.toBody(appUrl));
}

/** Errors Fastify's router raises before routing (a bad percent-escape, an over-long id). */
export function routerError(error: { code?: string }): ApiError {
  if (error.code === "FST_ERR_MAX_PARAM_LENGTH") {
    // No id the service issues is that long, so the path names nothing.
    return new ApiError("not_found", "No resource has an id that long.");
  }
  return new ApiError("invalid_request", "The URL is malformed (a '%' must start a valid percent-escape).");
}

/**
 * Requests Node's HTTP parser refuses never reach Fastify: a 20 KB header, a broken request line.
 * They still get the spec's error body, then the connection is closed (the parser's state is lost).
 */
export function answerClientError(error: Error & { code?: string; rawPacket?: unknown }, socket: Socket, appUrl: string): void {
  if (error.code === "ECONNRESET" || socket.destroyed) return;
  let apiError: ApiError;
  if (error.code === "HPE_HEADER_OVERFLOW") {
    apiError = new ApiError("headers_too_large", "The request line and headers are larger than 16 KiB.");
  } else if (error.code === "ERR_HTTP_REQUEST_TIMEOUT") {
    apiError = new ApiError("request_timeout", "The request was not received in time.");
  } else {
    apiError = new ApiError("invalid_request", "The request is not valid HTTP/1.1.");
  }
  const body = JSON.stringify(apiError.toBody(appUrl));
  // A HEAD request's answer never has a body, even this one.
  const head = Buffer.isBuffer(error.rawPacket) && error.rawPacket.subarray(0, 5).toString("latin1") === "HEAD ";
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${apiError.status} ${STATUS_CODES[apiError.status]}\r\n` +
        `content-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
        `${REQUEST_ID_HEADER}: ${newRequestId()}\r\nconnection: close\r\n\r\n${head ? "" : body}`,
    );
  }
  socket.destroy();
}
