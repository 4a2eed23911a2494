/**
 * The chain thread (chain-thread.ts): opens an embedded chain when asked and answers calls in the
 * order they come, from the thread that started it and from any port it was handed (`connect`:
 * the RPC server's thread reads the same chain). Each slot it sends every client the new slot and
 * blockhash; transactions and airdrops only to clients that watch. Once its chain is closed the
 * handed ports are closed, and the thread waits for the next open.
 */
import { parentPort, type MessagePort } from "node:worker_threads";
import { LiteSvmBackend, type LiteSvmBackendOptions } from "./litesvm-backend.ts";
import { THREAD_CALLS, toThreadError, type FromThread, type ToThread } from "./chain-thread.ts";

/** One side that calls the chain: where its replies go, and whether it hears transactions. */
interface Client {
  post(message: FromThread): void;
  forwarding: boolean;
}

const starter: Client = { post: (message) => parentPort!.postMessage(message), forwarding: false };
const handed = new Map<MessagePort, Client>();
const calls = new Set<string>(THREAD_CALLS);
let backend: LiteSvmBackend | undefined;

const clients = (): Client[] => [starter, ...handed.values()];

async function open(options: LiteSvmBackendOptions): Promise<void> {
  if (backend !== undefined) return starter.post({ kind: "open failed", error: toThreadError(new Error("this chain thread already has a chain open")) });
  starter.forwarding = false;
  let opened: LiteSvmBackend;
  try {
    opened = await LiteSvmBackend.open(options);
  } catch (err) {
    return starter.post({ kind: "open failed", error: toThreadError(err) });
  }
  backend = opened;
  opened.watch((event) => {
    if (backend !== opened) return;
    if (event.type === "slot") {
      void opened.latestBlockhash().then((latest) => clients().forEach((c) => c.post({ kind: "slot", slot: event.slot, latest })), () => undefined);
    } else {
      for (const client of clients()) if (client.forwarding) client.post({ kind: "event", event });
    }
  });
  starter.post({ kind: "ready", slot: await opened.getSlot(), latest: await opened.latestBlockhash() });
}

async function answer(client: Client, { id, method, args }: Extract<ToThread, { kind: "call" }>): Promise<void> {
  try {
    if (!calls.has(method)) throw new Error(`the chain thread has no call ${method}`);
    if (backend === undefined) throw new Error("chain backend is closed");
    // Only the thread that opened the chain closes it.
    if (method === "close" && client !== starter) throw new Error("only the chain's owner closes it");
    const target = backend;
    const fn = target[method] as (...a: unknown[]) => Promise<unknown>;
    const value = await fn.apply(target, args);
    if (method === "close" && backend === target) closed();
    client.post({ kind: "reply", id, value });
  } catch (err) {
    client.post({ kind: "fail", id, error: toThreadError(err) });
  }
}

function closed(): void {
  backend = undefined;
  for (const port of handed.keys()) port.close();
  handed.clear();
}

/** A port handed over by the starter: it calls and watches like the starter, on the chain open now. */
async function connect(port: MessagePort): Promise<void> {
  const client: Client = { post: (message) => port.postMessage(message), forwarding: false };
  if (backend === undefined) return void port.close();
  handed.set(port, client);
  port.on("message", (message: ToThread) => receive(client, message));
  port.on("close", () => handed.delete(port));
  client.post({ kind: "ready", slot: await backend.getSlot(), latest: await backend.latestBlockhash() });
}

function receive(client: Client, message: ToThread): void {
  if (message.kind === "watch") client.forwarding = message.on;
  else if (message.kind === "call") void answer(client, message);
}

parentPort!.on("message", (message: ToThread) => {
  if (message.kind === "open") void open(message.options);
  else if (message.kind === "connect") void connect(message.port);
  else receive(starter, message);
});
