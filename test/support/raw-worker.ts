/**
 * A worker driven message by message over a raw `ws` connection, for tests of what the gateway
 * does with workers that misbehave (wrong signatures, bad messages, silence) in ways the real
 * WorkerClient never would.
 */
import { WebSocket } from "ws";
import { generateKeypair, type Signer } from "../../src/chain/keys.ts";
import { connectUrl, type GatewayMessage, type WorkerMessage } from "../../src/network/protocol.ts";
import { authMessage } from "../../src/network/worker-auth.ts";
import { MODEL } from "./service.ts";

export interface RawWorker {
  ws: WebSocket;
  signer: Signer;
  challenge: Extract<GatewayMessage, { type: "challenge" }>;
  send(message: WorkerMessage | Record<string, unknown>): void;
  /** The next message of this type from the gateway (earlier ones of other types are skipped). */
  next<T extends GatewayMessage["type"]>(type: T, timeoutMs?: number): Promise<Extract<GatewayMessage, { type: T }>>;
  /** How the gateway closed the connection. */
  closed: Promise<{ code: number; reason: string }>;
  /** Answer the challenge with a hello; `sign` defaults to a correct signature. */
  hello(options?: { models?: { id: string; contextWindow: number }[]; concurrency?: number; signature?: Uint8Array; address?: string }): void;
  /** Stop the heartbeats it sends at the interval the gateway asked for. */
  silence(): void;
  close(): void;
}

export async function connectRawWorker(origin: string, signer: Signer = generateKeypair()): Promise<RawWorker> {
  const ws = new WebSocket(connectUrl(origin));
  const inbox: GatewayMessage[] = [];
  let wake: (() => void) | undefined;
  ws.on("message", (data) => {
    inbox.push(JSON.parse(data.toString()) as GatewayMessage);
    wake?.();
  });
  ws.on("error", () => undefined);
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.once("close", (code, reason) => resolve({ code, reason: reason.toString() })));

  const next = async <T extends GatewayMessage["type"]>(type: T, timeoutMs = 5_000): Promise<Extract<GatewayMessage, { type: T }>> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const index = inbox.findIndex((m) => m.type === type);
      if (index >= 0) return inbox.splice(index, 1)[0] as Extract<GatewayMessage, { type: T }>;
      if (ws.readyState === WebSocket.CLOSED) throw new Error(`connection closed while waiting for ${type}`);
      if (Date.now() > deadline) throw new Error(`no ${type} message within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        wake = resolve;
        setTimeout(resolve, 20);
      });
    }
  };

  const send = (message: unknown) => ws.send(JSON.stringify(message));
  const challenge = await next("challenge");
  const host = connectUrl(origin).host;
  const heartbeat = setInterval(() => ws.readyState === WebSocket.OPEN && send({ type: "heartbeat" }), challenge.heartbeatIntervalMs);
  void closed.then(() => clearInterval(heartbeat));
  return {
    ws,
    signer,
    challenge,
    send,
    next,
    closed,
    hello: (options = {}) =>
      send({
        type: "hello",
        protocol: 1,
        address: options.address ?? signer.address,
        signature: Buffer.from(options.signature ?? signer.sign(authMessage(host, challenge.challenge))).toString("base64"),
        models: options.models ?? [{ id: MODEL, contextWindow: 2048 }],
        concurrency: options.concurrency ?? 1,
      }),
    silence: () => clearInterval(heartbeat),
    close: () => {
      clearInterval(heartbeat);
      ws.terminate();
    },
  };
}
