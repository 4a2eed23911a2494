/**
 * A worker driven message by message over a raw `ws` connection, for tests of what the gateway
 * does with workers that misbehave (wrong signatures, bad messages, silence) in ways the real
 * WorkerClient never would.
 */
import { WebSocket } from "ws";
import { generateKeypair, type Signer } from "../../src/core/keys.ts";
import { outputHash, proofMessage } from "../../src/core/proof.ts";
import { connectUrl, type GatewayMessage, type WorkerMessage } from "../../src/network/protocol.ts";
import { authMessage } from "../../src/network/worker-auth.ts";
import { MODEL } from "./service.ts";

export interface RawWorker {
  ws: WebSocket;
  signer: Signer;
  challenge: Extract<GatewayMessage, { type: "challenge" }>;
  send(message: WorkerMessage | Record<string, unknown>): void;
  /** The next message of this type from the gateway (earlier ones of other types are skipped). */
  next<T extends GatewayMessage["type"]>(type: T | T[], timeoutMs?: number): Promise<Extract<GatewayMessage, { type: T }>>;
  /** How the gateway closed the connection. */
  closed: Promise<{ code: number; reason: string }>;
  /** Answer the challenge with a hello; `sign` defaults to a correct signature. */
  hello(options?: HelloOptions): void;
  /** Hello, then pass the gateway's probe job like an honest worker; resolves with `registered`. */
  register(options?: HelloOptions): Promise<Extract<GatewayMessage, { type: "registered" }>>;
  /** Answer a job with `text` and a valid proof, claiming `completionTokens` (default: one per character). */
  finish(jobId: string, text: string, completionTokens?: number): void;
  /** Stop the heartbeats it sends at the interval the gateway asked for. */
  silence(): void;
  close(): void;
}

export interface HelloOptions {
  models?: { id: string; contextWindow: number }[];
  concurrency?: number;
  signature?: Uint8Array;
  address?: string;
}

/** `localAddress`: the loopback address it dials from (any of 127.0.0.0/8), to stand for another machine. */
export async function connectRawWorker(origin: string, signer: Signer = generateKeypair(), options: { localAddress?: string } = {}): Promise<RawWorker> {
  const ws = new WebSocket(connectUrl(origin), options.localAddress ? { localAddress: options.localAddress } : {});
  const inbox: GatewayMessage[] = [];
  let wake: (() => void) | undefined;
  ws.on("message", (data) => {
    inbox.push(JSON.parse(data.toString()) as GatewayMessage);
    wake?.();
  });
  ws.on("error", () => undefined);
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.once("close", (code, reason) => resolve({ code, reason: reason.toString() })));

  const next = async <T extends GatewayMessage["type"]>(type: T | T[], timeoutMs = 5_000): Promise<Extract<GatewayMessage, { type: T }>> => {
    const deadline = Date.now() + timeoutMs;
    const types: string[] = Array.isArray(type) ? type : [type];
    for (;;) {
      const index = inbox.findIndex((m) => types.includes(m.type));
      if (index >= 0) return inbox.splice(index, 1)[0] as Extract<GatewayMessage, { type: T }>;
      if (ws.readyState === WebSocket.CLOSED) throw new Error(`connection closed while waiting for ${types.join(" or ")}`);
      if (Date.now() > deadline) throw new Error(`no ${types.join(" or ")} message within ${timeoutMs} ms`);
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
  const finish = (jobId: string, text: string, completionTokens = text.length) => {
    send({ type: "delta", jobId, text });
    const hash = outputHash(text);
    const signature = Buffer.from(signer.sign(proofMessage(jobId, hash))).toString("base64");
    send({ type: "done", jobId, finishReason: "stop", usage: { promptTokens: 10, completionTokens }, outputHash: hash, signature });
  };
  const worker: RawWorker = {
    ws,
    signer,
    challenge,
    send,
    next,
    closed,
    hello: (options: HelloOptions = {}) =>
      send({
        type: "hello",
        protocol: 1,
        address: options.address ?? signer.address,
        signature: Buffer.from(options.signature ?? signer.sign(authMessage(host, challenge.challenge))).toString("base64"),
        models: options.models ?? [{ id: MODEL, contextWindow: 2048 }],
        concurrency: options.concurrency ?? 1,
      }),
    register: async (options = {}) => {
      worker.hello(options);
      // One probe job per offered catalog model; the gateway refuses the others before probing.
      for (;;) {
        const message = await next(["registered", "job"], 10_000);
        if (message.type === "registered") return message;
        finish(message.jobId, "ok", 1);
      }
    },
    finish,
    silence: () => clearInterval(heartbeat),
    close: () => {
      clearInterval(heartbeat);
      ws.terminate();
    },
  };
  return worker;
}
