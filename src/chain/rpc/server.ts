/**
 * The embedded chain's Solana JSON-RPC server: JSON-RPC 2.0 over HTTP POST (single calls and
 * batches) and Solana's PubSub over WebSocket on the same port, so `@solana/kit`, wallets and
 * explorers can read and write the chain the service uses. It serves the chain object the service
 * already has open; there is never a second LiteSVM. Every request and connection is bounded
 * (./limits.ts): a client gets an error, never an answer the server must build without limit.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { WebSocketServer } from "ws";
import { RateLimiter, generateKeypair } from "../../core/index.ts";
import { isEmbedded } from "../backend.ts";
import { AddressIndex } from "./address-index.ts";
import type { RpcChain, RpcContext, RpcLogger } from "./context.ts";
import { toJson } from "./encoding.ts";
import { INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, RpcError } from "./errors.ts";
import { DEFAULT_RPC_LIMITS, ResponseBudget, type RpcLimits } from "./limits.ts";
import { methodNamed } from "./methods.ts";
import { Subscriptions } from "./subscriptions.ts";

/** Solana's own validators serve JSON-RPC here. */
export const DEFAULT_RPC_PORT = 8899;

export interface ChainRpcOptions {
  chain: RpcChain;
  /** 0 picks a free port. */
  port: number;
  host?: string;
  /** Development chains only: answer `requestAirdrop` and `requestUsdcAirdrop`. */
  faucet?: boolean;
  /** When `port` is taken, listen on a free one instead of failing (for a default port). */
  orFreePort?: boolean;
  logger?: RpcLogger;
  /** Any of DEFAULT_RPC_LIMITS to change. */
  limits?: Partial<RpcLimits>;
}

export interface RpcServerStats {
  connections: number;
  subscriptions: number;
  requestsInFlight: number;
}

export interface ChainRpcServer {
  /** http://host:port, for `createSolanaRpc`. */
  url: string;
  /** ws://host:port, for `createSolanaRpcSubscriptions`. */
  wsUrl: string;
  port: number;
  /** WebSocket connections and subscriptions open, and HTTP requests being answered. */
  stats(): Promise<RpcServerStats>;
  close(): Promise<void>;
}

interface Request {
  jsonrpc?: unknown;
  id?: unknown;
  method?: unknown;
  params?: unknown;
}

function failure(id: unknown, err: RpcError): unknown {
  const error: Record<string, unknown> = { code: err.code, message: err.message };
  if (err.data !== undefined) error.data = err.data;
  return { jsonrpc: "2.0", id, error };
}

async function answer(ctx: RpcContext, request: Request, logger: RpcLogger | undefined): Promise<unknown> {
  const id = typeof request?.id === "string" || typeof request?.id === "number" ? request.id : null;
  if (request?.jsonrpc !== "2.0" || typeof request.method !== "string") {
    return failure(id, new RpcError(INVALID_REQUEST, "Invalid request"));
  }
  if (request.params !== undefined && !Array.isArray(request.params)) {
    return failure(id, new RpcError(INVALID_REQUEST, "Invalid request: params must be an array"));
  }
  const method = methodNamed(request.method);
  if (!method) return failure(id, new RpcError(METHOD_NOT_FOUND, `Method not found: ${request.method}`));
  try {
    return { jsonrpc: "2.0", id, result: await method(ctx, (request.params as unknown[] | undefined) ?? []) };
  } catch (err) {
    if (err instanceof RpcError) return failure(id, err);
    logger?.error({ err, method: request.method }, "chain rpc method failed");
    return failure(id, new RpcError(INTERNAL_ERROR, `Internal error: ${(err as Error).message}`));
  }
}

/** The body, or null past `maxBytes` (the rest is not read). */
async function readBody(req: IncomingMessage, maxBytes: number): Promise<string | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) return null;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** An HTTP error with a JSON-RPC error body, as clients expect from a node that refuses. */
function refuse(res: ServerResponse, status: number, err: RpcError, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "Content-Type": "application/json", ...headers }).end(toJson(failure(null, err)));
}

/** What the server shares between requests: the chain, its limits, and who asked for what. */
interface Serving {
  ctx: RpcContext;
  limits: RpcLimits;
  perAddress: RateLimiter;
  inFlight: { count: number };
  logger: RpcLogger | undefined;
}

/** A body's answer: one call's, or a batch's, with one budget of account data for all of it. */
async function answerBody(s: Serving, body: string): Promise<unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return failure(null, new RpcError(PARSE_ERROR, "Parse error"));
  }
  const ctx = { ...s.ctx, budget: new ResponseBudget(s.limits.maxResponseDataBytes) };
  if (!Array.isArray(parsed)) return answer(ctx, parsed as Request, s.logger);
  if (parsed.length === 0) return failure(null, new RpcError(INVALID_REQUEST, "Invalid request: empty batch"));
  if (parsed.length > s.limits.maxBatchCalls) return failure(null, new RpcError(INVALID_REQUEST, `Invalid request: a batch holds at most ${s.limits.maxBatchCalls} calls`));
  // One call after another: the budget is spent in order, and a batch never runs its calls all at once.
  const replies: unknown[] = [];
  for (const call of parsed) replies.push(await answer(ctx, call as Request, s.logger));
  return replies;
}

async function handleHttp(s: Serving, req: IncomingMessage, res: ServerResponse): Promise<void> {
  // Browser wallets and explorers call from other origins.
  res.setHeader("Access-Control-Allow-Origin", "*");
  res.setHeader("Access-Control-Allow-Headers", "Content-Type, solana-client");
  if (req.method === "OPTIONS") return void res.writeHead(204).end();
  if (req.method === "GET" && req.url === "/health") return void res.writeHead(200, { "Content-Type": "text/plain" }).end("ok");
  if (req.method !== "POST") return void res.writeHead(405, { Allow: "POST" }).end();
  const retryAfter = s.perAddress.take(req.socket.remoteAddress ?? "");
  if (retryAfter > 0) return refuse(res, 429, new RpcError(429, "Too many requests from this address"), { "Retry-After": String(retryAfter) });
  if (s.inFlight.count >= s.limits.maxRequestsInFlight) return refuse(res, 429, new RpcError(429, "The server is busy; try again in a moment"), { "Retry-After": "1" });
  s.inFlight.count++;
  try {
    const body = await readBody(req, s.limits.maxBodyBytes);
    if (body === null) return refuse(res, 413, new RpcError(INVALID_REQUEST, `Invalid request: the body is larger than ${s.limits.maxBodyBytes} bytes`), { Connection: "close" });
    res.writeHead(200, { "Content-Type": "application/json" }).end(toJson(await answerBody(s, body)));
  } finally {
    s.inFlight.count--;
  }
}

/**
 * The HTTP server, every stage of a request bounded in time: a request (headers and body) must
 * arrive within `requestTimeoutMs`, checked every second; an idle keep-alive connection is closed
 * after 5 s. What Node's parser refuses gets a JSON-RPC error body too.
 */
function httpServer(s: Serving): Server {
  const http = createServer(
    { requestTimeout: s.limits.requestTimeoutMs, headersTimeout: s.limits.requestTimeoutMs, connectionsCheckingInterval: 1_000 },
    (req, res) => {
      handleHttp(s, req, res).catch((err: unknown) => {
        s.logger?.error({ err }, "chain rpc request failed");
        if (!res.headersSent) res.writeHead(500);
        res.end();
      });
    },
  );
  http.keepAliveTimeout = 5_000;
  http.on("clientError", (err: NodeJS.ErrnoException, socket) => {
    if (socket.writable && err.code !== "ECONNRESET") {
      const [status, text] = err.code === "ERR_HTTP_REQUEST_TIMEOUT" ? [408, "Request Timeout"] : err.code === "HPE_HEADER_OVERFLOW" ? [431, "Request Header Fields Too Large"] : [400, "Bad Request"];
      const body = toJson(failure(null, new RpcError(INVALID_REQUEST, `Invalid request: ${text.toLowerCase()}`)));
      socket.write(`HTTP/1.1 ${status} ${text}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
    }
    socket.destroy();
  });
  return http;
}

function listen(http: Server, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    http.once("error", reject);
    http.listen(port, host, () => {
      http.off("error", reject);
      resolve();
    });
  });
}

/** Serves `options.chain`, which must be the embedded chain. */
export async function startChainRpc(options: ChainRpcOptions): Promise<ChainRpcServer> {
  const backend = options.chain.backend;
  if (!isEmbedded(backend)) throw new Error("the JSON-RPC server serves the embedded chain only");
  let addressIndex: Promise<AddressIndex> | undefined;
  const ctx: RpcContext = {
    chain: options.chain,
    backend,
    // A failed build is not kept: the next request tries again.
    addressIndex: () =>
      (addressIndex ??= AddressIndex.build(backend).catch((err: unknown) => {
        addressIndex = undefined;
        throw err;
      })),
    faucet: options.faucet ? generateKeypair() : undefined,
  };
  const limits = { ...DEFAULT_RPC_LIMITS, ...options.limits };
  const serving: Serving = { ctx, limits, perAddress: new RateLimiter({ ratePerSecond: limits.requestsPerSecondPerAddress, burst: limits.requestBurstPerAddress }), inFlight: { count: 0 }, logger: options.logger };
  const http = httpServer(serving);
  const host = options.host ?? "127.0.0.1";
  try {
    await listen(http, options.port, host);
  } catch (err) {
    if (!options.orFreePort || (err as NodeJS.ErrnoException).code !== "EADDRINUSE") throw err;
    await listen(http, 0, host);
  }
  // Attached only once listening: ws re-emits the server's errors, and a taken default port must
  // fall back to a free one rather than surface as ws's unhandled 'error'.
  const subscriptions = new Subscriptions(ctx, limits, serving.perAddress, options.logger);
  const wss = new WebSocketServer({ server: http, maxPayload: limits.maxBodyBytes });
  wss.on("connection", (socket, req) => subscriptions.attach(socket, req.socket.remoteAddress ?? ""));
  const { port } = http.address() as AddressInfo;
  const shown = host.includes(":") ? `[${host}]` : host;
  return {
    url: `http://${shown}:${port}`,
    wsUrl: `ws://${shown}:${port}`,
    port,
    stats: async () => ({ ...subscriptions.stats(), requestsInFlight: serving.inFlight.count }),
    async close() {
      subscriptions.close();
      (await addressIndex?.catch(() => undefined))?.close();
      for (const socket of wss.clients) socket.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
