/**
 * The chain thread (chain-thread.ts): opens the embedded chain here and answers the main thread's
 * calls in the order they come. Each slot it sends the new slot and blockhash; transactions and
 * airdrops only while the main thread has watchers.
 */
import { parentPort, workerData } from "node:worker_threads";
import { LiteSvmBackend, type LiteSvmBackendOptions } from "./litesvm-backend.ts";
import { THREAD_CALLS, toThreadError, type FromThread, type ToThread } from "./chain-thread.ts";

const port = parentPort!;
const post = (message: FromThread) => port.postMessage(message);
const calls = new Set<string>(THREAD_CALLS);

async function answer(backend: LiteSvmBackend, { id, method, args }: Extract<ToThread, { kind: "call" }>): Promise<void> {
  try {
    if (!calls.has(method)) throw new Error(`the chain thread has no call ${method}`);
    const fn = backend[method] as (...a: unknown[]) => Promise<unknown>;
    post({ kind: "reply", id, value: await fn.apply(backend, args) });
  } catch (err) {
    post({ kind: "fail", id, error: toThreadError(err) });
  }
}

async function serve(): Promise<void> {
  let backend: LiteSvmBackend;
  try {
    backend = await LiteSvmBackend.open(workerData as LiteSvmBackendOptions);
  } catch (err) {
    return post({ kind: "open failed", error: toThreadError(err) });
  }
  let forwarding = false;
  backend.watch((event) => {
    if (event.type === "slot") void backend.latestBlockhash().then((latest) => post({ kind: "slot", slot: event.slot, latest }), () => undefined);
    else if (forwarding) post({ kind: "event", event });
  });
  port.on("message", (message: ToThread) => {
    if (message.kind === "watch") forwarding = message.on;
    else void answer(backend, message);
  });
  post({ kind: "ready", slot: await backend.getSlot(), latest: await backend.latestBlockhash() });
}

await serve();
