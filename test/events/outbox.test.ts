/**
 * Writing events: only those a webhook of their account subscribes to, in the caller's
 * transaction (gone with a rollback), once per change, fanned out to those webhooks only; credit.low by the crossing rule; every
 * emitter's envelope. Runs on PGlite, and on PostgreSQL too when DATABASE_URL is set.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { addCreditLowSides, ensureWallet, lockCreditLowSides } from "../../src/accounts/accounts.ts";
import { ACCOUNTS_MIGRATIONS } from "../../src/accounts/schema.ts";
import { EVENTS_MIGRATIONS } from "../../src/events/schema.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import { newId } from "../../src/core/ids.ts";
import {
  emitCreditTopup,
  emitJobCompleted,
  emitJobDisputed,
  emitJobEnded,
  emitJobProcessing,
  emitJobSubmitted,
  emitWorkerRegistered,
  emitWorkerSlashed,
} from "../../src/events/emit.ts";
import { emitEvent } from "../../src/events/outbox.ts";
import type { EventName } from "../../src/events/names.ts";
import { insertWebhook } from "../../src/events/webhook-repo.ts";
import * as money from "../../src/jobs/money.ts";
import { keepEvents } from "../support/kept-events.ts";
import { deposit } from "../../src/wallets/index.ts";
import { LEDGER_MIGRATIONS } from "../../src/ledger/index.ts";
import { CombinedStatement, type Db } from "../../src/store/index.ts";
import { testDatabases } from "../support/db.ts";
import { sampleJob } from "./fixtures.ts";

async function subscribe(db: Db, wallet: string, events: EventName[]): Promise<string> {
  const id = newId("wh");
  await insertWebhook(db, { id, wallet, url: "https://example.com/hook", events, sealedSecret: "v1:x:y:z" });
  return id;
}

async function eventsOf(db: Db, account: string): Promise<{ id: string; name: string; envelope: Record<string, any> }[]> {
  const rows = await db.query<{ id: string; name: string; body: string }>("SELECT id, name, body FROM events WHERE account = $1 ORDER BY id", [account]);
  return rows.map((r) => ({ id: r.id, name: r.name, envelope: JSON.parse(r.body) }));
}

async function deliveriesOf(db: Db, webhookId: string): Promise<string[]> {
  const rows = await db.query<{ name: string }>(
    "SELECT e.name FROM webhook_deliveries d JOIN events e ON e.id = d.event_id WHERE d.webhook_id = $1 ORDER BY d.event_id",
    [webhookId],
  );
  return rows.map((r) => r.name);
}

/** A wallet with `credits`, whose events are kept (keepEvents). */
async function fundedWallet(db: Db, credits: number): Promise<string> {
  const wallet = generateKeypair().address;
  await keepEvents(db, wallet);
  await ensureWallet(db, wallet);
  await deposit(db, wallet, credits, `ref-${wallet}`);
  return wallet;
}

/** What the deposit path does once a deposit is credited: the topup event, then the credit.low rule. */
async function reportTopup(db: Db, wallet: string, creditsAdded: number, depositTx: string): Promise<void> {
  const creditsRemaining = await money.availableCredits(db, wallet);
  await emitCreditTopup(db, { wallet, creditsAdded, creditsRemaining, depositTx });
  await money.checkCreditLow(db, wallet, creditsRemaining, false);
}

for (const backend of testDatabases()) {
  describe(`events outbox on ${backend.name}`, () => {
    let db: Db;
    // One database for the file: each test works on wallets of its own.
    before(async () => {
      db = await backend.open({ migrations: [...LEDGER_MIGRATIONS, ...ACCOUNTS_MIGRATIONS, ...EVENTS_MIGRATIONS] });
    });
    after(() => db.close());

    test("an event reaches only its account's webhooks subscribed to its name", async () => {
      const [alice, bob] = [generateKeypair().address, generateKeypair().address];
      const all = await subscribe(db, alice, ["job.submitted", "job.completed"]);
      const completedOnly = await subscribe(db, alice, ["job.completed"]);
      const bobs = await subscribe(db, bob, ["job.submitted", "job.completed"]);
      await emitEvent(db, { account: alice, name: "job.submitted", data: {} });
      await emitEvent(db, { account: alice, name: "job.completed", data: {} });
      assert.deepEqual(await deliveriesOf(db, all), ["job.submitted", "job.completed"]);
      assert.deepEqual(await deliveriesOf(db, completedOnly), ["job.completed"]);
      assert.deepEqual(await deliveriesOf(db, bobs), []);
    });

    test("an event no webhook of its account subscribes to is not written", async () => {
      const wallet = generateKeypair().address;
      await subscribe(db, wallet, ["job.completed"]);
      assert.equal(await emitEvent(db, { account: wallet, name: "job.submitted", data: {} }), undefined);
      const completed = await emitEvent(db, { account: wallet, name: "job.completed", data: {} });
      assert.deepEqual((await eventsOf(db, wallet)).map((e) => [e.id, e.name]), [[completed, "job.completed"]]);
      assert.equal(await emitEvent(db, { account: generateKeypair().address, name: "job.completed", data: {} }), undefined, "an account with no webhook");
    });

    test("an event written in a transaction that rolls back does not exist", async () => {
      const wallet = generateKeypair().address;
      const hook = await subscribe(db, wallet, ["credit.topup"]);
      await assert.rejects(
        db.transaction(async (tx) => {
          await emitEvent(tx, { account: wallet, name: "credit.topup", data: {} });
          throw new Error("the change failed");
        }),
        /the change failed/,
      );
      assert.deepEqual(await eventsOf(db, wallet), []);
      assert.deepEqual(await deliveriesOf(db, hook), []);
    });

    test("one change reported twice is one event", async () => {
      const wallet = generateKeypair().address;
      const hook = await subscribe(db, wallet, ["job.failed"]);
      const first = await emitEvent(db, { account: wallet, name: "job.failed", data: {}, dedupeKey: "job.failed:job_x" });
      const second = await emitEvent(db, { account: wallet, name: "job.failed", data: {}, dedupeKey: "job.failed:job_x" });
      assert.ok(first);
      assert.equal(second, undefined);
      assert.deepEqual(await deliveriesOf(db, hook), ["job.failed"]);
    });

    test("credit.low fires once when the balance crosses below the threshold and re-arms above it", async () => {
      const wallet = await fundedWallet(db, 150);
      const fired = async () => (await eventsOf(db, wallet)).filter((e) => e.name === "credit.low").map((e) => e.envelope.data);
      for (const balance of [150, 110, 100]) await money.checkCreditLow(db, wallet, balance, true);
      assert.deepEqual(await fired(), [], "at or above the threshold");
      await money.checkCreditLow(db, wallet, 99, true);
      await money.checkCreditLow(db, wallet, 50, true);
      await money.checkCreditLow(db, wallet, 60, false);
      await money.checkCreditLow(db, wallet, 55, true);
      assert.deepEqual(await fired(), [{ credits_remaining: 99, usdc_value: 0.99, threshold: 100 }], "once per crossing");
      await money.checkCreditLow(db, wallet, 100, false);
      await money.checkCreditLow(db, wallet, 10, true);
      assert.equal((await fired()).length, 2, "re-armed at the threshold, fired again below it");

      await db.query("UPDATE wallets SET credit_low_threshold = 20 WHERE address = $1", [wallet]);
      await money.checkCreditLow(db, wallet, 30, false);
      await money.checkCreditLow(db, wallet, 19, true);
      assert.deepEqual((await fired()).at(-1), { credits_remaining: 19, usdc_value: 0.19, threshold: 20 }, "the wallet's own threshold");
    });

    test("a run of changes recorded in one go fires where the same changes one by one would", async () => {
      const run = [
        { creditsRemaining: 120, fell: true },
        { creditsRemaining: 99, fell: true },
        { creditsRemaining: 80, fell: true },
        { creditsRemaining: 100, fell: false },
        { creditsRemaining: 30, fell: true },
        { creditsRemaining: 40, fell: false },
      ];
      const [oneByOne, inOneGo] = [await fundedWallet(db, 150), await fundedWallet(db, 150)];
      for (const change of run) await money.checkCreditLow(db, oneByOne, change.creditsRemaining, change.fell);
      const lows = await db.transaction(async (tx) => {
        const writes = new CombinedStatement(tx);
        const crossings = money.creditLowCrossings(writes, await lockCreditLowSides(tx, [inOneGo]), run.map((change) => ({ wallet: inOneGo, ...change })));
        await writes.run(tx);
        return crossings;
      });
      assert.deepEqual(
        lows.map((low) => low?.creditsRemaining),
        [undefined, 99, undefined, undefined, 30, undefined],
      );
      const fired = (await eventsOf(db, oneByOne)).filter((e) => e.name === "credit.low").map((e) => e.envelope.data.credits_remaining);
      assert.deepEqual(fired, [99, 30]);
      // Both wallets are left on the same side: the next fall below fires for neither, a rise re-arms both.
      for (const wallet of [oneByOne, inOneGo]) {
        const [row] = await db.query<{ armed: boolean }>("SELECT credit_low_armed AS armed FROM wallets WHERE address = $1", [wallet]);
        assert.equal(row!.armed, false);
      }
    });

    test("a run of rises sets each wallet's flag where the same changes one by one would leave it", async () => {
      const runs = [[99, 120], [120, 99], [30, 40]];
      for (const balances of runs) {
        const [oneByOne, inOneGo] = [await fundedWallet(db, 150), await fundedWallet(db, 150)];
        // Both below the threshold first, disarmed.
        for (const wallet of [oneByOne, inOneGo]) await money.checkCreditLow(db, wallet, 50, true);
        for (const balance of balances) await money.checkCreditLow(db, oneByOne, balance, false);
        await db.transaction(async (tx) => {
          const writes = new CombinedStatement(tx);
          addCreditLowSides(writes, balances.map((availableCredits) => ({ wallet: inOneGo, availableCredits })));
          await writes.run(tx);
        });
        const armed = await db.query<{ armed: boolean }>("SELECT credit_low_armed AS armed FROM wallets WHERE address = ANY($1::text[]) ORDER BY address = $2", [[oneByOne, inOneGo], oneByOne]);
        assert.equal(armed[0]!.armed, armed[1]!.armed, `after ${balances.join(", ")}`);
        assert.equal(armed[0]!.armed, balances.at(-1)! >= 100);
      }
    });

    test("two changes crossing the threshold at once fire credit.low once", async () => {
      const wallet = await fundedWallet(db, 150);
      await money.checkCreditLow(db, wallet, 150, false);
      await Promise.all([90, 80, 70].map((balance) => db.transaction((tx) => money.checkCreditLow(tx, wallet, balance, true))));
      assert.equal((await eventsOf(db, wallet)).filter((e) => e.name === "credit.low").length, 1);
    });

    test("a new wallet funded below the threshold gets no credit.low until it has been above it", async () => {
      const wallet = await fundedWallet(db, 50);
      await reportTopup(db, wallet, 50, "first");
      await money.checkCreditLow(db, wallet, 48, true);
      assert.deepEqual((await eventsOf(db, wallet)).map((e) => e.name), ["credit.topup"]);
      await deposit(db, wallet, 100, "second");
      await reportTopup(db, wallet, 100, "second");
      await money.checkCreditLow(db, wallet, 90, true);
      assert.deepEqual((await eventsOf(db, wallet)).map((e) => e.name), ["credit.topup", "credit.topup", "credit.low"]);
    });

    test("reserving across the threshold emits job.submitted then credit.low in the same transaction", async () => {
      const wallet = await fundedWallet(db, 102);
      const job = sampleJob(wallet);
      await db.transaction(async (tx) => {
        await money.checkCreditLow(tx, wallet, await money.availableCredits(tx, wallet), false);
        await money.reserve(tx, wallet, job.jobId, job.creditsLocked);
        const creditsRemaining = await money.availableCredits(tx, wallet);
        await emitJobSubmitted(tx, { ...job, creditsRemaining });
        await money.checkCreditLow(tx, wallet, creditsRemaining, true);
      });
      const events = await eventsOf(db, wallet);
      assert.deepEqual(events.map((e) => e.name), ["job.submitted", "credit.low"]);
      assert.equal(events[0]!.envelope.data.credits_remaining, 98);
      assert.ok(events[0]!.id < events[1]!.id, "ids are in event order");
    });

    test("every emitter writes its envelope to the right account", async () => {
      const wallet = await fundedWallet(db, 500);
      const worker = generateKeypair().address;
      await keepEvents(db, worker);
      const job = sampleJob(wallet, { workerAddress: worker });
      const creditsRemaining = await money.availableCredits(db, wallet);
      await emitJobSubmitted(db, { ...job, creditsRemaining });
      await emitJobProcessing(db, { ...job, status: "processing" });
      await emitJobCompleted(db, { ...job, status: "settled", creditsCharged: 2, completionTokens: 2, settlementTx: "settle", slot: 7, creditsRemaining });
      const failed = sampleJob(wallet, { status: "failed", failureReason: "worker_error", refundTx: "refund" });
      await emitJobEnded(db, { ...failed, creditsRefunded: failed.creditsLocked, creditsRemaining });
      const timedOut = sampleJob(wallet, { status: "refunded", failureReason: "timeout", refundTx: "refund2" });
      await emitJobEnded(db, { ...timedOut, creditsRefunded: timedOut.creditsLocked, creditsRemaining });
      await emitJobDisputed(db, { ...job, status: "disputed", creditsCharged: 2, yourHash: "sha256:aa", workerHash: "sha256:bb", disputeTx: "d", arbitrationWindowHours: 72 });
      await emitCreditTopup(db, { wallet, creditsAdded: 100, creditsRemaining, depositTx: "dep" });
      await emitWorkerRegistered(db, { address: worker, models: ["m"], staked: true });
      await emitWorkerSlashed(db, { workerAddress: worker, slashAmountSvc: 1000, slashTx: "slash", reason: "fraudulent_proof", relatedJobId: job.jobId });

      const mine = await eventsOf(db, wallet);
      assert.deepEqual(
        mine.map((e) => e.name),
        ["job.submitted", "job.processing", "job.completed", "job.failed", "job.timeout", "job.disputed", "credit.topup"],
      );
      for (const { envelope } of mine) {
        assert.match(envelope.id, /^evt_[0-9A-Z]{26}$/);
        assert.equal(envelope.api_version, "2026-11-21");
        assert.ok(!Number.isNaN(Date.parse(envelope.created_at)));
        if (envelope.event.startsWith("job.")) assert.equal(envelope.data.job_id, envelope.event.startsWith("job.failed") ? failed.jobId : envelope.event === "job.timeout" ? timedOut.jobId : job.jobId);
      }
      const byName = Object.fromEntries(mine.map((e) => [e.name, e.envelope.data]));
      assert.deepEqual(Object.keys(byName["job.submitted"]), ["job_id", "model", "tier", "status", "credits_locked", "credits_remaining", "escrow_tx"]);
      assert.equal(byName["job.processing"].worker_address, worker);
      assert.equal(byName["job.timeout"].status, "refunded");
      assert.equal(byName["job.failed"].reason, "worker_error");
      assert.deepEqual(byName["job.disputed"].arbitration_window_hours, 72);
      assert.deepEqual(byName["credit.topup"], { credits_added: 100, credits_remaining: 500, usdc_value: 1, deposit_tx: "dep" });

      const theirs = await eventsOf(db, worker);
      assert.deepEqual(theirs.map((e) => e.name), ["worker.registered", "worker.slashed"]);
      assert.deepEqual(theirs[0]!.envelope.data, { worker_address: worker, models: ["m"], staked: true });
    });
  });
}
