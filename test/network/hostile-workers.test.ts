/**
 * Workers that attack the gateway through the protocol, against a real gateway on loopback:
 * a request a worker cannot read (the `seed: 1e20` story), a worker that overstates its usage,
 * 500 self-made keys, and a worker that takes jobs and stalls. Each costs the attacker its own
 * standing, never another worker's connection or a caller's credits.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { WebSocket } from "ws";
import { generateKeypair } from "../../src/core/keys.ts";
import { completionCost, TIERS } from "../../src/core/pricing.ts";
import type { ChatRequest } from "../../src/jobs/index.ts";
import { ensureWiringModel } from "../../src/inference/wiring-model.ts";
import { SILENT_TOKENS } from "../../src/inference/token-bounds.ts";
import { Vocabulary } from "../../src/inference/vocabulary.ts";
import { CloseCode, connectUrl } from "../../src/network/protocol.ts";
import { authMessage } from "../../src/network/worker-auth.ts";
import type { WorkerClient, WorkerClientEvent } from "../../src/worker/worker-client.ts";
import { apiGet, creditsRemaining } from "../support/gateway-api.ts";
import { MODEL, tempDir, type TestGateway } from "../support/service.ts";
import { startWorkerFixture, type WorkerFixture } from "../support/worker-fixture.ts";
import { jobConcluded } from "../support/eventually.ts";

const FIRST_TOKEN_TIMEOUT_MS = 400;
const PROBE_TIMEOUT_MS = 1_500;
/** Far above the probe's timeout: only a connection the gateway forgot reaches it. */
const FAKE_DEADLINE_MS = 30_000;
/**
 * A paid request's own deadline, far above its time on a loaded machine: without it the SDK waits
 * ten minutes, and a request the gateway never answers shows only as the whole file timing out.
 */
const PAID = { timeout: 60_000 };

let fixture: WorkerFixture;
let gateway: TestGateway;

before(async () => {
  fixture = await startWorkerFixture({ firstTokenTimeoutMs: FIRST_TOKEN_TIMEOUT_MS, workerProbeTimeoutMs: PROBE_TIMEOUT_MS });
  gateway = fixture.gateway;
});
/**
 * A deadline on each test and on the closing, well inside the file's 600 s timeout: every wait in
 * a test has a deadline of its own, but should a test hang anyway, the failure names the step that
 * hung instead of the whole file timing out.
 */
const TEST_DEADLINE = { timeout: 240_000 };
after(() => fixture.close(), { timeout: 120_000 });

const raw = () => fixture.raw();

function honest(events?: WorkerClientEvent[]): Promise<WorkerClient> {
  return fixture.attach({ concurrency: 1, ...(events ? { onEvent: (e) => events.push(e) } : {}) });
}

async function leave(client: WorkerClient): Promise<void> {
  await client.close();
  for (let i = 0; i < 200 && gateway.service.pool.hosting(MODEL).some((w) => w.address === client.address); i++) await sleep(10);
}

function api<T>(path: string): Promise<{ status: number; body: T }> {
  return apiGet<T>(gateway, path);
}

async function activeWorkers(): Promise<number | undefined> {
  const { body } = await api<{ data: { id: string; svc: { active_workers: number } }[] }>("/models");
  return body.data.find((m) => m.id === MODEL)?.svc.active_workers;
}

function credits(): Promise<number> {
  return creditsRemaining(gateway);
}

const hi = { model: MODEL, messages: [{ role: "user" as const, content: "Hi" }], max_tokens: 5, temperature: 0 };

describe("a request a worker cannot read", () => {
  test("fails that job alone: no failover, every worker stays connected, the model is still served", TEST_DEADLINE, async () => {
    const events: WorkerClientEvent[] = [];
    const [a, b] = [await honest(events), await honest(events)];
    const balance = await credits();
    // Submitted to the job service directly, past the API's validation, which may refuse this
    // seed on its own: the story is what the workers do with a request their parser refuses.
    const request: ChatRequest = {
      model: MODEL,
      messages: hi.messages,
      stream: false,
      includeUsage: false,
      maxTokens: 5,
      temperature: 1,
      topP: 1,
      stop: [],
      frequencyPenalty: 0,
      presencePenalty: 0,
      seed: 1e20,
    };
    for (let i = 0; i < 3; i++) {
      const started = await gateway.service.jobs.start({ wallet: gateway.wallet }, request, new AbortController().signal);
      const firstWorker = started.workerAddress;
      await assert.rejects(async () => {
        for await (const _ of started.events);
      });
      const job = await gateway.service.jobs.getJob(gateway.wallet, started.id);
      assert.equal(job?.status, "failed");
      assert.equal(job?.workerAddress, firstWorker, "the job was not handed to the other worker");
    }
    assert.deepEqual(
      events.filter((e) => e.type === "disconnected" || e.type === "refused"),
      [],
      "no worker lost its connection",
    );
    for (const worker of [a, b]) assert.deepEqual(gateway.service.pool.health(worker.address)?.standing, "good", "a request's fault is no strike");
    assert.equal(await activeWorkers(), 2);
    assert.equal(await credits(), balance, "nothing charged");
    const { data: reply, response } = await gateway.client.chat.completions.create(hi, PAID).withResponse();
    assert.ok(reply.choices[0]!.message.content, "a paid request is served");
    // Its worker signs its settlement before it leaves (a worker that leaves first is not paid).
    await jobConcluded(gateway.service, response.headers.get("x-svc-job-id")!);
    await Promise.all([leave(a), leave(b)]);
  });
});

describe("a worker that overstates its usage", () => {
  test("is charged by the gateway's own count of the relayed text, and the claim is recorded against it", TEST_DEADLINE, async () => {
    const liar = await fixture.raw({ vouched: true });
    await liar.register();
    const text = "Hello there, caller.";
    const claimed = 2_000;
    const served = (async () => {
      const count = await liar.next("count");
      liar.send({ type: "count_result", requestId: count.requestId, tokens: 10 });
      const job = await liar.next("job");
      liar.finish(job.jobId, text, claimed);
    })();
    const balance = await credits();
    const { data: reply, response } = await gateway.client.chat.completions.create({ ...hi, max_tokens: 2_000 }, PAID).withResponse();
    await served;
    const dir = await tempDir();
    const vocabulary = await Vocabulary.load(await ensureWiringModel(dir.path));
    const counted = vocabulary.countTokens(text) + SILENT_TOKENS;
    await vocabulary.close();
    await dir.remove();

    assert.equal(reply.choices[0]!.message.content, text);
    assert.equal(reply.usage!.completion_tokens, counted, "the caller sees the gateway's count");
    await jobConcluded(gateway.service, response.headers.get("x-svc-job-id")!);
    const job = (await api<{ status: string; credits_charged: number; usage: { completion_tokens: number } }>(`/jobs/${response.headers.get("x-svc-job-id")}`)).body;
    assert.equal(job.status, "settled", "the proof of the text still verifies on-chain");
    assert.equal(job.credits_charged, completionCost(TIERS.lite, counted));
    assert.ok(job.credits_charged < completionCost(TIERS.lite, claimed));
    assert.equal(await credits(), balance - job.credits_charged);
    assert.equal(gateway.service.pool.health(liar.signer.address)?.stats.overstated, 1);
    liar.close();
    await liar.closed;
  });
});

describe("a worker that takes jobs and stalls", () => {
  test("is demoted, then dropped; its callers are charged nothing", TEST_DEADLINE, async () => {
    const staller = await fixture.raw({ vouched: true });
    await staller.register();
    // It counts prompts promptly and never sends a token.
    const counting = (async () => {
      for (;;) {
        const count = await staller.next("count", 60_000).catch(() => undefined);
        if (!count) return;
        staller.send({ type: "count_result", requestId: count.requestId, tokens: 10 });
      }
    })();
    const balance = await credits();
    const standings: string[] = [];
    for (let i = 0; i < 4; i++) {
      await assert.rejects(gateway.client.chat.completions.create(hi, PAID), { status: 500 });
      standings.push(gateway.service.pool.health(staller.signer.address)?.standing ?? "gone");
      if (standings.at(-1) === "demoted") {
        assert.equal(await activeWorkers(), 1, "a demoted worker still serves its model: listed, and counted");
        assert.equal((await api("/models/" + MODEL)).status, 200, "its model is still listed while it hosts it");
      }
    }
    assert.deepEqual(standings, ["good", "demoted", "demoted", "gone"]);
    const closed = await staller.closed;
    assert.equal(closed.code, CloseCode.unfit);
    assert.match(closed.reason, /stalling/);
    assert.equal(await credits(), balance);
    assert.equal((await api("/models/" + MODEL)).status, 404);
    await counting;
  });
});

// Last: it spends this IP's handshake allowance, which later connections would need.
describe("500 self-made worker keys", () => {
  test("cannot inflate active_workers: handshakes are limited per IP and no fake passes the probe", TEST_DEADLINE, async () => {
    const real = await honest();
    assert.equal(await activeWorkers(), 1);
    let refused = 0;
    let admittedThenDropped = 0;
    const otherOutcomes: string[] = [];
    let highest = 0;
    let polling = true;
    const poll = (async () => {
      while (polling) {
        highest = Math.max(highest, (await activeWorkers()) ?? 0);
        await sleep(20);
      }
    })();
    await Promise.all(
      Array.from({ length: 500 }, async () => {
        const outcome = await fakeWorker(gateway.service.origin);
        if (outcome === "refused") refused++;
        else if (outcome === CloseCode.unfit) admittedThenDropped++;
        else otherOutcomes.push(String(outcome));
      }),
    );
    polling = false;
    await poll;
    assert.equal(highest, 1, "active_workers never counted a fake");
    assert.equal(await activeWorkers(), 1);
    assert.ok(refused > 400, `most handshakes are refused at the door (${refused} of 500)`);
    assert.deepEqual(otherOutcomes, [], "every fake was refused or failed its probe");
    assert.equal(refused + admittedThenDropped, 500);
    const reply = await gateway.client.chat.completions.create(hi, PAID);
    assert.ok(reply.choices[0]!.message.content, "a paid request is served");
    await leave(real);
  });
});

/**
 * A worker with a valid key and signature and no engine behind it: it never answers the probe.
 * It settles on every outcome, and on none within its deadline: a fake the gateway neither
 * refuses nor closes fails the test by name instead of leaving it waiting.
 */
async function fakeWorker(origin: string): Promise<"refused" | "stuck" | `refused with ${number}` | number> {
  const signer = generateKeypair();
  const ws = new WebSocket(connectUrl(origin));
  return new Promise((resolve) => {
    const deadline = setTimeout(() => {
      resolve("stuck");
      ws.terminate();
    }, FAKE_DEADLINE_MS);
    const settle = (outcome: Awaited<ReturnType<typeof fakeWorker>>) => {
      clearTimeout(deadline);
      resolve(outcome);
    };
    ws.on("unexpected-response", (_request, response) => {
      settle(response.statusCode === 429 ? "refused" : `refused with ${response.statusCode ?? 0}`);
      ws.terminate();
    });
    ws.on("error", () => undefined);
    ws.on("message", (data) => {
      const message = parseMessage(data.toString());
      if (message?.type !== "challenge" || typeof message.challenge !== "string") return;
      const signature = Buffer.from(signer.sign(authMessage(connectUrl(origin).host, message.challenge))).toString("base64");
      ws.send(JSON.stringify({ type: "hello", protocol: 1, address: signer.address, signature, models: [{ id: MODEL, contextWindow: 2048 }], concurrency: 64 }));
    });
    ws.on("close", (code) => settle(code));
  });
}

function parseMessage(text: string): { type?: unknown; challenge?: unknown } | undefined {
  try {
    return JSON.parse(text) as { type?: unknown; challenge?: unknown };
  } catch {
    return undefined;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
