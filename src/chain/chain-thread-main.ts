/**
 * The chain thread (chain-thread.ts): opens an embedded chain when asked and answers the main
 * thread's calls in the order they come. Each slot it sends the new slot and blockhash;
 * transactions and airdrops only while the main thread has watchers. Once its chain is closed it
 * waits for the next open.
 */
import { parentPort } from "node:worker_threads";
import { LiteSvmBackend, type LiteSvmBackendOptions } from "./litesvm-backend.ts";
import { THREAD_CALLS, toThreadError, type FromThread, type ToThread } from "./chain-thread.ts";

const port = parentPort!;
const post = (message: FromThread) => port.postMessage(message);
const calls = new Set<string>(THREAD_CALLS);
let backend: LiteSvmBackend | undefined;
let forwarding = false;

async function open(options: LiteSvmBackendOptions): Promise<void> {
  if (backend !== undefined) return post({ kind: "open failed", error: toThreadError(new Error("this chain thread already has a chain open")) });
  forwarding = false;
  let opened: LiteSvmBackend;
  try {
    opened = await LiteSvmBackend.open(options);
  } catch (err) {
    return post({ kind: "open failed", error: toThreadError(err) });
  }
  backend = opened;
  opened.watch((event) => {
    if (backend !== opened) return;
    if (event.type === "slot") void opened.latestBlockhash().then((latest) => post({ kind: "slot", slot: event.slot, latest }), () => undefined);
    else if (forwarding) post({ kind: "event", event });
  });
  post({ kind: "ready", slot: await opened.getSlot(), latest: await opened.latestBlockhash() });
}

async function answer({ id, method, args }: Extract<ToThread, { kind: "call" }>): Promise<void> {
  try {
    if (!calls.has(method)) throw new Error(`the chain thread has no call ${method}`);
    if (backend === undefined) throw new Error("chain backend is closed");
    const target = backend;
    const fn = target[method] as (...a: unknown[]) => Promise<unknown>;
    const value = await fn.apply(target, args);
    if (method === "close" && backend === target) backend = undefined;
    post({ kind: "reply", id, value });
  } catch (err) {
    post({ kind: "fail", id, error: toThreadError(err) });
  }
}

port.on("message", (message: ToThread) => {
  if (message.kind === "open") void open(message.options);
  else if (message.kind === "watch") forwarding = message.on;
  else void answer(message);
});
