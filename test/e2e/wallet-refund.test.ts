/**
 * No caller's credits can be held by a service that never settles: past the escrow program's job
 * timeout on the chain's clock, the caller's own transaction refunds the job, and the service,
 * whose own refund then finds the escrow closed, releases the reservation so ledger and chain agree.
 * The program's timeout is shortened to 1 s (its config is set when the chain is new) and the
 * service's to 6 s, so the caller acts between the two. Both escrow designs: a job's own record
 * (`refund`), and its slot of its wallet's table (`refund_slots`, naming that slot alone).
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { escrowInstructions, ProgramError } from "../../src/chain/escrow-program/index.ts";
import { buildTransaction } from "../../src/chain/wire.ts";
import { issueApiKey } from "../../src/accounts/index.ts";
import { generateKeypair, type Keypair } from "../../src/core/keys.ts";
import { creditsToBaseUnits } from "../../src/core/units.ts";
import { checkJobInvariants } from "../../src/jobs/job-invariants.ts";
import * as money from "../../src/jobs/money.ts";
import { getJob } from "../../src/jobs/job-repo.ts";
import { checkInvariants } from "../../src/ledger/index.ts";
import { assertChainAgrees, escrowStatus } from "../support/chain-checks.ts";
import { MODEL, migratedTestDb, startTestGateway, testWorker, type TestGateway } from "../support/service.ts";
import { StallingWorker } from "../support/stalling-worker.ts";
import type { Address } from "@solana/kit";
import { isAnyOf } from "../../src/store/index.ts";

/** The gateway of the design under test (each describe starts its own). */
let gateway: TestGateway;
let worker: StallingWorker;

/** The caller's own refund transaction: the wallet signs and pays its fee; the service has no part in it. */
async function refundAsTheWallet(wallet: Keypair, jobId: string): Promise<void> {
  const { chain, db } = gateway.service;
  const job = (await getJob(db, jobId))!;
  const { bytes } = await chain.backend.latestBlockhash();
  const [owner, caller] = [wallet.address as Address, wallet.address as Address];
  const refund = job.escrowTableId === null
    ? escrowInstructions.refund({ jobId, wallet: owner, caller })
    : escrowInstructions.refundSlots({ wallet: owner, tableId: BigInt(job.escrowTableId), slots: [job.escrowTableSlot!], caller });
  await chain.send(buildTransaction(wallet, [refund], bytes, []).wire);
}

/** A funded wallet we hold the key of, with SOL for its own fees, and a client with its API key. */
async function walletWithKey(): Promise<{ wallet: Keypair; client: OpenAI }> {
  const { chain, db } = gateway.service;
  const wallet = generateKeypair();
  await gateway.service.deposits.deposit(wallet.address, 20);
  await chain.backend.requestAirdrop(wallet.address as Address, 10_000_000n);
  return { wallet, client: new OpenAI({ apiKey: await issueApiKey(db, wallet.address), baseURL: gateway.baseUrl, maxRetries: 0 }) };
}

/** After every story: the ledger gives the wallet back all 20 credits, and the chain agrees. */
async function assertWholeAndAgreed(wallet: Keypair): Promise<void> {
  const { db } = gateway.service;
  assert.equal(await money.availableCredits(db, wallet.address), 20, "the service released the reservation its own transaction found closed");
  await assertChainAgrees(gateway.service, wallet.address);
  assert.deepEqual(await checkInvariants(db), []);
  assert.deepEqual(await checkJobInvariants(db), []);
}

/** `count` jobs of the wallet running with their escrows locked on the chain. */
async function lockedJobIds(wallet: string, count: number): Promise<string[]> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const rows = await gateway.service.db.query<{ id: string }>("SELECT id FROM jobs WHERE wallet = $1 AND status = 'processing' AND escrow_tx <> '' ORDER BY id", [wallet]);
    const locked = await Promise.all(rows.map(async (row) => (await escrowStatus(gateway.service, row.id)) === "locked"));
    if (rows.length === count && locked.every(Boolean)) return rows.map((row) => row.id);
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`no ${count} jobs reached processing with their escrows locked`);
}

/** A request of the wallet's, and its job once it runs with its escrow locked. */
async function lockedJobId(wallet: Keypair, client: OpenAI): Promise<{ jobId: string; ended: Promise<unknown> }> {
  const ended = client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }] }).catch((e: unknown) => e);
  const [jobId] = await lockedJobIds(wallet.address, 1);
  return { jobId: jobId!, ended };
}

for (const design of ["records", "tables"] as const) {
  describe(`escrow ${design}`, () => {
    before(async () => {
      worker = new StallingWorker(await testWorker());
      gateway = await startTestGateway({
        db: await migratedTestDb(),
        workers: [worker],
        jobTimeoutMs: 6_000,
        firstTokenTimeoutMs: 60_000,
        escrowRules: { jobTimeoutSeconds: 1n },
        escrowTables: design === "tables",
      });
    });
    after(() => gateway.close());

    if (design === "tables") {
      test("two jobs of one table: the wallet refunds one itself, and the service's batch refund of both then returns the other alone", async () => {
        const { db } = gateway.service;
        const { wallet, client } = await walletWithKey();
        const ended = [0, 1].map(() => client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }] }).catch((e: unknown) => e));
        const [first, second] = await lockedJobIds(wallet.address, 2);
        await new Promise((r) => setTimeout(r, 2_100));
        await refundAsTheWallet(wallet, first!);
        // Both time out together: one refund for the two, refused for the slot already refunded.
        for (const answer of await Promise.all(ended)) assert.ok(answer instanceof OpenAI.APIError && answer.status === 504, String(answer));
        const shared = await db.query(`SELECT signature FROM chain_actions WHERE kind = 'refund' AND state = 'failed' AND ${isAnyOf(db, "subject", "$1::text[]")} GROUP BY signature HAVING count(*) = 2`, [[first, second]]);
        assert.equal(shared.length, 1, "the batch holding both slots was refused");
        const jobs = await db.query<{ status: string; credits_charged: number }>(`SELECT status, credits_charged FROM jobs WHERE ${isAnyOf(db, "id", "$1::text[]")}`, [[first, second]]);
        assert.deepEqual(jobs.map((job) => [job.status, job.credits_charged]), [["refunded", 0], ["refunded", 0]]);
        assert.deepEqual([await escrowStatus(gateway.service, first!), await escrowStatus(gateway.service, second!)], ["refunded", "refunded"]);
        await assertWholeAndAgreed(wallet);
      });
    }

    test("a job the service does not settle is refunded by the wallet's own transaction after the program's timeout", async () => {
      const { chain, db } = gateway.service;
      const { wallet, client } = await walletWithKey();
      const { jobId, ended } = await lockedJobId(wallet, client);
      const locked = creditsToBaseUnits((await getJob(db, jobId))!.creditsLocked);
      assert.equal(await chain.creditBalance(wallet.address), creditsToBaseUnits(20) - locked, "the lock left the vault");
      await assert.rejects(refundAsTheWallet(wallet, jobId), (e: unknown) => chain.isRejection(e) && e.details.err.endsWith(`Custom(${ProgramError.tooEarly}))`));

      await new Promise((r) => setTimeout(r, 2_100)); // past the program's 1 s on the chain's clock (whole seconds)
      await refundAsTheWallet(wallet, jobId);
      assert.equal(await chain.creditBalance(wallet.address), creditsToBaseUnits(20), "the whole lock is back in the vault");
      assert.equal(await escrowStatus(gateway.service, jobId), "refunded");

      const answer = await ended;
      assert.ok(answer instanceof OpenAI.APIError && answer.status === 504, `the caller still gets the service's timeout: ${String(answer)}`);
      const [job] = await db.query<{ status: string; credits_charged: number }>("SELECT status, credits_charged FROM jobs WHERE id = $1", [jobId]);
      assert.deepEqual([job?.status, job?.credits_charged], ["refunded", 0]);
      await assertWholeAndAgreed(wallet);
    });

    test("a worker that finishes after the wallet refunded: the settlement is refused, nothing is charged, the job says why", async () => {
      const { chain, db } = gateway.service;
      const { wallet, client } = await walletWithKey();
      const { jobId, ended } = await lockedJobId(wallet, client);
      await new Promise((r) => setTimeout(r, 2_100));
      await refundAsTheWallet(wallet, jobId);
      worker.release();

      const answer = await ended;
      assert.ok(answer instanceof OpenAI.APIError && answer.status === 500 && /refunded on-chain/.test(answer.message), String(answer));
      const [job] = await db.query<{ status: string; failure_reason: string }>("SELECT status, failure_reason FROM jobs WHERE id = $1", [jobId]);
      assert.deepEqual([job?.status, job?.failure_reason], ["failed", "escrow_refunded"]);
      assert.equal(await escrowStatus(gateway.service, jobId), "refunded", "the settlement moved nothing");
      await assertWholeAndAgreed(wallet);
    });
  });
}
