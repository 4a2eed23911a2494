/**
 * Jobs locked into their wallets' escrow tables and settled in batches (`escrowTables`), through
 * the official SDK against a real gateway on the embedded chain: the ledger and the chain agree,
 * slots are taken without gaps even when admissions are refused beside them, a stream and a JSON
 * reply settle, and a job whose worker will not sign its settlement gets its slot refunded.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { startChainRpc } from "../../src/chain/index.ts";
import { creditsToBaseUnits } from "../../src/core/units.ts";
import { outputHash } from "../../src/core/proof.ts";
import { checkJobInvariants } from "../../src/jobs/job-invariants.ts";
import { getJob } from "../../src/jobs/job-repo.ts";
import * as money from "../../src/jobs/money.ts";
import { SettlementRefusedError, type WorkerJob } from "../../src/network/worker-handle.ts";
import { checkInvariants } from "../../src/ledger/index.ts";
import { runSvc } from "../cli/svc-process.ts";
import { assertChainAgrees, assertWorkerPaidOnChain } from "../support/chain-checks.ts";
import { jobConcluded, until } from "../support/eventually.ts";
import { StallingWorker } from "../support/stalling-worker.ts";
import { WrappedWorker } from "../support/wrapped-worker.ts";
import { MODEL, migratedTestDb, startTestGateway, testWorker, type TestGateway } from "../support/service.ts";

const hi = [{ role: "user" as const, content: "Hi" }];

describe("escrow tables", () => {
  let gateway: TestGateway;
  let workerAddress: string;
  before(async () => {
    const worker = await testWorker();
    workerAddress = worker.address;
    gateway = await startTestGateway({ db: await migratedTestDb(), workers: [worker], escrowTables: true, rateLimit: { ratePerSecond: 1000, burst: 1000 } });
  });
  after(() => gateway.close());

  /** The job's table on the chain, read through the job's own record. */
  async function slotOf(jobId: string) {
    const job = (await jobConcluded(gateway.service, jobId))!;
    assert.notEqual(job.escrowTableId, null, `job ${jobId} has a table slot`);
    const table = await gateway.service.chain.tableRecord(job.wallet, BigInt(job.escrowTableId!));
    assert.ok(table, "the table is on the chain");
    assert.equal(gateway.service.chain.tableAddressFor(job.wallet, BigInt(job.escrowTableId!)), job.escrowAddress);
    return { job, table, slot: table.slots[job.escrowTableSlot!]! };
  }

  test("concurrent jobs of one wallet share a table and settle in batches, the chain agreeing with the ledger", async () => {
    const caller = await gateway.newAccount(200);
    const answers = await Promise.all(
      Array.from({ length: 12 }, () => caller.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 8, temperature: 0 }).withResponse()),
    );
    const ids = answers.map(({ response }) => response.headers.get("x-svc-job-id")!);
    const slots = await Promise.all(ids.map(slotOf));
    for (const { job, slot } of slots) {
      assert.equal(job.status, "settled");
      assert.equal(slot.status, "settled");
      assert.ok(job.settlementTx, "the job names its batch's settlement");
    }
    // Admitted together, locked together: fewer lock and settlement transactions than jobs.
    const lockTxs = new Set(slots.map(({ job }) => job.escrowTx));
    const settlementTxs = new Set(slots.map(({ job }) => job.settlementTx));
    assert.ok(lockTxs.size < ids.length, `${lockTxs.size} lock transactions for ${ids.length} jobs`);
    assert.ok(settlementTxs.size < ids.length, `${settlementTxs.size} settlement transactions for ${ids.length} jobs`);
    await assertChainAgrees(gateway.service, caller.wallet);
    await assertWorkerPaidOnChain(gateway.service, workerAddress);
    await checkInvariants(gateway.service.db);
    await checkJobInvariants(gateway.service.db);
  });

  test("a settled job's object carries its receipt, and svc verify checks it from RPC alone", async () => {
    const caller = await gateway.newAccount(50);
    const answers = await Promise.all(Array.from({ length: 3 }, () => caller.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 8 }).withResponse()));
    const jobId = answers[1]!.response.headers.get("x-svc-job-id")!;
    const { job } = await slotOf(jobId);
    const res = await fetch(`${gateway.baseUrl}/jobs/${jobId}`, { headers: { authorization: `Bearer ${caller.apiKey}` } });
    const receipt = ((await res.json()) as { on_chain: { receipt: Record<string, unknown> } }).on_chain.receipt;
    assert.deepEqual(
      [receipt.table, receipt.slot, receipt.settlement_tx, receipt.proof_hash, receipt.tree_size],
      [job.escrowAddress, job.escrowTableSlot, job.settlementTx, job.proofHash, job.settlementLeaf!.treeSize],
    );
    const rpc = await startChainRpc({ chain: gateway.service.chain, port: 0 });
    try {
      const run = await runSvc(["verify", jobId, "--base-url", gateway.baseUrl, "--rpc", rpc.url], { SVC_API_KEY: caller.apiKey });
      assert.equal(run.code, 0, run.stdout + run.stderr);
      assert.match(run.stdout, /leaf/i);
    } finally {
      await rpc.close();
    }
  });

  test("admissions refused beside accepted ones leave no gap in the table's slots", async () => {
    // Lite tier: max_tokens 8 locks 2 credits; 14 credits pay for exactly 7.
    const caller = await gateway.newAccount(14);
    const results = await Promise.allSettled(
      Array.from({ length: 30 }, () => caller.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 8, temperature: 0 }).withResponse()),
    );
    const ok = results.flatMap((r) => (r.status === "fulfilled" ? [r.value.response.headers.get("x-svc-job-id")!] : []));
    assert.equal(ok.length, 7);
    for (const r of results) if (r.status === "rejected") assert.ok(r.reason instanceof OpenAI.APIError && r.reason.status === 402, String(r.reason));
    const slots = await Promise.all(ok.map(slotOf));
    assert.ok(slots.every(({ slot }) => slot.status === "settled"));
    // The refused admissions' locks gave their slots back: the seven jobs hold slots 0-6 of one
    // table, each locked as signed (a lock out of turn would have gone alone, to a table of its own).
    assert.equal(new Set(slots.map(({ job }) => job.escrowAddress)).size, 1);
    assert.deepEqual(slots.map(({ job }) => job.escrowTableSlot).sort(), [0, 1, 2, 3, 4, 5, 6]);
    assert.equal(slots[0]!.table.slots.length, 7);
    await assertChainAgrees(gateway.service, caller.wallet);
  });

  test("a stream settles; its JSON twin answers before its batch is signed and the job names the settlement after", async () => {
    const caller = await gateway.newAccount(100);
    const stream = await caller.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 8, stream: true }).withResponse();
    let text = "";
    for await (const chunk of stream.data) text += chunk.choices[0]?.delta.content ?? "";
    assert.ok(text.length > 0);
    const streamed = await slotOf(stream.response.headers.get("x-svc-job-id")!);
    assert.equal(streamed.slot.status, "settled");

    const json = await caller.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 8 }).withResponse();
    assert.equal(json.response.headers.get("x-svc-settlement-tx"), null, "the batch is signed after the reply");
    const { job } = await slotOf(json.response.headers.get("x-svc-job-id")!);
    const res = await fetch(`${gateway.baseUrl}/jobs/${job.id}`, { headers: { authorization: `Bearer ${caller.apiKey}` } });
    const body = (await res.json()) as { status: string; on_chain: { settlement_tx: string; escrow_address: string } };
    assert.equal(body.status, "settled");
    assert.equal(body.on_chain.settlement_tx, job.settlementTx);
    assert.equal(body.on_chain.escrow_address, job.escrowAddress);
    await assertChainAgrees(gateway.service, caller.wallet);
  });

});

/** Runs jobs honestly and then will not sign their settlement, as a worker that left would not. */
class UnsigningWorker extends WrappedWorker {
  run(job: WorkerJob, signal: AbortSignal) {
    return this.real.run(job, signal);
  }
  override signSettlement(): Promise<Uint8Array> {
    return Promise.reject(new SettlementRefusedError("this worker signs no settlement"));
  }
}

describe("escrow tables with a worker that does not sign its settlements", () => {
  let gateway: TestGateway;
  before(async () => {
    gateway = await startTestGateway({ db: await migratedTestDb(), workers: [new UnsigningWorker(await testWorker())], escrowTables: true, credits: 100 });
  });
  after(() => gateway.close());

  test("its job's slot is refunded, nothing is charged, and the chain agrees with the ledger", async () => {
    const { response } = await gateway.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 8 }).withResponse();
    const jobId = response.headers.get("x-svc-job-id")!;
    const job = await jobConcluded(gateway.service, jobId);
    assert.equal(job.status, "failed");
    assert.equal(job.failureReason, "settlement_unsigned");
    assert.equal(job.creditsCharged, 0);
    const table = await gateway.service.chain.tableRecord(job.wallet, BigInt(job.escrowTableId!));
    assert.equal(table!.slots[job.escrowTableSlot!]!.status, "refunded");
    assert.equal(await gateway.service.chain.tokenBalance(gateway.service.chain.creditAccountAddress(gateway.wallet)), creditsToBaseUnits(100));
    await assertChainAgrees(gateway.service, gateway.wallet);
    await checkInvariants(gateway.service.db);
  });

  test("the refunds of jobs ending together share one transaction, each job's slot refunded", async () => {
    const replies = await Promise.all(Array.from({ length: 6 }, () => gateway.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 8 }).withResponse()));
    const jobs = await Promise.all(replies.map(({ response }) => jobConcluded(gateway.service, response.headers.get("x-svc-job-id")!)));
    assert.ok(jobs.every((job) => job.status === "failed" && job.creditsCharged === 0), jobs.map((job) => `${job.status} ${job.failureReason}`).join(", "));
    const refunds = new Set(jobs.map((job) => job.refundTx));
    assert.ok(refunds.size < jobs.length, `${refunds.size} refund transactions for ${jobs.length} jobs`);
    for (const refund of refunds) assert.ok((await gateway.service.chain.readTransaction(refund!)).ok);
    for (const job of jobs) {
      const table = await gateway.service.chain.tableRecord(job.wallet, BigInt(job.escrowTableId!));
      assert.equal(table!.slots[job.escrowTableSlot!]!.status, "refunded");
    }
    assert.equal(await gateway.service.chain.tokenBalance(gateway.service.chain.creditAccountAddress(gateway.wallet)), creditsToBaseUnits(100));
    await assertChainAgrees(gateway.service, gateway.wallet);
    assert.deepEqual(await checkJobInvariants(gateway.service.db), []);
  });
});

describe("disputes of escrow-table jobs", () => {
  const disputes = { windowMs: 3_000, arbitrationRetryMs: 100 };

  async function disputeOf(gateway: TestGateway, jobId: string, hash: string) {
    const res = await fetch(`${gateway.baseUrl}/jobs/${jobId}/dispute`, {
      method: "POST",
      headers: { authorization: `Bearer ${gateway.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ received_output_hash: hash }),
    });
    assert.equal(res.status, 200);
    return (await res.json()) as { dispute_opened: boolean };
  }

  /** The job once its dispute has an outcome, and its slot on the chain then. */
  async function decided(gateway: TestGateway, jobId: string) {
    const job = await until(async () => (await getJob(gateway.service.db, jobId))!, (j) => j.disputeOutcome !== null, `job ${jobId}'s arbitration`);
    const table = await gateway.service.chain.tableRecord(job.wallet, BigInt(job.escrowTableId!));
    return { job, slot: table!.slots[job.escrowTableSlot!]! };
  }

  test("re-execution clears an honest worker: the slot's dispute is rejected and the slot stays settled", async () => {
    const gateway = await startTestGateway({ db: await migratedTestDb(), workers: [await testWorker(), await testWorker(), await testWorker()], escrowTables: true, credits: 100, disputes });
    try {
      const { response } = await gateway.client.chat.completions.create({ model: MODEL, messages: hi, temperature: 0 }).withResponse();
      const jobId = response.headers.get("x-svc-job-id")!;
      await jobConcluded(gateway.service, jobId);
      assert.equal((await disputeOf(gateway, jobId, outputHash("not what the model says"))).dispute_opened, true);
      const { job, slot } = await decided(gateway, jobId);
      assert.deepEqual([job.status, job.disputeOutcome, slot.status], ["settled", "rejected", "settled"]);
      await assertChainAgrees(gateway.service, gateway.wallet);
      assert.deepEqual(await checkJobInvariants(gateway.service.db), []);
    } finally {
      await gateway.close();
    }
  });

  test("with nobody to re-execute, the dispute ends inconclusive: the slot's charge goes back to the wallet", async () => {
    const gateway = await startTestGateway({ db: await migratedTestDb(), workers: [await testWorker()], escrowTables: true, credits: 50, disputes: { ...disputes, arbitrationWindowMs: 500 } });
    try {
      const { chain, db } = gateway.service;
      await chain.grantUsdc({ to: chain.treasuryOwner, amount: creditsToBaseUnits(10) });
      const { response } = await gateway.client.chat.completions.create({ model: MODEL, messages: hi, temperature: 0 }).withResponse();
      const jobId = response.headers.get("x-svc-job-id")!;
      const { creditsCharged } = await jobConcluded(gateway.service, jobId);
      const before = await money.availableCredits(db, gateway.wallet);
      assert.equal((await disputeOf(gateway, jobId, outputHash("something else"))).dispute_opened, true);
      const { job, slot } = await decided(gateway, jobId);
      assert.deepEqual([job.disputeOutcome, job.disputeReturnedCredits, slot.status], ["inconclusive", creditsCharged, "reversed"]);
      assert.equal(await money.availableCredits(db, gateway.wallet), before + creditsCharged, "the charge and the bond back");
      await assertChainAgrees(gateway.service, gateway.wallet);
    } finally {
      await gateway.close();
    }
  });
});

describe("escrow tables: JSON jobs' locks wait for the wallet's next jobs", () => {
  test("a lone job locks at its admission; jobs admitted apart while it runs share one lock transaction", async () => {
    const stalling = new StallingWorker(await testWorker());
    const gateway = await startTestGateway({ db: await migratedTestDb(), workers: [stalling], escrowTables: true, credits: 100 });
    try {
      // The first alone; once it runs, three more 30 ms apart, each in an admission group of its
      // own, all within the lock's linger.
      const ask = () => gateway.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 8 }).withResponse();
      const replies: Promise<{ response: Response }>[] = [ask()];
      await until(() => gateway.service.db.query("SELECT id FROM jobs WHERE status = 'processing'"), (rows) => rows.length === 1, "the first job to run");
      for (let i = 0; i < 3; i++) {
        replies.push(ask());
        await new Promise((resolve) => setTimeout(resolve, 30));
      }
      await new Promise((resolve) => setTimeout(resolve, 300));
      stalling.release();
      const responses = (await Promise.all(replies)).map(({ response }) => response);
      const jobs = await Promise.all(responses.map((response) => jobConcluded(gateway.service, response.headers.get("x-svc-job-id")!)));
      assert.ok(jobs.every((job) => job.status === "settled"), jobs.map((job) => `${job.status} ${job.failureReason}`).join(", "));
      assert.equal(new Set(jobs.slice(1).map((job) => job.escrowTx)).size, 1, "one lock transaction for the three");
      assert.notEqual(jobs[0]!.escrowTx, jobs[1]!.escrowTx, "the lone first job's own lock");
      // Signed after admission, the lock is still named by each reply.
      assert.deepEqual(responses.map((response) => response.headers.get("x-svc-escrow-tx")), jobs.map((job) => job.escrowTx));
      assert.deepEqual(jobs.map((job) => job.escrowTableSlot).sort(), [0, 1, 2, 3]);
      await assertChainAgrees(gateway.service, gateway.wallet);
    } finally {
      await gateway.close();
    }
  });

  test("a caller that leaves before its job's lock is signed is charged nothing, and nothing goes to the chain for it", async () => {
    const stalling = new StallingWorker(await testWorker());
    const gateway = await startTestGateway({ db: await migratedTestDb(), workers: [stalling], escrowTables: true, credits: 100 });
    try {
      // A job of the wallet running (its lock signed at its admission), so the next one's lock waits.
      const running = gateway.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 8 }).catch(() => undefined);
      const first = await until(async () => (await gateway.service.db.query<{ id: string }>("SELECT id FROM jobs WHERE status = 'processing'"))[0]?.id, (id) => id !== undefined, "the first job to run");
      const controller = new AbortController();
      const reply = gateway.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 8 }, { signal: controller.signal }).catch(() => undefined);
      const jobId = await until(async () => (await gateway.service.db.query<{ id: string }>("SELECT id FROM jobs WHERE id <> $1", [first]))[0]?.id, (id) => id !== undefined, "the job's admission");
      controller.abort();
      await reply;
      const job = await until(async () => (await getJob(gateway.service.db, jobId!))!, (j) => j.status === "failed", `job ${jobId} to fail`);
      assert.deepEqual([job.creditsCharged, job.failureReason, job.escrowTx], [0, "client_disconnected", ""]);
      // Its lock was taken out of the wallet's lane unsigned: no lock, no refund.
      assert.deepEqual(await gateway.service.db.query("SELECT kind FROM chain_actions WHERE subject = $1", [jobId]), []);
      stalling.release();
      await running;
      const charged = (await jobConcluded(gateway.service, first!)).creditsCharged;
      assert.equal(await money.availableCredits(gateway.service.db, gateway.wallet), 100 - charged);
      await assertChainAgrees(gateway.service, gateway.wallet);
      await checkInvariants(gateway.service.db);
    } finally {
      stalling.release();
      await gateway.close();
    }
  });
});
