/**
 * POST /jobs/{id}/dispute end to end, on a real gateway, chain and engine: the endpoint's answers
 * (matching hashes, a malformed hash, the window, other states, two racing disputes, a bond the
 * wallet cannot cover), arbitration by re-execution on other workers clearing an honest worker
 * (its disputer's bond forfeited), and a worker whose proof names a
 * text the caller never got, past a gateway that settles on the worker's word (FAULT INJECTION:
 * skipProofCheck), found out by arbitration: the caller is paid back and the worker slashed.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Address } from "@solana/kit";
import { decodeDispute, disputeAddress, slotDisputeAddress } from "../../src/chain/escrow-program/index.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import { outputHash } from "../../src/core/proof.ts";
import { MIN_ACTIVE_STAKE } from "../../src/core/payout.ts";
import { creditsToBaseUnits } from "../../src/core/units.ts";
import { newId } from "../../src/core/ids.ts";
import { DISPUTES_PER_WALLET_PER_HOUR, disputeBondCredits } from "../../src/jobs/disputes.ts";
import { checkJobInvariants } from "../../src/jobs/job-invariants.ts";
import { newPendingJob } from "../../src/jobs/job-record.ts";
import { getJob, insertJob } from "../../src/jobs/job-repo.ts";
import * as money from "../../src/jobs/money.ts";
import { TREASURY_ACCOUNT, checkInvariants, getTransfer } from "../../src/ledger/index.ts";
import { WorkerNode } from "../../src/worker/worker-node.ts";
import { assertChainAgrees, escrowStatus } from "../support/chain-checks.ts";
import { LyingWorker } from "../support/lying-worker.ts";
import { OtherModelWorker } from "../support/other-model-worker.ts";
import { MODEL, migratedTestDb, startTestGateway, tempDir, testEngine, testWorker, type TestGateway } from "../support/service.ts";
import { until } from "../support/eventually.ts";
import { keepEvents } from "../support/kept-events.ts";

/** The job's dispute account on the chain (null while none was opened): the job's own, or its slot's. */
async function disputeAccount(gateway: TestGateway, jobId: string) {
  const job = (await getJob(gateway.service.db, jobId))!;
  const address = job.escrowTableId === null ? disputeAddress(jobId).address : slotDisputeAddress(job.escrowAddress as Address, job.escrowTableSlot!).address;
  return gateway.service.chain.backend.getAccount(address);
}

const hi = [{ role: "user" as const, content: "Hi" }];
const DISPUTES = { windowMs: 3_000, arbitrationRetryMs: 100 };

interface DisputedJob {
  status: string;
  credits_charged: number;
  on_chain: { proof_hash: string };
  dispute: { your_hash: string; worker_hash: string; dispute_tx: string; outcome: string | null; resolve_tx: string | null; credits_returned: number | null; bond_credits: number | null } | null;
}

async function dispute(gateway: TestGateway, apiKey: string, jobId: string, hash: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${gateway.baseUrl}/jobs/${jobId}/dispute`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ received_output_hash: hash }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function jobOf(gateway: TestGateway, apiKey: string, id: string): Promise<DisputedJob> {
  const res = await fetch(`${gateway.baseUrl}/jobs/${id}`, { headers: { authorization: `Bearer ${apiKey}` } });
  return (await res.json()) as DisputedJob;
}

/** Waits for the arbitration's outcome on the job (a few seconds at most here). */
async function outcomeOf(gateway: TestGateway, apiKey: string, id: string): Promise<DisputedJob> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const job = await jobOf(gateway, apiKey, id);
    if (job.dispute?.outcome || Date.now() > deadline) return job;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A completion and what the caller received: its job id and the hash of its text. */
async function completed(gateway: Pick<TestGateway, "client">) {
  const { data, response } = await gateway.client.chat.completions.create({ model: MODEL, messages: hi, temperature: 0 }).withResponse();
  return { jobId: response.headers.get("x-svc-job-id")!, receivedHash: outputHash(data.choices[0]!.message.content ?? "") };
}

describe("disputes against honest workers", () => {
  let gateway: TestGateway;
  before(async () => {
    gateway = await startTestGateway({ db: await migratedTestDb(), workers: [await testWorker(), await testWorker(), await testWorker()], credits: 100, disputes: DISPUTES });
  });
  after(() => gateway.close());

  test("the caller's hash equal to the worker's: 200, no dispute, nothing changes", async () => {
    const { jobId, receivedHash } = await completed(gateway);
    const answer = await dispute(gateway, gateway.apiKey, jobId, receivedHash);
    assert.equal(answer.status, 200);
    assert.deepEqual(answer.body, { job_id: jobId, dispute_opened: false, your_hash: receivedHash, worker_hash: receivedHash });
    const job = await jobOf(gateway, gateway.apiKey, jobId);
    assert.deepEqual([job.status, job.dispute], ["settled", null]);
  });

  test("a malformed hash is 400 naming the field; someone else's job is 404; a job not settled is 409", async () => {
    const { jobId } = await completed(gateway);
    for (const bad of ["sha256:ABC", "md5:0123", 12, null]) {
      const answer = await dispute(gateway, gateway.apiKey, jobId, bad);
      assert.equal(answer.status, 400, String(bad));
      assert.equal((answer.body.error as { param: string }).param, "received_output_hash");
    }
    const other = await gateway.newAccount(10);
    assert.equal((await dispute(gateway, other.apiKey, jobId, outputHash("x"))).status, 404);
    const pending = newPendingJob({ id: newId("job"), wallet: gateway.wallet, model: MODEL, tier: "lite", creditsLocked: 2, maxTokens: 10, promptTokens: 1, escrowAddress: "none", escrowTx: "none" });
    await insertJob(gateway.service.db, pending);
    const refused = await dispute(gateway, gateway.apiKey, pending.id, outputHash("x"));
    assert.deepEqual([refused.status, (refused.body.error as { code: string }).code], [409, "conflict"]);
    await gateway.service.db.query("DELETE FROM jobs WHERE id = $1", [pending.id]);
  });

  test("an honest worker disputed with a wrong hash: the dispute opens on-chain holding a bond, re-execution rejects it, the bond goes to the treasury", async () => {
    const { jobId, receivedHash } = await completed(gateway);
    const { credits_charged: charged } = await jobOf(gateway, gateway.apiKey, jobId);
    const before = await money.availableCredits(gateway.service.db, gateway.wallet);
    const answer = await dispute(gateway, gateway.apiKey, jobId, outputHash("not what the model says"));
    assert.equal(answer.status, 200);
    const bond = disputeBondCredits(charged);
    assert.deepEqual([answer.body.dispute_opened, answer.body.worker_hash, answer.body.arbitration_window_hours, answer.body.bond_credits], [true, receivedHash, 72, bond]);
    const { chain } = gateway.service;
    assert.ok((await chain.readTransaction(answer.body.dispute_tx as string)).ok, "the dispute is on the chain");

    const job = await outcomeOf(gateway, gateway.apiKey, jobId);
    assert.deepEqual([job.status, job.dispute?.outcome, job.dispute?.credits_returned, job.dispute?.bond_credits], ["settled", "rejected", 0, bond]);
    assert.ok((await chain.readTransaction(job.dispute!.resolve_tx!)).ok);
    assert.equal(await escrowStatus(gateway.service, jobId), "settled");
    const onChain = decodeDispute((await disputeAccount(gateway, jobId))!.data);
    assert.deepEqual([onChain.outcome, onChain.bond], ["rejected", creditsToBaseUnits(bond)]);
    assert.equal(await money.availableCredits(gateway.service.db, gateway.wallet), before - bond, "the bond paid for the re-executions");
    // Other jobs' fees reach the treasury meanwhile: the bond's own transfer says where it went.
    const forfeited = await getTransfer(gateway.service.db, `dispute_bond:${jobId}:forfeited`);
    assert.deepEqual([forfeited?.creditAccountId, forfeited?.amount], [TREASURY_ACCOUNT, creditsToBaseUnits(bond)]);
    await assertChainAgrees(gateway.service, gateway.wallet);
    assert.deepEqual(await checkJobInvariants(gateway.service.db), []);
    assert.equal((await dispute(gateway, gateway.apiKey, jobId, outputHash("again"))).status, 409, "no second dispute");
  });

  test("two disputes racing on one job: exactly one opens", async () => {
    const { jobId } = await completed(gateway);
    const answers = await Promise.all([dispute(gateway, gateway.apiKey, jobId, outputHash("a")), dispute(gateway, gateway.apiKey, jobId, outputHash("b"))]);
    assert.deepEqual(answers.map((a) => a.status).sort(), [200, 409]);
    await outcomeOf(gateway, gateway.apiKey, jobId);
  });

  test("a bond the wallet's credits cannot cover: 402 insufficient_credits, and nothing opens", async () => {
    const poor = await gateway.newAccount(3);
    const { jobId } = await completed(poor);
    const { credits_charged: charged } = await jobOf(gateway, poor.apiKey, jobId);
    assert.ok(disputeBondCredits(charged) > 3 - charged, "the bond is more than the wallet has left");
    const refused = await dispute(gateway, poor.apiKey, jobId, outputHash("not it"));
    assert.deepEqual([refused.status, (refused.body.error as { code: string }).code], [402, "insufficient_credits"]);
    const job = await jobOf(gateway, poor.apiKey, jobId);
    assert.deepEqual([job.status, job.dispute], ["settled", null]);
    assert.equal(await disputeAccount(gateway, jobId), null, "no dispute on the chain");
    assert.equal(await money.availableCredits(gateway.service.db, poor.wallet), 3 - charged);
    await assertChainAgrees(gateway.service, poor.wallet);
  });

  test("after the window: 422 dispute_window_expired", async () => {
    const { jobId } = await completed(gateway);
    await new Promise((r) => setTimeout(r, DISPUTES.windowMs + 100));
    const late = await dispute(gateway, gateway.apiKey, jobId, outputHash("late"));
    assert.deepEqual([late.status, (late.body.error as { code: string }).code], [422, "dispute_window_expired"]);
  });
});

describe("a worker whose proof names a text the caller never got, at a gateway that checks", () => {
  test("it is caught before settlement: the job fails, nothing is charged, no settlement is sent, a stream ends with an error", async () => {
    const key = generateKeypair();
    const liar = new LyingWorker(new WorkerNode(key, new Map([[MODEL, await testEngine()]])), key);
    const gateway = await startTestGateway({ db: await migratedTestDb(), workers: [liar], credits: 20 });
    try {
      const failed = await gateway.client.chat.completions.create({ model: MODEL, messages: hi }).withResponse().catch((e: { status?: number; headers?: Headers }) => e);
      assert.equal((failed as { status?: number }).status, 500);
      const jobId = (failed as { headers?: Headers }).headers!.get("x-svc-job-id")!;
      const job = await jobOf(gateway, gateway.apiKey, jobId);
      assert.deepEqual([job.status, job.credits_charged], ["failed", 0]);
      assert.equal(((await (await fetch(`${gateway.baseUrl}/jobs/${jobId}`, { headers: { authorization: `Bearer ${gateway.apiKey}` } })).json()) as { on_chain: { settlement_tx: string | null } }).on_chain.settlement_tx, null);
      assert.equal(await money.availableCredits(gateway.service.db, gateway.wallet), 20);
      await assertChainAgrees(gateway.service, gateway.wallet);

      // Streamed, the text is out before the proof arrives: the stream ends with the contract's
      // error event, never a finish_reason or [DONE], and the job is failed and charged nothing.
      const res = await fetch(`${gateway.baseUrl}/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${gateway.apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ model: MODEL, messages: hi, stream: true }),
      });
      const events = (await res.text()).split("\n\n").filter(Boolean);
      assert.equal(res.status, 200);
      const last = JSON.parse(events.at(-1)!.replace(/^data: /, "")) as { error?: { code: string } };
      assert.equal(last.error?.code, "internal_error");
      assert.ok(!events.includes("data: [DONE]"), "no [DONE]");
      assert.ok(events.slice(0, -1).every((e) => (JSON.parse(e.replace(/^data: /, "")) as { choices: { finish_reason: string | null }[] }).choices[0]!.finish_reason === null), "no finish_reason");
      const streamed = await jobOf(gateway, gateway.apiKey, res.headers.get("x-svc-job-id")!);
      assert.deepEqual([streamed.status, streamed.credits_charged], ["failed", 0]);
      assert.equal(await money.availableCredits(gateway.service.db, gateway.wallet), 20);
    } finally {
      await gateway.close();
    }
  });
});

describe("a worker whose proof names a text the caller never got (FAULT INJECTION: skipProofCheck)", () => {
  let gateway: TestGateway;
  const liarKey = generateKeypair();
  before(async () => {
    // Staked, so the pool prefers it for the caller's job; the two honest workers arbitrate.
    const liar = new LyingWorker(new WorkerNode(liarKey, new Map([[MODEL, await testEngine()]]), true), liarKey);
    gateway = await startTestGateway({ db: await migratedTestDb(), workers: [liar, await testWorker(), await testWorker()], credits: 100, skipProofCheck: true, disputes: DISPUTES });
    const { chain } = gateway.service;
    await chain.grantNative({ to: liarKey.address, amount: MIN_ACTIVE_STAKE });
    await chain.stake({ worker: liarKey, amount: MIN_ACTIVE_STAKE });
    await keepEvents(gateway.service.db, liarKey.address);
    await chain.grantUsdc({ to: chain.treasuryOwner, amount: creditsToBaseUnits(100) }); // what the treasury pays upheld disputes from
  });
  after(() => gateway.close());

  test("the caller's dispute is upheld by re-execution: the charge comes back, the worker is slashed on-chain and suspended", async () => {
    const { jobId, receivedHash } = await completed(gateway);
    const settled = await jobOf(gateway, gateway.apiKey, jobId);
    assert.equal(settled.on_chain.proof_hash, outputHash("a text the caller never received"), "settled on the worker's word");
    const before = await money.availableCredits(gateway.service.db, gateway.wallet);

    const answer = await dispute(gateway, gateway.apiKey, jobId, receivedHash);
    assert.equal(answer.body.dispute_opened, true);
    const job = await outcomeOf(gateway, gateway.apiKey, jobId);
    assert.deepEqual([job.dispute?.outcome, job.dispute?.credits_returned, job.dispute?.bond_credits], ["upheld", settled.credits_charged, disputeBondCredits(settled.credits_charged)]);
    assert.equal(await money.availableCredits(gateway.service.db, gateway.wallet), before + settled.credits_charged, "the caller has the charge and its bond back");
    await assertChainAgrees(gateway.service, gateway.wallet);
    const { chain, db } = gateway.service;
    assert.equal(await escrowStatus(gateway.service, jobId), "reversed");

    const deadline = Date.now() + 10_000;
    let slashed: { body: string }[] = [];
    while (slashed.length === 0 && Date.now() < deadline) {
      slashed = await db.query<{ body: string }>("SELECT body FROM events WHERE name = 'worker.slashed'");
      await new Promise((r) => setTimeout(r, 50));
    }
    const data = (JSON.parse(slashed[0]!.body) as { data: Record<string, unknown> }).data;
    assert.deepEqual(Object.keys(data).sort(), ["reason", "related_job_id", "slash_amount_svc", "slash_tx", "worker_address"]);
    assert.deepEqual([data.worker_address, data.reason, data.related_job_id], [liarKey.address, "fraudulent_proof", jobId]);
    assert.ok((await chain.readTransaction(data.slash_tx as string)).ok, "the slash is on the chain");
    assert.ok((await chain.slashableStake(liarKey.address)) < MIN_ACTIVE_STAKE);
    assert.equal(await chain.isStaked(liarKey.address), false, "a slashed stake never earns the staked share again");
    assert.equal(gateway.service.pool.isSuspended(liarKey.address), true);
    assert.deepEqual(await checkInvariants(db), []);
    assert.deepEqual(await checkJobInvariants(db), []);
  });
});

describe("a restart during arbitration", () => {
  test("a dispute waiting for other workers when the service stops is arbitrated after the restart", async (t) => {
    const dir = await tempDir("svc-arbitration-");
    t.after(() => dir.remove());
    const options = { dataDir: dir.path, credits: 50, disputes: { ...DISPUTES, arbitrationRetryMs: 60_000 } };
    const first = await startTestGateway({ ...options, workers: [await testWorker()] });
    const { jobId } = await completed(first);
    const answer = await dispute(first, first.apiKey, jobId, outputHash("not what the model says"));
    assert.equal(answer.body.dispute_opened, true);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal((await jobOf(first, first.apiKey, jobId)).status, "disputed", "no other worker: arbitration waits");
    await first.close();

    const again = await startTestGateway({ ...options, workers: [await testWorker(), await testWorker()] });
    try {
      const job = await outcomeOf(again, first.apiKey, jobId);
      assert.deepEqual([job.status, job.dispute?.outcome], ["settled", "rejected"]);
      assert.deepEqual(await checkJobInvariants(again.service.db), []);
    } finally {
      await again.close();
    }
  });
});

describe("no other worker within the arbitration window", () => {
  test("the dispute ends inconclusive: the caller gets the charge back and nobody is slashed", async () => {
    const gateway = await startTestGateway({ db: await migratedTestDb(), workers: [await testWorker()], credits: 50, disputes: { ...DISPUTES, arbitrationWindowMs: 500 } });
    try {
      const { chain, db } = gateway.service;
      // Kept, a worker.slashed event would show: none may.
      for (const worker of gateway.service.pool.hosting(MODEL)) await keepEvents(db, worker.address);
      await chain.grantUsdc({ to: chain.treasuryOwner, amount: creditsToBaseUnits(10) });
      const { jobId } = await completed(gateway);
      const before = await money.availableCredits(db, gateway.wallet);
      const answer = await dispute(gateway, gateway.apiKey, jobId, outputHash("something else"));
      assert.equal(answer.body.dispute_opened, true);
      const job = await outcomeOf(gateway, gateway.apiKey, jobId);
      assert.deepEqual([job.dispute?.outcome, job.dispute?.credits_returned], ["inconclusive", job.credits_charged]);
      assert.equal(await money.availableCredits(db, gateway.wallet), before + job.credits_charged, "the charge and the bond back");
      await assertChainAgrees(gateway.service, gateway.wallet);
      const slashed = await db.query("SELECT 1 FROM events WHERE name = 'worker.slashed'");
      assert.equal(slashed.length, 0);
      assert.equal(gateway.service.pool.size, 1, "nobody suspended");
    } finally {
      await gateway.close();
    }
  });
});

describe("audits (every settled job audited here)", () => {
  test("honest workers are never found fraudulent: every audited job is reproduced", async () => {
    const gateway = await startTestGateway({ db: await migratedTestDb(), workers: [await testWorker(), await testWorker(), await testWorker()], credits: 200, disputes: { ...DISPUTES, auditShare: 1 } });
    try {
      const temperatures = [0, 0.7, 1.3];
      for (let i = 0; i < 9; i++) {
        await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: `Hi ${i}` }], temperature: temperatures[i % 3]! });
      }
      const deadline = Date.now() + 20_000;
      let rows: { audit_outcome: string | null }[] = [];
      while (Date.now() < deadline) {
        rows = await gateway.service.db.query("SELECT audit_outcome FROM jobs WHERE status = 'settled'");
        // Answered before their batches settle: all nine settled, then audited.
        if (rows.length === 9 && rows.every((r) => r.audit_outcome !== null)) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.deepEqual(rows.map((r) => r.audit_outcome), Array(9).fill("reproduced"));
      assert.equal(gateway.service.pool.size, 3, "nobody suspended");
    } finally {
      await gateway.close();
    }
  });

  test("a worker serving another model under the catalog id is caught by an audit, slashed and suspended", async () => {
    const cheatKey = generateKeypair();
    const cheat = new OtherModelWorker(new WorkerNode(cheatKey, new Map([[MODEL, await testEngine()]]), true), cheatKey);
    const gateway = await startTestGateway({ db: await migratedTestDb(), workers: [cheat, await testWorker(), await testWorker()], credits: 100, disputes: { ...DISPUTES, auditShare: 1 } });
    try {
      const { chain, db } = gateway.service;
      await chain.grantNative({ to: cheatKey.address, amount: MIN_ACTIVE_STAKE });
      await chain.stake({ worker: cheatKey, amount: MIN_ACTIVE_STAKE });
      await keepEvents(db, cheatKey.address);
      const { data, response } = await gateway.client.chat.completions.create({ model: MODEL, messages: hi, temperature: 0 }).withResponse();
      assert.equal(response.headers.get("x-svc-worker"), cheatKey.address);
      assert.match(data.choices[0]!.message.content ?? "", /0/, "the caller got the other model's wording, and the job settled");
      const jobId = response.headers.get("x-svc-job-id")!;
      const deadline = Date.now() + 20_000;
      while (!gateway.service.pool.isSuspended(cheatKey.address) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      const [row] = await db.query<{ audit_outcome: string }>("SELECT audit_outcome FROM jobs WHERE id = $1", [jobId]);
      assert.equal(row?.audit_outcome, "fraudulent");
      while ((await chain.slashableStake(cheatKey.address)) === MIN_ACTIVE_STAKE && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      assert.ok((await chain.slashableStake(cheatKey.address)) < MIN_ACTIVE_STAKE, "slashed on-chain");
      // The event is written when the slash's confirmation is recorded, a moment after the chain has it.
      const slashed = () => db.query<{ body: string }>("SELECT body FROM events WHERE name = 'worker.slashed'");
      const [event] = await until(slashed, (rows) => rows.length > 0, "the worker.slashed event");
      const slashedData = (JSON.parse(event!.body) as { data: Record<string, unknown> }).data;
      assert.deepEqual([slashedData.worker_address, slashedData.reason, slashedData.related_job_id], [cheatKey.address, "fraudulent_proof", jobId]);
    } finally {
      await gateway.close();
    }
  });
});

describe("disputes from one wallet", () => {
  test(`are bounded: the ${DISPUTES_PER_WALLET_PER_HOUR + 1}th within an hour is 429 rate_limited with retry_after, and opens nothing`, async () => {
    const gateway = await startTestGateway({ db: await migratedTestDb(), workers: [await testWorker()], credits: 200, disputes: { windowMs: 60_000, arbitrationRetryMs: 600_000 } });
    try {
      const jobs = [];
      for (let i = 0; i <= DISPUTES_PER_WALLET_PER_HOUR; i++) jobs.push((await completed(gateway)).jobId);
      for (const jobId of jobs.slice(0, DISPUTES_PER_WALLET_PER_HOUR)) assert.equal((await dispute(gateway, gateway.apiKey, jobId, outputHash("not it"))).body.dispute_opened, true);
      const refused = await dispute(gateway, gateway.apiKey, jobs.at(-1)!, outputHash("not it"));
      assert.equal(refused.status, 429);
      const error = refused.body.error as { code: string; details: { retry_after: number } };
      assert.equal(error.code, "rate_limited");
      assert.ok(error.details.retry_after > 0);
      assert.equal((await jobOf(gateway, gateway.apiKey, jobs.at(-1)!)).status, "settled");
      const other = await gateway.newAccount(0);
      assert.equal((await dispute(gateway, other.apiKey, jobs.at(-1)!, outputHash("not it"))).status, 404, "another wallet's allowance is its own, and the job is not its");
    } finally {
      await gateway.close();
    }
  });
});
