/**
 * Trust earned, not assumed, on a real gateway, chain and engine with the operator's seed worker
 * running the wiring model: a worker nobody vouches for is on probation, gets no caller's job and
 * is sold only once its checks beside the seed worker's jobs have proven it; a worker that fails
 * every request costs callers nothing; fresh identities by the hundred from one network neither
 * get in beyond its probation allowance nor slow an honest caller; a "70B" worker alone sells
 * nothing.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { KNOWN_REPLY } from "../../src/inference/index.ts";
import { CloseCode } from "../../src/network/protocol.ts";
import { creditsRemaining } from "../support/gateway-api.ts";
import { until } from "../support/eventually.ts";
import { attachProtocolWorker } from "../support/protocol-worker.ts";
import { connectRawWorker } from "../support/raw-worker.ts";
import { MODEL, migratedTestDb, startTestGateway, testWorker, type TestGateway } from "../support/service.ts";
import { startSybil, type SybilWorker } from "../support/sybil-worker.ts";

const CHECKS = 3;
const ask = (gateway: TestGateway, content = "Hi") => gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content }], temperature: 0, max_tokens: 20 }, { timeout: 60_000 }).withResponse();

async function withSeed(story: (gateway: TestGateway, seed: string) => Promise<void>, options: Parameters<typeof startTestGateway>[0] = {}): Promise<void> {
  const seed = await testWorker();
  const gateway = await startTestGateway({ db: await migratedTestDb(), workers: [seed], credits: 2_000, probationChecks: CHECKS, rateLimit: false, ...options });
  try {
    await story(gateway, seed.address);
  } finally {
    await gateway.close();
  }
}

describe("a worker on probation", () => {
  test("serves no caller until checks beside the seed worker's jobs prove it; then it is sold", async () => {
    await withSeed(async (gateway, seed) => {
      const newcomer = await attachProtocolWorker(gateway.service, { vouched: false, concurrency: 2 });
      try {
        assert.equal(gateway.service.pool.vetting(newcomer.address), "probation");
        assert.equal(gateway.service.pool.activeWorkers(MODEL), 1, "no capacity yet");
        for (let i = 0; i < 4 * CHECKS && gateway.service.pool.vetting(newcomer.address) === "probation"; i++) {
          const { data, response } = await ask(gateway, `Hi ${i}`);
          assert.equal(response.headers.get("x-svc-worker"), seed, "callers are served by the vouched worker only");
          assert.equal(data.choices[0]!.message.content, KNOWN_REPLY);
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        await until(async () => gateway.service.pool.vetting(newcomer.address), (v) => v === "proven", "the newcomer to be proven");
        assert.equal(gateway.service.pool.health(newcomer.address)?.stats.served, CHECKS, "each check it passed counts as a job served");
        assert.equal(gateway.service.pool.activeWorkers(MODEL), 2);
        const servedBy = new Set<string>();
        for (let i = 0; i < 4; i++) servedBy.add((await ask(gateway)).response.headers.get("x-svc-worker")!);
        assert.ok(servedBy.has(newcomer.address), "callers' jobs now go to it too");
      } finally {
        await newcomer.close();
      }
    });
  });

  test("one that answers something else than the seed worker is suspended at its first check", async () => {
    await withSeed(async (gateway, seed) => {
      const liar = await startSybil(gateway.service.origin, { answer: "a cheaper model's answer" });
      try {
        const { response } = await ask(gateway);
        assert.equal(response.headers.get("x-svc-worker"), seed);
        await until(async () => gateway.service.pool.isSuspended(liar.address), Boolean, "the liar's suspension");
        assert.equal(liar.jobs, 1);
      } finally {
        liar.close();
      }
    });
  });
});

describe("a worker that fails every request", () => {
  test("on probation it costs callers nothing and is dropped for its failed checks", async () => {
    await withSeed(async (gateway, seed) => {
      const refuser = await startSybil(gateway.service.origin, "refuse");
      try {
        for (let i = 0; i < 6; i++) assert.equal((await ask(gateway, `Hi ${i}`)).response.headers.get("x-svc-worker"), seed);
        const closed = await refuser.raw.closed;
        assert.equal(closed.code, CloseCode.unfit);
      } finally {
        refuser.close();
      }
    });
  });

  test("once proven, its refusals move callers' requests to another worker and cost it its standing", async () => {
    await withSeed(async (gateway, seed) => {
      const turncoat = await connectRawWorker(gateway.service.origin);
      await turncoat.register();
      let honest = true;
      void (async () => {
        for (;;) {
          const message = await turncoat.next(["count", "job"], 600_000).catch(() => undefined);
          if (message === undefined) return;
          if (message.type === "count") {
            if (honest) turncoat.send({ type: "count_result", requestId: message.requestId, tokens: 12 });
            else turncoat.send({ type: "count_error", requestId: message.requestId, message: "cannot count this prompt" });
          } else if (honest) turncoat.finish(message.jobId, KNOWN_REPLY, 5);
          else turncoat.send({ type: "job_error", jobId: message.jobId, message: "cannot run this request", fault: "request" });
        }
      })();
      try {
        for (let i = 0; i < 4 * CHECKS && gateway.service.pool.vetting(turncoat.signer.address) === "probation"; i++) {
          await ask(gateway, `Hi ${i}`);
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        await until(async () => gateway.service.pool.vetting(turncoat.signer.address), (v) => v === "proven", "the turncoat to be proven");
        honest = false;
        for (let i = 0; i < 8; i++) {
          const { data, response } = await ask(gateway, `Hello ${i}`);
          assert.equal(response.headers.get("x-svc-worker"), seed, "every request ends on the seed worker");
          assert.equal(data.choices[0]!.message.content, KNOWN_REPLY);
        }
        const record = gateway.service.pool.health(turncoat.signer.address)!;
        assert.equal(record.standing, "demoted", "two refusals another worker ran cost it its standing");
        assert.equal(record.stats.failed, 2);
        const next = gateway.service.pool.acquire(MODEL);
        assert.equal(next?.worker.address, seed, "it gets a job only when no good worker is free");
        next?.release();
      } finally {
        turncoat.close();
      }
    });
  });
});

describe("identities by the hundred", () => {
  test("500 stalling keys from 250 addresses of one network: its probation allowance admits 16, an honest caller is served throughout", async () => {
    await withSeed(async (gateway, seed) => {
      const sybils: (SybilWorker | undefined)[] = [];
      const attack = Promise.all(
        Array.from({ length: 500 }, async (_, i) => {
          const localAddress = `127.0.1.${1 + (i % 250)}`;
          sybils.push(await startSybil(gateway.service.origin, "stall", { localAddress }).catch(() => undefined));
        }),
      );
      try {
        const replies = await Promise.all(Array.from({ length: 10 }, (_, i) => ask(gateway, `Hi ${i}`)));
        for (const { data, response } of replies) {
          assert.equal(response.headers.get("x-svc-worker"), seed);
          assert.equal(data.choices[0]!.message.content, KNOWN_REPLY);
        }
        await attack;
        const admitted = sybils.filter((s) => s !== undefined && gateway.service.pool.vetting(s.address) === "probation" && gateway.service.pool.health(s.address));
        assert.ok(admitted.length <= 16, `${admitted.length} on probation from one /24`);
        assert.equal(gateway.service.pool.activeWorkers(MODEL), 1, "none of them is capacity");
        assert.equal((await ask(gateway)).response.headers.get("x-svc-worker"), seed);
      } finally {
        await attack;
        for (const sybil of sybils) sybil?.close();
      }
    });
  });
});

describe("a model only unvouched workers offer", () => {
  test("is not sold: a fresh worker claiming Llama 3.3 70B answers 'Hi' to its entry, and no caller ever pays for that", async () => {
    await withSeed(async (gateway) => {
      const fake = await startSybil(gateway.service.origin, { answer: "Hi" }, { hello: { models: [{ id: "meta-llama/Llama-3.3-70B-Instruct", contextWindow: 131_072 }] } });
      try {
        const balance = await creditsRemaining(gateway);
        const models = (await (await fetch(`${gateway.baseUrl}/models`, { headers: { authorization: `Bearer ${gateway.apiKey}` } })).json()) as { data: { id: string }[] };
        assert.deepEqual(models.data.map((m) => m.id), [MODEL], "not listed");
        const refused = await fetch(`${gateway.baseUrl}/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${gateway.apiKey}`, "content-type": "application/json" },
          body: JSON.stringify({ model: "meta-llama/Llama-3.3-70B-Instruct", messages: [{ role: "user", content: "Hi" }], max_tokens: 4 }),
        });
        assert.equal(refused.status, 503);
        assert.equal(((await refused.json()) as { error: { code: string } }).error.code, "no_workers_available");
        assert.equal(fake.jobs, 0, "it got no job");
        assert.equal(await creditsRemaining(gateway), balance);
      } finally {
        fake.close();
      }
    });
  });
});
