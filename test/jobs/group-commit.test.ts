/**
 * Jobs admitted and settled in groups: concurrent requests from several wallets share
 * transactions, and every job still ends exactly as it would alone: settled, charged once, its
 * events in order, the ledger, the jobs and the chain in agreement. On PGlite, and on PostgreSQL
 * too when DATABASE_URL is set.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { issueApiKey } from "../../src/accounts/accounts.ts";
import { signWalletSlot } from "../../src/chain/index.ts";
import { generateKeypair } from "../../src/core/index.ts";
import { checkInvariants } from "../../src/ledger/index.ts";
import { checkJobInvariants } from "../../src/jobs/job-invariants.ts";
import * as money from "../../src/jobs/money.ts";
import { isAnyOf, spelled, type Db } from "../../src/store/index.ts";
import { assertChainAgrees } from "../support/chain-checks.ts";
import { testDatabases } from "../support/db.ts";
import { until } from "../support/eventually.ts";
import { MODEL, startTestGateway, type TestGateway } from "../support/service.ts";
import { keepEvents } from "../support/kept-events.ts";

/** The Db, counting the transactions opened on it (not savepoints inside them). */
function countingTransactions(db: Db): { db: Db; count(): number } {
  let opened = 0;
  const counted: Db = {
    kind: db.kind,
    query: (sql, params) => db.query(sql, params),
    exec: (sql) => db.exec(sql),
    transaction: (fn) => {
      opened++;
      return db.transaction(fn);
    },
    close: () => db.close(),
  };
  return { db: counted, count: () => opened };
}

for (const backend of testDatabases({ sqlite: true })) {
  describe(`jobs committed in groups on ${backend.name}`, () => {
    let gateway: TestGateway;
    let transactions: () => number;
    before(async () => {
      const counting = countingTransactions(await backend.open());
      transactions = counting.count;
      gateway = await startTestGateway({ db: counting.db, credits: 0, rateLimit: false });
    });
    // Answered before their settlements confirm: wait for the chain to have them all.
    const settlementsConfirmed = () =>
      until(() => gateway.service.db.query("SELECT id FROM jobs WHERE status = 'settling'"), (rows) => rows.length === 0, "the settlements to confirm");
    after(() => gateway.close());

    test("24 concurrent requests from three wallets: all settled, each charged once, in fewer transactions than one per step", async () => {
      const callers = [await gateway.newAccount(100), await gateway.newAccount(100), await gateway.newAccount(100)];
      for (const caller of callers) await keepEvents(gateway.service.db, caller.wallet);
      const before = transactions();
      const answers = await Promise.all(
        Array.from({ length: 24 }, (_, i) =>
          callers[i % 3]!.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: `Hi ${i}` }], max_tokens: 8, temperature: 0 }),
        ),
      );
      assert.equal(answers.length, 24);
      const db = gateway.service.db;
      await settlementsConfirmed();
      // Alone, each job opens four: admission, its settlement's record, and the two confirmations.
      const opened = transactions() - before;
      assert.ok(opened < 4 * 24, `${opened} transactions for 24 jobs`);

      for (const caller of callers) {
        const jobs = await db.query<{ id: string; status: string; credits_charged: number }>("SELECT id, status, credits_charged FROM jobs WHERE wallet = $1", [caller.wallet]);
        assert.equal(jobs.length, 8);
        assert.ok(jobs.every((job) => job.status === "settled"));
        const charged = jobs.reduce((sum, job) => sum + job.credits_charged, 0);
        assert.equal((await money.availableCredits(db, caller.wallet)) + charged, 100);
        for (const job of jobs) {
          const events = await db.query<{ name: string }>(`SELECT name FROM events WHERE ${spelled(db, { postgres: "body::jsonb", sqlite: "body" })} -> 'data' ->> 'job_id' = $1 ORDER BY id`, [job.id]);
          assert.deepEqual(events.map((e) => e.name), ["job.submitted", "job.processing", "job.completed"]);
        }
        await assertChainAgrees(gateway.service, caller.wallet);
      }
      assert.deepEqual(await checkInvariants(db), []);
      assert.deepEqual(await checkJobInvariants(db), []);
    });

    test("jobs admitted together have their escrow locks signed together, several to a transaction", async () => {
      const callers = [await gateway.newAccount(100), await gateway.newAccount(100)];
      await Promise.all(Array.from({ length: 16 }, (_, i) => callers[i % 2]!.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: `Hi ${i}` }] })));
      const db = gateway.service.db;
      await settlementsConfirmed();
      const wallets = callers.map((c) => c.wallet);
      const jobs = await db.query<{ id: string; escrow_tx: string }>(`SELECT id, escrow_tx FROM jobs WHERE ${isAnyOf(db, "wallet", "$1::text[]")}`, [wallets]);
      const locks = new Set(jobs.map((job) => job.escrow_tx));
      assert.ok(locks.size < jobs.length, `${locks.size} lock transactions for ${jobs.length} jobs`);
      // Each job keeps a row of its own in the journal, confirmed, under its transaction's signature.
      const rows = await db.query<{ subject: string; signature: string; state: string }>(
        `SELECT subject, signature, state FROM chain_actions WHERE kind = 'escrow' AND ${isAnyOf(db, "subject", "$1::text[]")}`,
        [jobs.map((job) => job.id)],
      );
      assert.deepEqual(new Map(rows.map((row) => [row.subject, `${row.signature} ${row.state}`])), new Map(jobs.map((job) => [job.id, `${job.escrow_tx} confirmed`])));
      for (const wallet of wallets) await assertChainAgrees(gateway.service, wallet);
      assert.deepEqual(await checkInvariants(db), []);
      assert.deepEqual(await checkJobInvariants(db), []);
    });
  });

  // JSON jobs' locks share transactions across wallets only when each job holds an escrow record
  // of its own; escrow tables lock each wallet's JSON jobs in transactions of their own.
  describe(`a wallet's refused lock among others' on ${backend.name}, escrow records`, () => {
    let gateway: TestGateway;
    before(async () => {
      gateway = await startTestGateway({ db: await backend.open(), credits: 0, rateLimit: false, escrowTables: false });
    });
    const settlementsConfirmed = () =>
      until(() => gateway.service.db.query("SELECT id FROM jobs WHERE status = 'settling'"), (rows) => rows.length === 0, "the settlements to confirm");
    after(() => gateway.close());

    test("a wallet that empties its vault on-chain: its jobs fail, and the jobs whose locks shared its transaction lock again alone", async () => {
      const { service } = gateway;
      const honest = [await gateway.newAccount(100), await gateway.newAccount(100)];
      const emptier = generateKeypair();
      await service.deposits.deposit(emptier.address, 100);
      const emptierClient = new OpenAI({ apiKey: await issueApiKey(service.db, emptier.address), baseURL: service.baseUrl, maxRetries: 0 });
      // Out of the service's sight: the wallet withdraws its whole vault with its own signature.
      const withdrawal = await service.chain.prepareWithdrawal({ wallet: emptier.address, credits: 100 });
      await service.chain.send(signWalletSlot(withdrawal.wire, emptier));
      const db = service.db;
      const sharedRefusals = () =>
        db.query<{ subject: string }>(
          `SELECT a.subject FROM chain_actions a JOIN jobs j ON j.id = a.subject
            WHERE a.kind = 'escrow' AND a.state = 'failed' AND j.wallet <> $1`,
          [emptier.address],
        );
      // Rounds of concurrent requests, until one of the emptier's locks has shared a transaction with an honest job's.
      for (let round = 0; round < 8 && (await sharedRefusals()).length === 0; round++) {
        const asked = Array.from({ length: 9 }, (_, i) => {
          const client = i % 3 === 0 ? emptierClient : honest[i % 2]!.client;
          return client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: `Round ${round}, ${i}` }] });
        });
        const answers = await Promise.allSettled(asked);
        answers.forEach((answer, i) => assert.equal(answer.status, i % 3 === 0 ? "rejected" : "fulfilled", `request ${i} of round ${round}`));
      }
      const refusedWithOthers = await sharedRefusals();
      assert.ok(refusedWithOthers.length > 0, "no honest job's lock shared a transaction with the emptier's");
      await settlementsConfirmed();
      // Each honest job whose shared lock was refused was locked alone and settled.
      for (const { subject } of refusedWithOthers) {
        const [job] = await db.query<{ status: string; escrow_tx: string }>("SELECT status, escrow_tx FROM jobs WHERE id = $1", [subject]);
        assert.equal(job!.status, "settled");
        const [alone] = await db.query<{ state: string }>("SELECT state FROM chain_actions WHERE signature = $1 AND subject = $2", [job!.escrow_tx, subject]);
        assert.equal(alone?.state, "confirmed");
      }
      const emptied = await db.query<{ status: string; failure_reason: string }>("SELECT status, failure_reason FROM jobs WHERE wallet = $1", [emptier.address]);
      assert.ok(emptied.length > 0 && emptied.every((job) => job.failure_reason === "escrow_failed"), JSON.stringify(emptied));
      // The ledger gave the emptier's reservations back; the chain never held them.
      assert.equal(await money.availableCredits(db, emptier.address), 100);
      for (const caller of honest) await assertChainAgrees(service, caller.wallet);
      assert.deepEqual(await checkInvariants(db), []);
      assert.deepEqual(await checkJobInvariants(db), []);
    });
  });
}
