/**
 * The gateway's end of the worker protocol, driven over real WebSockets on loopback against a
 * real gateway: who is let in, what a misbehaving or silent worker costs (its own connection and
 * nothing charged to anyone), and the messages of a job's life.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { generateKeypair } from "../../src/core/keys.ts";
import { outputHash, proofMessage } from "../../src/core/proof.ts";
import { CloseCode } from "../../src/network/protocol.ts";
import type { WorkerClient } from "../../src/worker/worker-client.ts";
import { apiGet, creditsRemaining } from "../support/gateway-api.ts";
import { attachProtocolWorker } from "../support/protocol-worker.ts";
import { connectRawWorker, type RawWorker } from "../support/raw-worker.ts";
import { MODEL, type TestGateway } from "../support/service.ts";
import { startWorkerFixture, type WorkerFixture } from "../support/worker-fixture.ts";
import { smallOrderForgery } from "../support/small-order-key.ts";
import { jobConcluded } from "../support/eventually.ts";

const HEARTBEAT_TIMEOUT_MS = 1_000;
const COUNT_TIMEOUT_MS = 1_000;

let fixture: WorkerFixture;
let gateway: TestGateway;
/** Protocol workers a test attached itself; closed at the end too. */
const clients: WorkerClient[] = [];
const raws: RawWorker[] = [];

before(async () => {
  fixture = await startWorkerFixture({ workerHeartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS, workerCountTimeoutMs: COUNT_TIMEOUT_MS });
  gateway = fixture.gateway;
});
after(async () => {
  for (const raw of raws) raw.close();
  await Promise.all(clients.map((c) => c.close()));
  await fixture.close();
});

const raw = () => fixture.raw({ vouched: true });

function api<T>(path: string): Promise<{ status: number; body: T }> {
  return apiGet<T>(gateway, path);
}

/** Play a worker's part up to its first token: take the job (counting its prompt if asked), send one delta. */
async function takeJobAndStart(worker: RawWorker): Promise<string> {
  const job = await worker.nextJob(10);
  worker.send({ type: "delta", jobId: job.jobId, text: "Hel" });
  return job.jobId;
}

function credits(): Promise<number> {
  return creditsRemaining(gateway);
}

function hosting(): string[] {
  return gateway.service.pool.hosting(MODEL).map((w) => w.address);
}

/** Answer the gateway's job (and its count, if asked) like an honest worker, with `text` as the output. */
async function serveJob(worker: RawWorker, text: string): Promise<string> {
  const job = await worker.nextJob(10);
  serveRest(worker, job.jobId, text);
  return job.jobId;
}

/** Finish a job the worker has taken with `text` as one delta and an honest proof. */
function serveRest(worker: RawWorker, jobId: string, text: string): void {
  worker.send({ type: "delta", jobId, text });
  const hash = outputHash(text);
  const signature = worker.signer.sign(proofMessage(jobId, hash));
  worker.send({ type: "done", jobId, finishReason: "stop", usage: { promptTokens: 10, completionTokens: 3 }, outputHash: hash, signature: Buffer.from(signature).toString("base64") });
}

describe("the handshake", () => {
  test("a worker is registered with its catalog models and serves a paid completion", async () => {
    const worker = await raw();
    assert.equal(worker.challenge.protocol, 1);
    assert.ok(Buffer.from(worker.challenge.challenge, "base64url").length >= 32, "a fresh random challenge");
    const registered = await worker.register({ concurrency: 3 });
    assert.equal(registered.address, worker.signer.address);
    assert.deepEqual(registered.models, [{ id: MODEL, contextWindow: 2048 }]);
    assert.deepEqual(hosting(), [worker.signer.address]);
    assert.equal(gateway.service.pool.hosting(MODEL)[0]!.concurrency, 3);
    const listed = await api<{ svc: { active_workers: number; median_latency_ms: number | null } }>(`/models/${MODEL}`);
    assert.equal(listed.body.svc.active_workers, 1);
    assert.equal(typeof listed.body.svc.median_latency_ms, "number", "its probe's time to first token, before any caller's job");

    const [reply, jobId] = await Promise.all([
      gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }] }).withResponse(),
      serveJob(worker, "Hi there"),
    ]);
    assert.equal(reply.data.choices[0]!.message.content, "Hi there");
    assert.equal(reply.response.headers.get("x-svc-worker"), worker.signer.address);
    await jobConcluded(gateway.service, jobId);
    assert.equal((await api<{ status: string }>(`/jobs/${jobId}`)).body.status, "settled", "the worker's proof verified on-chain");
    worker.close();
    await worker.closed;
  });

  test("a wrong challenge signature is refused, and so is a small-order key's", async () => {
    // Signed by another key than the address claims.
    const impostor = await raw();
    const claimed = generateKeypair().address;
    impostor.hello({ address: claimed });
    const closed = await impostor.closed;
    assert.equal(closed.code, CloseCode.badSignature);
    assert.match(closed.reason, /challenge signature does not verify/);

    // The right key over a challenge relayed to another host: the domain separation refuses it.
    const relayed = await raw();
    relayed.hello({ signature: relayed.signer.sign(new TextEncoder().encode(`svc-worker-auth:v1:evil.example:${relayed.challenge.challenge}`)) });
    assert.equal((await relayed.closed).code, CloseCode.badSignature);

    // The identity point as the address, with a signature that fits every message under it.
    const forger = await raw();
    const forgery = smallOrderForgery();
    forger.hello({ address: forgery.address, signature: forgery.signature });
    assert.equal((await forger.closed).code, CloseCode.badSignature);
    assert.ok(![claimed, relayed.signer.address, forgery.address].some((address) => hosting().includes(address)), "none joined the pool");
  });

  test("a model outside the catalog is refused, the catalog ones accepted", async () => {
    const worker = await raw();
    const registered = await worker.register({ models: [{ id: MODEL, contextWindow: 2048 }, { id: "someone/unapproved-model", contextWindow: 8192 }] });
    assert.deepEqual(registered.models.map((m) => m.id), [MODEL]);
    assert.equal(registered.refused.length, 1);
    assert.equal(registered.refused[0]!.id, "someone/unapproved-model");
    assert.match(registered.refused[0]!.reason, /catalog/);
    const { body } = await api<{ data: { id: string }[] }>("/models");
    assert.deepEqual(body.data.map((m) => m.id), [MODEL]);
    worker.close();
    await worker.closed;

    const none = await raw();
    none.hello({ models: [{ id: "someone/unapproved-model", contextWindow: 8192 }] });
    const refused = await none.next("refused");
    assert.equal(refused.refused[0]!.id, "someone/unapproved-model");
    assert.equal((await none.closed).code, CloseCode.noAcceptableModel);
    assert.equal((await api("/models/someone/unapproved-model")).status, 404);
  });

  test("a second connection with the same key replaces the first", async () => {
    const signer = generateKeypair();
    const first = await connectRawWorker(gateway.service.origin, signer);
    raws.push(first);
    await first.register();
    const second = await connectRawWorker(gateway.service.origin, signer);
    raws.push(second);
    await second.register();
    assert.equal((await first.closed).code, CloseCode.replaced);
    assert.equal(hosting().filter((a) => a === signer.address).length, 1, "one pool entry for the address, and it is live");
    second.close();
    await second.closed;
  });
});

describe("malformed messages", () => {
  test("close the sender's connection and nothing else", async () => {
    const cases: Array<[string, (w: RawWorker) => void]> = [
      ["not JSON", (w) => w.ws.send("{oops")],
      ["binary", (w) => w.ws.send(Buffer.from([1, 2, 3]))],
      ["a job message before hello", (w) => w.send({ type: "delta", jobId: "job_x", text: "hi" })],
      ["an unknown type", (w) => w.send({ type: "sudo" })],
      ["a hello with a bad field", (w) => w.send({ type: "hello", protocol: 1, address: w.signer.address, signature: "AAAA", models: [], concurrency: 1 })],
    ];
    for (const [name, misbehave] of cases) {
      const worker = await raw();
      misbehave(worker);
      const closed = await worker.closed;
      assert.equal(closed.code, CloseCode.malformed, name);
      assert.match(closed.reason, /malformed message/, name);
    }

    // After registration: a proof with a malformed hash drops the worker from the pool.
    const worker = await raw();
    await worker.register();
    assert.ok(hosting().includes(worker.signer.address));
    worker.send({ type: "done", jobId: "job_x", finishReason: "stop", usage: { promptTokens: 1, completionTokens: 1 }, outputHash: "md5:abc", signature: "" });
    assert.equal((await worker.closed).code, CloseCode.malformed);
    assert.ok(!hosting().includes(worker.signer.address));

    // The gateway is unharmed: a well-behaved worker joins and serves.
    const client = await attachProtocolWorker(gateway.service);
    clients.push(client);
    const reply = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 3 });
    assert.equal(reply.choices[0]!.finish_reason, "length");
    // Leaving gracefully, it signs that job's settlement first (closed at once, it would go unpaid).
    await client.drain();
  });
});

describe("a job's life over the wire", () => {
  test("a client that goes away cancels the job on its worker; nothing is charged", async () => {
    const worker = await raw();
    await worker.register();
    const balance = await credits();
    const served = takeJobAndStart(worker);
    const abort = new AbortController();
    // Resolves with the response headers, which the gateway sends with the first token.
    await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 100, stream: true }, { signal: abort.signal });
    const jobId = await served;
    abort.abort();
    const cancel = await worker.next("cancel");
    assert.equal(cancel.jobId, jobId);
    assert.match(cancel.reason, /no longer needs/);
    const job = { id: jobId };
    await waitFor(async () => (await api<{ status: string }>(`/jobs/${job.id}`)).body.status === "failed");
    // The refund gives the credits back when it confirms, just after the job reads failed.
    await waitFor(async () => (await credits()) === balance);
    worker.close();
  });

  test("a worker's job error fails the job and charges nothing", async () => {
    const worker = await raw();
    await worker.register();
    const balance = await credits();
    const answer = (async () => {
      const job = await worker.nextJob(10);
      worker.send({ type: "job_error", jobId: job.jobId, message: "out of memory" });
      return job.jobId;
    })();
    await assert.rejects(gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 5 }), { status: 500 });
    const jobId = await answer;
    const job = (await api<{ status: string; credits_charged: number }>(`/jobs/${jobId}`)).body;
    assert.equal(job.status, "failed");
    assert.equal(job.credits_charged, 0);
    assert.equal(await credits(), balance);
    worker.close();
  });

  test("a worker that does not count the prompt in time fails the request before any escrow", async () => {
    const worker = await raw();
    await worker.register();
    const balance = await credits();
    const started = Date.now();
    await assert.rejects(gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }] }), (error: { status: number; message: string }) => {
      assert.equal(error.status, 500);
      assert.match(error.message, /did not count the prompt in time/);
      return true;
    });
    assert.ok(Date.now() - started >= COUNT_TIMEOUT_MS - 50);
    assert.equal(await credits(), balance);
    worker.close();
  });

  test("a JSON request's job says stream false, and an output sent whole in its done is the reply", async () => {
    const worker = await raw();
    await worker.register();
    const text = "All of it at once";
    const answer = (async () => {
      const job = await worker.nextJob(10);
      const hash = outputHash(text);
      const signature = Buffer.from(worker.signer.sign(proofMessage(job.jobId, hash))).toString("base64");
      worker.send({ type: "done", jobId: job.jobId, finishReason: "stop", usage: { promptTokens: 10, completionTokens: 5 }, outputHash: hash, signature, text });
      return job;
    })();
    const completion = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 20 });
    const job = await answer;
    assert.equal(job.stream, false);
    assert.equal(completion.choices[0]!.message.content, text);
    await jobConcluded(gateway.service, job.jobId);
    assert.equal((await api<{ status: string }>(`/jobs/${job.jobId}`)).body.status, "settled");

    const stream = gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 20, stream: true });
    const streamedJob = await worker.nextJob(10);
    assert.equal(streamedJob.stream, undefined, "a streamed job leaves the field out, as gateways always did");
    await serveRest(worker, streamedJob.jobId, "Piece by piece");
    let streamedText = "";
    for await (const chunk of await stream) streamedText += chunk.choices[0]?.delta.content ?? "";
    assert.equal(streamedText, "Piece by piece");
    // Settled before the next test reads the balance.
    await jobConcluded(gateway.service, streamedJob.jobId);
    worker.close();
  });

  test("a settlement notice reaches the worker, which keeps the running total", async () => {
    const events: bigint[] = [];
    const client = await attachProtocolWorker(gateway.service, { onEvent: (e) => e.type === "settled" && events.push(e.earnedBaseUnits) });
    clients.push(client);
    const handle = gateway.service.pool.hosting(MODEL).find((w) => w.address === client.address)!;
    handle.settled!("job_01TEST", 15_000n, "tx1");
    handle.settled!("job_02TEST", 30_000n, "tx2");
    await waitFor(async () => events.length === 2);
    assert.deepEqual(events, [15_000n, 30_000n]);
    assert.equal(client.earnedBaseUnits, 45_000n);
    await client.close();
  });
});

describe("heartbeats", () => {
  test("a silent worker is dropped and its job in flight fails, charging nothing", async () => {
    const worker = await raw();
    await worker.register();
    const balance = await credits();
    const served = takeJobAndStart(worker).then((jobId) => {
      worker.silence();
      return jobId;
    });
    const stream = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 50, stream: true });
    const silentAt = Date.now();
    let text = "";
    await assert.rejects(
      (async () => {
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
      })(),
    );
    assert.equal(text, "Hel");
    const closed = await worker.closed;
    assert.equal(closed.code, CloseCode.timeout);
    assert.match(closed.reason, /no heartbeat/);
    assert.ok(Date.now() - silentAt >= HEARTBEAT_TIMEOUT_MS - 200, "not dropped before the timeout");
    assert.ok(!hosting().includes(worker.signer.address));
    const job = (await api<{ status: string; credits_charged: number }>(`/jobs/${await served}`)).body;
    assert.equal(job.status, "failed");
    assert.equal(await credits(), balance);
  });

  test("a worker that keeps heartbeating stays, idle or not", async () => {
    const client = await attachProtocolWorker(gateway.service);
    clients.push(client);
    await new Promise((resolve) => setTimeout(resolve, HEARTBEAT_TIMEOUT_MS * 1.3));
    assert.ok(hosting().includes(client.address));
    await client.close();
  });
});

async function waitFor(condition: () => Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
