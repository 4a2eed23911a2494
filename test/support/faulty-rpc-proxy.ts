/**
 * A JSON-RPC proxy that injects the faults a real cluster's RPC shows: a request lost before it
 * arrives, an answer lost after the node acted, 429 and 503 answers, slowness, and a node that
 * accepts a transaction and then never lands it (a leader dropping it). The faults are the point
 * here: they are what a test cannot make the real server (`svc chain serve`) do on demand.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { base58Encode } from "../../src/core/index.ts";

export type Fault =
  | { kind: "pass" }
  /** The connection closes before the request reaches the node. */
  | { kind: "lose-request" }
  /** The node acts, the answer is lost. */
  | { kind: "lose-response" }
  | { kind: "status"; status: number; retryAfterS?: number }
  | { kind: "delay"; ms: number }
  /** sendTransaction answers with the signature but the node never receives the transaction. */
  | { kind: "swallow-send" };

export interface RpcCall {
  method: string;
  params: unknown[];
  /** How many earlier calls of this method the proxy saw. */
  seen: number;
}

export interface FaultyRpcProxy {
  url: string;
  /** Decides each call's fault; replace it to change the weather. */
  fault: (call: RpcCall) => Fault;
  calls(method: string): number;
  close(): Promise<void>;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString()));
    req.on("end", () => resolve(body));
    req.on("error", reject);
  });
}

async function forward(target: string, body: string): Promise<{ status: number; text: string }> {
  const res = await fetch(target, { method: "POST", headers: { "content-type": "application/json" }, body });
  return { status: res.status, text: await res.text() };
}

export async function startFaultyRpcProxy(target: string): Promise<FaultyRpcProxy> {
  const seen = new Map<string, number>();
  const proxy: Omit<FaultyRpcProxy, "url" | "close"> = { fault: () => ({ kind: "pass" }), calls: (method) => seen.get(method) ?? 0 };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readBody(req);
    const request = JSON.parse(body) as { id: unknown; method: string; params?: unknown[] };
    const count = seen.get(request.method) ?? 0;
    seen.set(request.method, count + 1);
    const fault = proxy.fault({ method: request.method, params: request.params ?? [], seen: count });
    if (fault.kind === "lose-request") return void req.socket.destroy();
    if (fault.kind === "status") {
      res.writeHead(fault.status, fault.retryAfterS === undefined ? {} : { "retry-after": String(fault.retryAfterS) });
      return void res.end("busy");
    }
    if (fault.kind === "swallow-send" && request.method === "sendTransaction") {
      // The answer a node gives before the leader drops the transaction: its signature.
      const wire = Buffer.from(String(request.params?.[0]), "base64");
      res.writeHead(200, { "content-type": "application/json" });
      return void res.end(JSON.stringify({ jsonrpc: "2.0", id: request.id, result: base58Encode(wire.subarray(1, 65)) }));
    }
    if (fault.kind === "delay") await new Promise((r) => setTimeout(r, fault.ms));
    let answer: { status: number; text: string };
    try {
      answer = await forward(target, body);
    } catch {
      return void req.socket.destroy(); // the node is down: so is the connection
    }
    if (fault.kind === "lose-response") return void req.socket.destroy();
    res.writeHead(answer.status, { "content-type": "application/json" });
    res.end(answer.text);
  }

  const server: Server = createServer((req, res) => void handle(req, res).catch(() => req.socket.destroy()));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(proxy, {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
}
