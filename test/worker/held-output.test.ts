/**
 * A job whose caller reads the output only at its end (`stream: false`): the real WorkerClient,
 * serving an OpenAI-compatible upstream, sends what arrives at once in one message and later
 * pieces at most every HELD_OUTPUT_MS, while a streamed job still gets a delta per piece. The
 * gateway here is a WebSocket server on loopback that speaks the protocol's gateway side and
 * records every message the worker sends.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { WebSocketServer, type WebSocket } from "ws";
import { generateKeypair } from "../../src/core/keys.ts";
import { OpenAiEngine } from "../../src/inference/openai-engine.ts";
import { encode, HELD_OUTPUT_MS, parseWorkerMessage, PROTOCOL_VERSION, type GatewayMessage, type WorkerMessage } from "../../src/network/index.ts";
import { WorkerClient } from "../../src/worker/worker-client.ts";
import { HeldOutput } from "../../src/worker/held-output.ts";
import { startUpstream, type UpstreamBehaviour, type UpstreamServer } from "../support/upstream-server.ts";

const MODEL = "Qwen/Qwen3-1.7B";
const REPLY = ["One", " two", " three", " four", "."];

/** A gateway that registers one worker and hands out jobs, recording what the worker sends. */
async function recordingGateway(): Promise<{ origin: string; job(job: Extract<GatewayMessage, { type: "job" }>): Promise<WorkerMessage[]>; close(): Promise<void> }> {
  const server = new WebSocketServer({ host: "127.0.0.1", port: 0 });
  let socket: WebSocket | undefined;
  const received: WorkerMessage[] = [];
  let onMessage = () => {};
  server.on("connection", (ws) => {
    socket = ws;
    ws.send(encode({ type: "challenge", protocol: PROTOCOL_VERSION, challenge: "c".repeat(43), heartbeatIntervalMs: 60_000, heartbeatTimeoutMs: 120_000 }));
    ws.on("message", (data) => {
      const message = parseWorkerMessage(String(data));
      if (message.type === "hello") return ws.send(encode({ type: "registered", address: message.address, models: message.models, refused: [] }));
      received.push(message);
      onMessage();
    });
  });
  await new Promise<void>((resolve) => server.once("listening", resolve));
  const { port } = server.address() as { port: number };
  return {
    origin: `http://127.0.0.1:${port}`,
    async job(job) {
      received.length = 0;
      const ended = new Promise<void>((resolve) => (onMessage = () => received.some((m) => m.type === "done" || m.type === "job_error") && resolve()));
      socket!.send(encode(job));
      await ended;
      return [...received];
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const request = { messages: [{ role: "user" as const, content: "Count" }], maxTokens: 16, temperature: 0, topP: 1, stop: [], frequencyPenalty: 0, presencePenalty: 0 };
let nextJob = 0;
const jobOf = (stream?: boolean): Extract<GatewayMessage, { type: "job" }> => ({ type: "job", jobId: `job_held${nextJob++}`, model: MODEL, request, ...(stream !== undefined ? { stream } : {}) });
const deltas = (messages: WorkerMessage[]) => messages.filter((m) => m.type === "delta");
const outputOf = (messages: WorkerMessage[]) => messages.map((m) => (m.type === "delta" ? m.text : m.type === "done" ? (m.text ?? "") : "")).join("");

describe("a worker's output for a caller reading it at its end", () => {
  let gateway: Awaited<ReturnType<typeof recordingGateway>>;
  const started: Array<{ upstream: UpstreamServer; engine: OpenAiEngine; client: WorkerClient }> = [];

  before(async () => {
    gateway = await recordingGateway();
  });
  after(async () => {
    for (const { client, engine, upstream } of started) {
      await client.close();
      await engine.close();
      await upstream.close();
    }
    await gateway.close();
  });

  async function worker(behaviour: Partial<UpstreamBehaviour>): Promise<void> {
    const upstream = await startUpstream("vllm", { model: "qwen3", reply: REPLY, ...behaviour });
    const engine = await OpenAiEngine.connect({ baseUrl: upstream.baseUrl, model: "qwen3" });
    const client = new WorkerClient({ gateway: gateway.origin, signer: generateKeypair(), engines: new Map([[MODEL, engine]]), concurrency: 2 }).start();
    await client.registered();
    started.push({ upstream, engine, client });
  }

  test("an answer that arrives at once goes in its done, with no delta", async () => {
    await worker({ splitWrites: false });
    const messages = await gateway.job(jobOf(false));
    assert.deepEqual(messages.map((m) => m.type), ["done"]);
    assert.equal(outputOf(messages), REPLY.join(""));
  });

  test("a streamed job still gets a delta per piece, whether or not it says stream", async () => {
    for (const stream of [undefined, true]) {
      const messages = await gateway.job(jobOf(stream));
      assert.deepEqual(deltas(messages).map((m) => m.text), REPLY);
      assert.equal(messages.at(-1)!.type, "done");
      assert.equal((messages.at(-1) as { text?: string }).text, undefined);
    }
  });

  test("a slower answer is sent as it comes, in fewer pieces than it was made of", async () => {
    const pieces = Array.from({ length: 12 }, (_, i) => ` ${i}`);
    await started.at(-1)!.client.close();
    await worker({ splitWrites: false, reply: pieces, pieceDelayMs: 50 });
    const messages = await gateway.job(jobOf(false));
    assert.equal(outputOf(messages), pieces.join(""));
    // 12 pieces over about 550 ms, held for up to HELD_OUTPUT_MS at a time.
    assert.ok(deltas(messages).length >= 1, "the gateway heard of the output before the job ended");
    assert.ok(deltas(messages).length < pieces.length - 1, `${deltas(messages).length} deltas for ${pieces.length} pieces`);
  });
});

describe("HeldOutput", () => {
  test("pieces of one turn go together; later ones wait for the interval; take() ends it", async () => {
    const sent: string[] = [];
    const held = new HeldOutput((text) => sent.push(text), HELD_OUTPUT_MS);
    held.add("a");
    held.add("b");
    assert.deepEqual(sent, []);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(sent, ["ab"]);
    held.add("c");
    await new Promise((resolve) => setTimeout(resolve, HELD_OUTPUT_MS / 4));
    assert.deepEqual(sent, ["ab"], "held within the interval");
    held.add("d");
    assert.equal(held.take(), "cd");
    await new Promise((resolve) => setTimeout(resolve, HELD_OUTPUT_MS * 1.5));
    assert.deepEqual(sent, ["ab"], "nothing is sent after take()");
  });

  test("flush sends what is held at once", () => {
    const sent: string[] = [];
    const held = new HeldOutput((text) => sent.push(text));
    held.add("x");
    held.flush();
    held.flush();
    assert.deepEqual(sent, ["x"]);
  });
});
