/**
 * The JSON-RPC server on a thread of its own, for a gateway whose embedded chain it serves: what
 * RPC callers ask for (reading and encoding accounts, notifications to subscribers) then never
 * runs on the event loop that answers the paid API. The thread reaches the chain through a port to
 * the chain's own thread (ThreadedChainBackend.connectPort); minting test USDC for the faucet
 * needs the service's keys, so it asks this thread.
 */
import { Worker, type MessagePort } from "node:worker_threads";
import { threadModule } from "../../core/index.ts";
import { ThreadedChainBackend } from "../chain-thread.ts";
import type { RpcChain } from "./context.ts";
import type { RpcLimits } from "./limits.ts";
import { startChainRpc, type ChainRpcOptions, type ChainRpcServer, type RpcServerStats } from "./server.ts";

/** What the thread starts with (its workerData). */
export interface RpcThreadData {
  chainPort: MessagePort;
  mint: string;
  port: number;
  host: string | undefined;
  faucet: boolean;
  orFreePort: boolean;
  limits: Partial<RpcLimits> | undefined;
}

export type FromRpcThread =
  | { kind: "listening"; url: string; wsUrl: string; port: number }
  | { kind: "failed"; message: string }
  | { kind: "log"; level: "error" | "warn"; details: Record<string, unknown>; message: string }
  | { kind: "grant"; id: number; to: string; amount: bigint }
  | { kind: "stats"; id: number; stats: RpcServerStats }
  | { kind: "closed" };

export type ToRpcThread =
  | { kind: "granted"; id: number; signature?: string; error?: string }
  | { kind: "stats"; id: number }
  | { kind: "close" };

const THREAD_ENTRY = threadModule(import.meta.url, "rpc-thread");

/**
 * Serves `options.chain` from a thread of its own when it is the embedded chain on its thread;
 * otherwise (a chain in this thread) on this one.
 */
export async function startChainRpcThread(options: ChainRpcOptions): Promise<ChainRpcServer> {
  const { backend } = options.chain;
  if (!(backend instanceof ThreadedChainBackend)) return startChainRpc(options);
  const chainPort = backend.connectPort();
  const data: RpcThreadData = {
    chainPort, mint: options.chain.mint, port: options.port, host: options.host, faucet: options.faucet ?? false, orFreePort: options.orFreePort ?? false, limits: options.limits,
  };
  const worker = new Worker(THREAD_ENTRY, { workerData: data, transferList: [chainPort], execArgv: [] });
  const listening = await new Promise<Extract<FromRpcThread, { kind: "listening" }>>((resolve, reject) => {
    worker.once("error", reject);
    worker.on("message", (message: FromRpcThread) => {
      if (message.kind === "listening") resolve(message);
      else if (message.kind === "failed") reject(new Error(message.message));
      else answerThread(worker, options, message);
    });
  });
  worker.unref();
  // The gateway serves on without it: callers of the RPC see the port closed, the service's own chain calls go on.
  worker.on("error", (err) => options.logger?.error({ err }, "the chain RPC server's thread failed; Solana RPC is not served until the gateway restarts"));
  return {
    url: listening.url,
    wsUrl: listening.wsUrl,
    port: listening.port,
    stats: () => askStats(worker),
    close: () => closeThread(worker),
  };
}

/** What the thread asks of this one: its log lines, and test USDC minted with the service's keys. */
function answerThread(worker: Worker, options: ChainRpcOptions, message: FromRpcThread): void {
  if (message.kind === "log") return options.logger?.[message.level](message.details, message.message);
  if (message.kind !== "grant") return;
  void grant(options.chain, message).then((reply) => worker.postMessage(reply satisfies ToRpcThread));
}

async function grant(chain: RpcChain, ask: Extract<FromRpcThread, { kind: "grant" }>): Promise<ToRpcThread> {
  try {
    return { kind: "granted", id: ask.id, signature: (await chain.grantUsdc({ to: ask.to, amount: ask.amount })).signature };
  } catch (err) {
    return { kind: "granted", id: ask.id, error: (err as Error).message };
  }
}

let nextStatsId = 1;

function askStats(worker: Worker): Promise<RpcServerStats> {
  const id = nextStatsId++;
  return new Promise((resolve) => {
    const onMessage = (message: FromRpcThread) => {
      if (message.kind !== "stats" || message.id !== id) return;
      worker.off("message", onMessage);
      resolve(message.stats);
    };
    worker.on("message", onMessage);
    worker.postMessage({ kind: "stats", id } satisfies ToRpcThread);
  });
}

async function closeThread(worker: Worker): Promise<void> {
  worker.ref();
  const closed = new Promise<void>((resolve) => {
    const onMessage = (message: FromRpcThread) => message.kind === "closed" && resolve();
    worker.on("message", onMessage);
    worker.once("exit", () => resolve());
  });
  worker.postMessage({ kind: "close" } satisfies ToRpcThread);
  await closed;
  await worker.terminate();
}
