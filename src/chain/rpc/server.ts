/**
 * The embedded chain's Solana JSON-RPC server: JSON-RPC 2.0 over HTTP POST (single calls and
 * batches) and Solana's PubSub over WebSocket on the same port, so `@solana/kit`, wallets and
 * explorers can read and write the chain the service uses. It serves the chain object the service
 * already has open; there is never a second LiteSVM.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { WebSocketServer } from "ws";
import type { Chain } from "../chain.ts";
import { type Logger, generateKeypair } from "../../core/index.ts";
import { isEmbedded } from "../backend.ts";
import { AddressIndex } from "./address-index.ts";
import type { RpcContext } from "./context.ts";
import { toJson } from "./encoding.ts";
import { INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, RpcError } from "./errors.ts";
import { methodNamed } from "./methods.ts";
import { Subscriptions } from "./subscriptions.ts";

/** Solana's own validators serve JSON-RPC here. */
export const DEFAULT_RPC_PORT = 8899;

/** Far above any Solana request (a transaction is at most 1,232 bytes; batches of them stay small). */
const MAX_BODY_BYTES = 1024 * 1024;

export interface ChainRpcOptions {
  chain: Chain;
  /** 0 picks a free port. */
  port: number;
  host?: string;
  /** Development chains only: answer `requestAirdrop` and `requestUsdcAirdrop`. */
  faucet?: boolean;
  /** When `port` is taken, listen on a free one instead of failing (for a default port). */
  orFreePort?: boolean;
  logger?: Logger;
}

export interface ChainRpcServer {
  /** http://host:port, for `createSolanaRpc`. */
  url: string;
  /** ws://host:port, for `createSolanaRpcSubscriptions`. */
  wsUrl: string;
  port: number;
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

async function answer(ctx: RpcContext, request: Request, logger: Logger | undefined): Promise<unknown> {
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

async function readBody(req: IncomingMessage): Promise<string | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) return null;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}

async function handleHttp(ctx: RpcContext, req: IncomingMessage, res: ServerResponse, logger: Logger | undefined): Promise<void> {
  // Browser wallets and explorers call from other origins.
  res.setHeader("Access-Control-Allow-Origin", "*");
  res.setHeader("Access-Control-Allow-Headers", "Content-Type, solana-client");
  if (req.method === "OPTIONS") return void res.writeHead(204).end();
  if (req.method === "GET" && req.url === "/health") return void res.writeHead(200, { "Content-Type": "text/plain" }).end("ok");
  if (req.method !== "POST") return void res.writeHead(405, { Allow: "POST" }).end();
  const body = await readBody(req);
  if (body === null) return void res.writeHead(413).end();
  let parsed: unknown;
  let reply: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    reply = failure(null, new RpcError(PARSE_ERROR, "Parse error"));
  }
  if (reply === undefined) {
    if (Array.isArray(parsed)) {
      reply = parsed.length === 0
        ? failure(null, new RpcError(INVALID_REQUEST, "Invalid request: empty batch"))
        : await Promise.all(parsed.map((r) => answer(ctx, r as Request, logger)));
    } else {
      reply = await answer(ctx, parsed as Request, logger);
    }
  }
  res.writeHead(200, { "Content-Type": "application/json" }).end(toJson(reply));
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
  const { logger } = options;
  const http = createServer((req, res) => {
    handleHttp(ctx, req, res, logger).catch((err: unknown) => {
      logger?.error({ err }, "chain rpc request failed");
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  const host = options.host ?? "127.0.0.1";
  try {
    await listen(http, options.port, host);
  } catch (err) {
    if (!options.orFreePort || (err as NodeJS.ErrnoException).code !== "EADDRINUSE") throw err;
    await listen(http, 0, host);
  }
  // Attached only once listening: ws re-emits the server's errors, and a taken default port must
  // fall back to a free one rather than surface as ws's unhandled 'error'.
  const subscriptions = new Subscriptions(ctx);
  const wss = new WebSocketServer({ server: http, maxPayload: MAX_BODY_BYTES });
  wss.on("connection", (socket) => subscriptions.attach(socket));
  const { port } = http.address() as AddressInfo;
  const shown = host.includes(":") ? `[${host}]` : host;
  return {
    url: `http://${shown}:${port}`,
    wsUrl: `ws://${shown}:${port}`,
    port,
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
