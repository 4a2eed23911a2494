/**
 * A worker driven message by message over a raw `ws` connection, for tests of what the gateway
 * does with workers that misbehave (wrong signatures, bad messages, silence) in ways the real
 * WorkerClient never would. Like the real worker, it signs the settlement of jobs it answered
 * (`done` with an output hash) when the gateway asks (`sign_settlement`), unless told not to.
 */
import { WebSocket } from "ws";
import { generateKeypair, type Signer } from "../../src/core/keys.ts";
import { outputHash, proofMessage } from "../../src/core/proof.ts";
import { connectUrl, type GatewayMessage, type WorkerMessage } from "../../src/network/protocol.ts";
import { authMessage } from "../../src/network/worker-auth.ts";
import { MODEL } from "./service.ts";
import { signSettlementOf } from "./settlement-signing.ts";

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
  /**
   * The next job, answering the prompt counts that come before it with `promptTokens`: the gateway
   * asks for one only when a prompt's length leaves it unsure the prompt fits (JobService.start).
   */
  nextJob(promptTokens?: number, timeoutMs?: number): Promise<Extract<GatewayMessage, { type: "job" }>>;
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

/**
 * `localAddress`: the loopback address it dials from (any of 127.0.0.0/8), to stand for another
 * machine. `signsSettlements: false`: settlements are left in the inbox for the test to answer.
 */
export async function connectRawWorker(origin: string, signer: Signer = generateKeypair(), options: { localAddress?: string; signsSettlements?: boolean } = {}): Promise<RawWorker> {
  const ws = new WebSocket(connectUrl(origin), options.localAddress ? { localAddress: options.localAddress } : {});
  const inbox: GatewayMessage[] = [];
  /** The output hash of each job it answered, by job id: what its settlement signatures cover. */
  const answered = new Map<string, string>();
  let wake: (() => void) | undefined;
  ws.on("message", (data) => {
    const message = JSON.parse(data.toString()) as GatewayMessage;
    if (message.type === "sign_settlement" && options.signsSettlements !== false) return send(settlementAnswer(signer, answered, message));
    inbox.push(message);
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

  function send(message: unknown): void {
    const sent = message as { type?: unknown; jobId?: unknown; outputHash?: unknown };
    if (sent.type === "done" && typeof sent.jobId === "string" && typeof sent.outputHash === "string") answered.set(sent.jobId, sent.outputHash);
    ws.send(JSON.stringify(message));
  }
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
  const nextJob = async (promptTokens = 5, timeoutMs = 5_000): Promise<Extract<GatewayMessage, { type: "job" }>> => {
    for (;;) {
      const message = await next(["count", "job"], timeoutMs);
      if (message.type === "job") return message;
      send({ type: "count_result", requestId: message.requestId, tokens: promptTokens });
    }
  };
  const worker: RawWorker = {
    ws,
    signer,
    challenge,
    send,
    next,
    nextJob,
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

/** A signature over the settlement of jobs it answered, or a refusal naming one it did not. */
function settlementAnswer(signer: Signer, answered: ReadonlyMap<string, string>, request: Extract<GatewayMessage, { type: "sign_settlement" }>): WorkerMessage {
  try {
    const signature = signSettlementOf(signer, answered, { table: request.table, jobs: request.jobs.map((job) => ({ ...job, charge: BigInt(job.charge) })) });
    return { type: "settlement_signature", requestId: request.requestId, signature: Buffer.from(signature).toString("base64") };
  } catch (error) {
    return { type: "settlement_error", requestId: request.requestId, message: (error as Error).message };
  }
}
