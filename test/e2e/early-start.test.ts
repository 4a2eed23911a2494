/**
 * A job starts on its worker while its admission commits, once the wallet is known to hold the
 * credits; an admission refused after that start stops the worker and leaves no job, no charge
 * and no fault on the worker. A prompt is counted on the worker only when its length leaves its
 * fit open. Runs on PGlite, and on PostgreSQL too when DATABASE_URL is set.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import type { Engine, GenerationRequest } from "../../src/inference/engine.ts";
import { checkJobInvariants } from "../../src/jobs/job-invariants.ts";
import * as money from "../../src/jobs/money.ts";
import { checkInvariants } from "../../src/ledger/index.ts";
import { TRIGGER_WORD } from "../../src/inference/wiring-model.ts";
import type { WorkerClient } from "../../src/worker/worker-client.ts";
import { testDatabases } from "../support/db.ts";
import { until } from "../support/eventually.ts";
import { attachProtocolWorker } from "../support/protocol-worker.ts";
import { MODEL, PROMPT_TO_COUNT, startTestGateway, testEngine, type TestGateway } from "../support/service.ts";

type CountingEngine = Engine & { signals: (AbortSignal | undefined)[]; count?: (begun: () => number) => Promise<number> };

/**
 * The wiring model's engine, keeping the signal of each generation it was asked for, and taking
 * `firstTokenMs` before its output as a model reading its prompt does. `count`, when set, answers
 * prompt counts instead, given how many generations had begun when asked.
 */
function countingEngine(inner: Engine, firstTokenMs: number): CountingEngine {
  const counting: CountingEngine = {
    signals: [] as (AbortSignal | undefined)[],
    contextWindow: inner.contextWindow,
    countPromptTokens: (messages: GenerationRequest["messages"]) => counting.count?.(() => counting.signals.length) ?? inner.countPromptTokens(messages),
    async *generate(request: GenerationRequest, signal?: AbortSignal) {
      counting.signals.push(signal);
      await new Promise((resolve) => setTimeout(resolve, firstTokenMs));
      yield* inner.generate(request, signal);
    },
    close: () => Promise.resolve(),
  };
  return counting;
}

const hi = [{ role: "user" as const, content: "Hi" }];
/** The wiring model's looping reply runs to max_tokens: 1,900 tokens lock 4 credits (lite). */
const looping = [{ role: "user" as const, content: `Say ${TRIGGER_WORD}` }];

for (const backend of testDatabases()) {
  describe(`early start on ${backend.name}`, () => {
    let gateway: TestGateway;
    let engine: CountingEngine;
    let worker: WorkerClient;
    before(async () => {
      // Its first tokens come later than an admission commits, so a refused admission stops a job
      // before its output: 400 ms leaves room for a machine busy with other work, where an
      // admission can take 100 ms.
      engine = countingEngine(await testEngine(), 400);
      // A worker over the protocol, as in production: a job it stops for a reason other than
      // the caller leaving is abandoned, which would count against it were the gateway to blame it.
      // The first test plays another node writing the same ledger, which only a shared PostgreSQL
      // has: this node must not hold the wallets' credits as their only writer.
      gateway = await startTestGateway({ db: await backend.open(), credits: 0, workers: [], soleLedgerWriter: false });
      worker = await attachProtocolWorker(gateway.service, { engines: new Map([[MODEL, engine]]) });
    });
    after(async () => {
      await worker?.close();
      await gateway?.close();
    });

    test("a job refused after its worker started: 402, the worker stopped and not at fault, no job, no charge", async () => {
      const { service } = gateway;
      // Its first job locks 2 of its 6 credits, leaving 4, which this node remembers.
      const caller = await gateway.newAccount(6);
      await caller.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 8, temperature: 0 });
      const generations = engine.signals.length;
      // Another gateway node's job takes 1 credit: this node does not know, and starts the next
      // job, which locks 4, on its worker while the ledger refuses it.
      await money.reserve(service.db, caller.wallet, "job_on_another_node", 1);
      const refused = await caller.client.chat.completions.create({ model: MODEL, messages: looping, max_tokens: 1900, temperature: 0 }).then(
        () => assert.fail("a wallet without the credits was served"),
        (error: unknown) => error,
      );
      assert.ok(refused instanceof OpenAI.APIError && refused.status === 402 && refused.code === "insufficient_credits", String(refused));
      assert.equal(engine.signals.length, generations + 1, "the refused job had started on its worker while its admission committed");
      const jobs = await refusedWithoutBlame(gateway, engine, worker, caller.wallet);

      // The other node's job ends without a charge; the wallet paid for its first job only.
      await money.refund(service.db, { id: "job_on_another_node", wallet: caller.wallet });
      await until(async () => (await service.db.query<{ status: string }>("SELECT status FROM jobs WHERE id = $1", [jobs[0]!.id]))[0]!.status, (s) => s === "settled", "the first job settled");
      assert.equal(await money.availableCredits(service.db, caller.wallet), 6 - (await chargedOf(gateway, caller.wallet)));
      assert.deepEqual(await checkInvariants(service.db), []);
      assert.deepEqual(await checkJobInvariants(service.db), []);
    });

    test("a prompt whose length proves it fits is admitted with no count; a longer one is counted first", async () => {
      const caller = await gateway.newAccount(100);
      const counted: number[] = [];
      engine.count = async () => {
        counted.push(engine.signals.length);
        return 160;
      };
      try {
        const short = await caller.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 8, temperature: 0 });
        assert.deepEqual(counted, [], "no count was asked for a prompt of two bytes");
        assert.equal(short.usage!.prompt_tokens, await testEngine().then((e) => e.countPromptTokens(hi)), "the usage holds the worker's own count");
        const generations = engine.signals.length;
        await caller.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: PROMPT_TO_COUNT }], max_tokens: 8, temperature: 0 });
        assert.deepEqual(counted, [generations], "the longer prompt was counted once, before its generation began");
      } finally {
        delete engine.count;
      }
      await until(async () => (await checkJobInvariants(gateway.service.db)).length, (n) => n === 0, "job invariants hold");
    });
  });
}

/**
 * After a refused job that had begun on `worker`: its generation stopped, its lease given back,
 * the worker in good standing with no failure or stall, and only the wallet's first job in the
 * database, which is returned.
 */
async function refusedWithoutBlame(gateway: TestGateway, engine: { signals: (AbortSignal | undefined)[] }, worker: WorkerClient, wallet: string): Promise<{ id: string }[]> {
  const { service } = gateway;
  const stopped = engine.signals.at(-1)!;
  await until(async () => stopped.aborted, (aborted) => aborted, "the worker stopped the refused job's generation");
  const jobs = await service.db.query<{ id: string }>("SELECT id FROM jobs WHERE wallet = $1", [wallet]);
  assert.equal(jobs.length, 1, "only the wallet's first job exists");
  await until(async () => service.pool.outstanding(worker.address), (n) => n === 0, "the refused job's lease given back");
  const health = service.pool.health(worker.address);
  assert.deepEqual({ standing: health?.standing, failed: health?.stats.failed, stalled: health?.stats.stalled }, { standing: "good", failed: 0, stalled: 0 });
  return jobs;
}

async function chargedOf(gateway: TestGateway, wallet: string): Promise<number> {
  const rows = await gateway.service.db.query<{ charged: number | bigint }>("SELECT coalesce(sum(credits_charged), 0) AS charged FROM jobs WHERE wallet = $1", [wallet]);
  return Number(rows[0]!.charged);
}
