/**
 * The RPC server's thread (rpc-thread.ts): serves JSON-RPC over the chain it reaches through the
 * port it was handed, and tells the thread that started it where it listens, what failed, and
 * what to mint for the faucet.
 */
import { parentPort, workerData } from "node:worker_threads";
import type { Address } from "@solana/kit";
import { ChainPortBackend } from "../chain-thread.ts";
import type { RpcChain, RpcLogger } from "./context.ts";
import type { FromRpcThread, RpcThreadData, ToRpcThread } from "./rpc-thread.ts";
import { startChainRpc } from "./server.ts";

const starter = parentPort!;
const post = (message: FromRpcThread) => starter.postMessage(message);
const data = workerData as RpcThreadData;
const grants = new Map<number, { resolve(signature: string): void; reject(err: Error): void }>();
let nextGrantId = 1;

/** Log lines go to the starting thread, which has the service's logger. */
function logAt(level: "error" | "warn") {
  return (details: object, message: string) => {
    const err = (details as { err?: unknown }).err;
    const shown = err instanceof Error ? { ...details, err: { name: err.name, message: err.message, stack: err.stack } } : details;
    post({ kind: "log", level, details: shown as Record<string, unknown>, message });
  };
}

const logger: RpcLogger = { error: logAt("error"), warn: logAt("warn") };

function grantUsdc(input: { to: string; amount: bigint }): Promise<{ signature: string }> {
  const id = nextGrantId++;
  return new Promise((resolve, reject) => {
    grants.set(id, { resolve: (signature) => resolve({ signature }), reject });
    post({ kind: "grant", id, to: input.to, amount: input.amount });
  });
}

async function serve(): Promise<void> {
  const backend = await ChainPortBackend.open(data.chainPort);
  const chain: RpcChain = { backend, mint: data.mint as Address, grantUsdc };
  const server = await startChainRpc({ chain, port: data.port, host: data.host, faucet: data.faucet, orFreePort: data.orFreePort, limits: data.limits, logger });
  starter.on("message", (message: ToRpcThread) => {
    if (message.kind === "granted") {
      const waiting = grants.get(message.id);
      grants.delete(message.id);
      if (message.signature !== undefined) waiting?.resolve(message.signature);
      else waiting?.reject(new Error(message.error ?? "the faucet failed"));
    } else if (message.kind === "stats") {
      void server.stats().then((stats) => post({ kind: "stats", id: message.id, stats }));
    } else {
      void server.close().then(() => backend.close()).finally(() => post({ kind: "closed" }));
    }
  });
  post({ kind: "listening", url: server.url, wsUrl: server.wsUrl, port: server.port });
}

serve().catch((err: unknown) => post({ kind: "failed", message: (err as Error).message }));
