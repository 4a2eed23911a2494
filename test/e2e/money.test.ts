/**
 * Where the credits go: no overspend under concurrency, every charge mirrored on-chain, the
 * job's on-chain signatures found on the chain with the movements they claim, a forged proof
 * refused by the chain. Runs on PGlite, and on PostgreSQL too when DATABASE_URL is set.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { creditsToBaseUnits } from "../../src/core/units.ts";
import type { Address } from "@solana/kit";
import { ESCROW_PROGRAM, TIER_CODES, escrowPoolAddress } from "../../src/chain/escrow-program/index.ts";
import { checkInvariants } from "../../src/ledger/index.ts";
import { checkJobInvariants } from "../../src/jobs/job-invariants.ts";
import * as money from "../../src/jobs/money.ts";
import { testDatabases } from "../support/db.ts";
import { MODEL, startTestGateway, testWorker, type TestGateway } from "../support/service.ts";
import { ForgingWorker } from "../support/forging-worker.ts";
import { assertChainAgrees, assertWorkerPaidOnChain, escrowStatus } from "../support/chain-checks.ts";
import { jobConcluded, until } from "../support/eventually.ts";

const hi = [{ role: "user" as const, content: "Hi" }];

async function jobOf(gateway: TestGateway, apiKey: string, id: string) {
  const res = await fetch(`${gateway.baseUrl}/jobs/${id}`, { headers: { authorization: `Bearer ${apiKey}` } });
  assert.equal(res.status, 200);
  return (await res.json()) as {
    status: string;
    credits_charged: number;
    worker_address: string;
    usage: { completion_tokens: number };
    on_chain: { escrow_tx: string; settlement_tx: string | null; escrow_address: string; slot: number; proof_hash: string | null; refund_tx?: string | null };
  };
}


for (const backend of testDatabases()) {
  describe(`money on ${backend.name}`, () => {
    let gateway: TestGateway;
    before(async () => {
      gateway = await startTestGateway({ db: await backend.open(), credits: 0, rateLimit: { ratePerSecond: 1000, burst: 1000 } });
    });
    after(() => gateway.close());

    test("50 concurrent requests at a wallet that can pay for exactly 7: 7 pass, 43 get 402", async () => {
      // Lite tier: max_tokens 8 locks cost(8) = 2 credits; 14 credits pay for exactly 7.
      const caller = await gateway.newAccount(14);
      const results = await Promise.allSettled(
        Array.from({ length: 50 }, () => caller.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 8, temperature: 0 })),
      );
      const ok = results.filter((r) => r.status === "fulfilled");
      const refused = results.filter((r) => r.status === "rejected").map((r) => (r as PromiseRejectedResult).reason as unknown);
      assert.equal(ok.length, 7);
      assert.equal(refused.length, 43);
      for (const error of refused) {
        assert.ok(error instanceof OpenAI.APIError && error.status === 402 && error.code === "insufficient_credits", String(error));
        const details = (error.error as { details: { credits_remaining: number; credits_required: number; tier: string } }).details;
        assert.equal(details.credits_required, 2);
        assert.equal(details.tier, "lite");
        assert.ok(details.credits_remaining >= 0 && details.credits_remaining < 2, `credits_remaining ${details.credits_remaining}`);
      }
      // After everything settled: balance + charges = starting balance, to the credit.
      const listed = async () =>
        (await (await fetch(`${gateway.baseUrl}/jobs?limit=100`, { headers: { authorization: `Bearer ${caller.apiKey}` } })).json()) as {
          data: { status: string; credits_charged: number }[];
        };
      // Answered before their settlements confirm: wait for the chain to have them all.
      const jobs = await until(listed, (page) => page.data.every((j) => j.status !== "settling"), "the settlements to confirm");
      assert.equal(jobs.data.length, 7);
      const charged = jobs.data.reduce((sum, j) => sum + j.credits_charged, 0);
      assert.ok(jobs.data.every((j) => j.status === "settled"));
      assert.equal((await money.availableCredits(gateway.service.db, caller.wallet)) + charged, 14);
      await assertChainAgrees(gateway.service, caller.wallet);
      assert.deepEqual(await checkInvariants(gateway.service.db), []);
      assert.deepEqual(await checkJobInvariants(gateway.service.db), []);
    });
  });
}

// An escrow record of the job's own (`--escrow records`): its lock and settlement are the job's
// alone, so each transaction's instructions and transfers are the job's. Escrow tables' receipts
// are checked in escrow-tables.test.ts.
describe("a job with an escrow record of its own", () => {
  let gateway: TestGateway;
  before(async () => {
    gateway = await startTestGateway({ credits: 0, escrowTables: false });
  });
  after(() => gateway.close());

  test("a settled job's transactions are on the chain and moved what they claim", async () => {
    const caller = await gateway.newAccount(100);
    const { data, response } = await caller.client.chat.completions.create({ model: MODEL, messages: hi, temperature: 0, max_tokens: 600 }).withResponse();
    const jobId = response.headers.get("x-svc-job-id")!;
    await jobConcluded(gateway.service, jobId);
    const job = await jobOf(gateway, caller.apiKey, jobId);
    assert.equal(job.status, "settled");
    assert.equal(job.credits_charged, 2);
    assert.equal(job.on_chain.escrow_tx, response.headers.get("x-svc-escrow-tx"));
    assert.equal(job.on_chain.settlement_tx, response.headers.get("x-svc-settlement-tx"));
    assert.match(job.on_chain.proof_hash!, /^sha256:[0-9a-f]{64}$/);
    assert.equal(job.usage.completion_tokens, data.usage!.completion_tokens);
    assert.ok(job.on_chain.slot > 0);

    const { chain } = gateway.service;
    // cost(600) on lite = 2 + ceil(100 / 1000) = 3 credits locked.
    const escrow = await chain.readTransaction(job.on_chain.escrow_tx);
    assert.ok(escrow.ok);
    const lock = escrow.instructions.find((i) => i.kind === "lock");
    assert.deepEqual([lock?.program, lock?.jobId, lock?.tier, lock?.amount], ["escrow", jobId, TIER_CODES.lite, creditsToBaseUnits(3)], "the program's lock");
    assert.equal(lock?.from, chain.creditAccountAddress(caller.wallet));
    assert.equal(lock?.account, job.on_chain.escrow_address);
    const pool = escrowPoolAddress().address;
    assert.deepEqual(escrow.innerInstructions.filter((i) => i.kind === "transfer").map((t) => [t.from, t.to, t.amount]), [
      [chain.creditAccountAddress(caller.wallet), pool, creditsToBaseUnits(3)],
    ]);
    const record = await chain.escrowRecord(jobId);
    assert.equal((await chain.backend.getAccount(job.on_chain.escrow_address as Address))?.owner, ESCROW_PROGRAM, "the escrow account is the program's");

    const settlement = await chain.readTransaction(job.on_chain.settlement_tx!);
    assert.ok(settlement.ok);
    assert.equal(settlement.instructions[0]!.kind, "ed25519", "the proof check comes first");
    assert.equal(settlement.instructions[0]!.message, `${jobId}:${job.on_chain.proof_hash}`);
    const settle = settlement.instructions.find((i) => i.kind === "settle");
    assert.deepEqual([settle?.program, settle?.amount, settle?.publicKey, settle?.proofHash], ["escrow", creditsToBaseUnits(2), job.worker_address, job.on_chain.proof_hash]);
    const transfers = settlement.innerInstructions.filter((i) => i.kind === "transfer" && i.from === pool);
    const to = (address: string) => transfers.find((t) => t.to === address)?.amount;
    assert.equal(to(chain.workerTokenAccount(job.worker_address)), 15_000n, "worker: 75% of 2 credits");
    assert.equal(to(chain.treasuryAddress), 5_000n, "treasury: the other 25%");
    assert.equal(to(chain.creditAccountAddress(caller.wallet)), creditsToBaseUnits(1), "the unused credit returns");
    assert.deepEqual(
      [record?.status, record?.charge, record?.workerPaid, record?.returned, record?.worker, `sha256:${Buffer.from(record!.proofHash).toString("hex")}`],
      ["settled", 20_000n, 15_000n, creditsToBaseUnits(1), job.worker_address, job.on_chain.proof_hash],
      "the program recorded the settlement",
    );
    await assertChainAgrees(gateway.service, caller.wallet);
    assert.ok((await assertWorkerPaidOnChain(gateway.service, job.worker_address)) > 0n);
  });
});

describe("a worker whose proof is forged", () => {
  let gateway: TestGateway;
  before(async () => {
    gateway = await startTestGateway({ workers: [new ForgingWorker(await testWorker())], credits: 50 });
  });
  after(() => gateway.close());

  test("the gateway catches it before settling: no settlement is sent, the job fails and nothing is charged", async () => {
    const jobId = await failedJobId(gateway);
    const job = await jobOf(gateway, gateway.apiKey, jobId);
    assert.deepEqual([job.status, job.credits_charged, job.on_chain.settlement_tx], ["failed", 0, null]);
    const { chain } = gateway.service;
    assert.equal(await escrowStatus(gateway.service, jobId), "refunded");
    assert.ok((await chain.readTransaction(job.on_chain.refund_tx!)).ok);
    assert.equal(await money.availableCredits(gateway.service.db, gateway.wallet), 50);
    await assertChainAgrees(gateway.service, gateway.wallet);
    assert.deepEqual(await checkJobInvariants(gateway.service.db), []);
  });
});

describe("a forged proof past a gateway that does not check it (FAULT INJECTION: skipProofCheck)", () => {
  let gateway: TestGateway;
  before(async () => {
    // Only a job's own escrow record has its worker's proof checked by the program: an escrow
    // table's settlement checks the worker's signature over its whole batch instead.
    gateway = await startTestGateway({ workers: [new ForgingWorker(await testWorker())], credits: 50, skipProofCheck: true, escrowTables: false });
  });
  after(() => gateway.close());

  test("the program refuses the settlement on-chain after the caller was answered: the job fails and the charge goes back", async () => {
    // The caller is answered once the charge is posted and the settlement recorded, before the
    // chain has looked at the proof (DECISIONS "Answering before the chain confirms").
    const { response } = await gateway.client.chat.completions.create({ model: MODEL, messages: hi, temperature: 0 }).withResponse();
    const jobId = response.headers.get("x-svc-job-id")!;
    assert.ok(response.headers.get("x-svc-settlement-tx"));
    assert.ok(Number(response.headers.get("x-svc-credits-remaining")) < 50, "the answer tells the charge as posted");
    await jobConcluded(gateway.service, jobId);
    const job = await jobOf(gateway, gateway.apiKey, jobId);
    assert.equal(job.on_chain.settlement_tx, response.headers.get("x-svc-settlement-tx"));
    assert.equal(job.status, "failed");
    assert.equal(job.credits_charged, 0);
    const { chain } = gateway.service;
    const settlement = await chain.readTransaction(job.on_chain.settlement_tx!);
    assert.equal(settlement.ok, false, "the chain refused the forged proof");
    assert.ok((await chain.readTransaction(job.on_chain.refund_tx!)).ok);
    assert.equal(await money.availableCredits(gateway.service.db, gateway.wallet), 50);
    await assertChainAgrees(gateway.service, gateway.wallet);
    assert.deepEqual(await checkJobInvariants(gateway.service.db), []);
  });
});

/** A request the forging worker serves: answered 500; returns its job id. */
async function failedJobId(gateway: TestGateway): Promise<string> {
  let jobId = "";
  await assert.rejects(gateway.client.chat.completions.create({ model: MODEL, messages: hi, temperature: 0 }), (e: unknown) => {
    if (!(e instanceof OpenAI.InternalServerError) || e.status !== 500) return false;
    jobId = e.headers?.get("x-svc-job-id") ?? "";
    return /did not verify/.test(e.message);
  });
  return jobId;
}

