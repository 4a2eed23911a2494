/**
 * Fresh keys acting together against an honest worker, on a real gateway, chain and engine: the
 * honest worker is the operator's seed worker running the wiring model; the sybils are protocol
 * workers that pass the gateway's entry and then answer every job "framed" under a valid proof.
 * Whatever their number, their outputs weigh nothing: a caller's dispute backed by them never
 * goes against the honest worker, and neither does an audit. On probation, they never answer a
 * caller; the checks they get beside the seed worker's jobs find them out.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { outputHash } from "../../src/core/proof.ts";
import { creditsToBaseUnits } from "../../src/core/units.ts";
import { KNOWN_REPLY } from "../../src/inference/index.ts";
import { MODEL, migratedTestDb, startTestGateway, testWorker, type TestGateway } from "../support/service.ts";
import { startSybil, type SybilWorker } from "../support/sybil-worker.ts";
import { until } from "../support/eventually.ts";
import type { ServiceOptions } from "../../src/service.ts";

const FRAMED = "framed";
const hi = { model: MODEL, messages: [{ role: "user" as const, content: "Hi" }], temperature: 0 };

interface DisputedJob {
  status: string;
  dispute: { outcome: string | null } | null;
}

async function withSybils(disputes: ServiceOptions["disputes"], story: (gateway: TestGateway, seed: string, sybils: SybilWorker[]) => Promise<void>): Promise<void> {
  const seed = await testWorker();
  const gateway = await startTestGateway({ db: await migratedTestDb(), workers: [seed], credits: 500, disputes });
  const sybils: SybilWorker[] = [];
  try {
    // What the treasury pays an inconclusive dispute back from.
    await gateway.service.chain.grantUsdc({ to: gateway.service.chain.treasuryOwner, amount: creditsToBaseUnits(100) });
    await story(gateway, seed.address, sybils);
  } finally {
    for (const sybil of sybils) sybil.close();
    await gateway.close();
  }
}

async function joinSybils(gateway: TestGateway, sybils: SybilWorker[], count: number): Promise<void> {
  sybils.push(...(await Promise.all(Array.from({ length: count }, () => startSybil(gateway.service.origin, { answer: FRAMED })))));
}

async function dispute(gateway: TestGateway, jobId: string, hash: string): Promise<{ dispute_opened?: boolean }> {
  const res = await fetch(`${gateway.baseUrl}/jobs/${jobId}/dispute`, {
    method: "POST",
    headers: { authorization: `Bearer ${gateway.apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ received_output_hash: hash }),
  });
  return (await res.json()) as { dispute_opened?: boolean };
}

async function jobOf(gateway: TestGateway, id: string): Promise<DisputedJob> {
  return (await (await fetch(`${gateway.baseUrl}/jobs/${id}`, { headers: { authorization: `Bearer ${gateway.apiKey}` } })).json()) as DisputedJob;
}

for (const count of [2, 10]) {
  describe(`${count} sybils`, () => {
    test("a caller's dispute of an honest job with their output's hash is never upheld: it ends inconclusive, nobody is suspended", async () => {
      await withSybils({ windowMs: 5_000, arbitrationWindowMs: 1_500, arbitrationRetryMs: 100, auditShare: 0 }, async (gateway, seed, sybils) => {
        const { data, response } = await gateway.client.chat.completions.create(hi).withResponse();
        assert.equal(response.headers.get("x-svc-worker"), seed);
        assert.equal(data.choices[0]!.message.content, KNOWN_REPLY);
        const jobId = response.headers.get("x-svc-job-id")!;
        await joinSybils(gateway, sybils, count);

        assert.equal((await dispute(gateway, jobId, outputHash(FRAMED))).dispute_opened, true);
        const job = await until(() => jobOf(gateway, jobId), (j) => j.dispute?.outcome != null, "the dispute's outcome");
        assert.equal(job.dispute?.outcome, "inconclusive", "weightless re-executors decide nothing");
        assert.equal(gateway.service.pool.isSuspended(seed), false);
        assert.equal(gateway.service.pool.health(seed)?.standing, "good");
        assert.deepEqual(sybils.map((s) => s.jobs), Array(count).fill(0), "no sybil was asked to arbitrate");
      });
    });

    test("no caller ever gets a sybil's answer; their probation checks against the seed worker find them out; the seed's audits are never fraudulent", async () => {
      await withSybils({ windowMs: 5_000, auditShare: 1 }, async (gateway, seed, sybils) => {
        await joinSybils(gateway, sybils, count);
        assert.equal(gateway.service.pool.activeWorkers(MODEL), 1, "sybils on probation are no capacity");
        const jobIds: string[] = [];
        for (let i = 0; i < 3 * count && sybils.some((s) => !gateway.service.pool.isSuspended(s.address)); i++) {
          const { data, response } = await gateway.client.chat.completions.create({ ...hi, messages: [{ role: "user", content: `Hi ${i}` }] }).withResponse();
          assert.equal(response.headers.get("x-svc-worker"), seed);
          assert.equal(data.choices[0]!.message.content, KNOWN_REPLY);
          jobIds.push(response.headers.get("x-svc-job-id")!);
          // Checks and audits run beside and after the job; one at a time keeps the story in order.
          await until(() => auditOf(gateway, jobIds.at(-1)!), (outcome) => outcome !== null, "the job's audit");
        }
        assert.ok(sybils.every((s) => gateway.service.pool.isSuspended(s.address)), "every sybil failed a check and was suspended");
        assert.ok(sybils.every((s) => s.jobs >= 1), "each was checked with a caller's request");
        const outcomes = await Promise.all(jobIds.map((id) => auditOf(gateway, id)));
        assert.deepEqual([...new Set(outcomes)], ["inconclusive"], "only sybils could re-run the seed's jobs: nothing decided");
        assert.equal(gateway.service.pool.isSuspended(seed), false);
      });
    });
  });
}

async function auditOf(gateway: TestGateway, jobId: string): Promise<string | null> {
  const [row] = await gateway.service.db.query<{ audit_outcome: string | null }>("SELECT audit_outcome FROM jobs WHERE id = $1", [jobId]);
  return row?.audit_outcome ?? null;
}
