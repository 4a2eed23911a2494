import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { splitPayout } from "../../src/core/payout.ts";
import {
  AccountNotFoundError,
  ensureWorkerAccount,
  escrowAccountId,
  getTransfer,
  InvalidTransferError,
  LEDGER_MIGRATIONS,
  listTransfers,
  PendingTransferResolvedError,
  reserve,
  settle,
  TREASURY_ACCOUNT,
  voidPending,
  walletAccountId,
  workerAccountId,
  type Payout,
} from "../../src/ledger/index.ts";
import type { Db } from "../../src/store/index.ts";
import { testDatabases } from "../support/db.ts";
import { account, assertHealthy, fundedWallet, uniqueId } from "./fixtures.ts";

for (const backend of testDatabases({ sqlite: true })) {
  describe(`settlement on ${backend.name}`, () => {
    let db: Db;
    before(async () => {
      db = await backend.open({ migrations: LEDGER_MIGRATIONS });
    });
    after(() => db.close());

    /** A funded wallet with a 100-credit reservation for a job, and a worker to pay. */
    async function job() {
      const address = await fundedWallet(db, 1_000_000n);
      const worker = uniqueId("w");
      await ensureWorkerAccount(db, worker);
      const reference = uniqueId("job");
      const reservationId = `${reference}:reserve`;
      await reserve(db, { id: reservationId, wallet: address, amount: 1_000_000n, reference });
      return { address, worker, reference, reservationId };
    }

    function payouts(worker: string, credits: number, staked: boolean): Payout[] {
      const split = splitPayout(credits, staked);
      return [
        { accountId: workerAccountId(worker), amount: split.worker, code: "worker_payout" },
        { accountId: TREASURY_ACCOUNT, amount: split.treasury, code: "protocol_fee" },
      ];
    }

    it("posts the charge and splits it to worker and treasury in one step", async () => {
      const { address, worker, reference, reservationId } = await job();
      const treasuryBefore = (await account(db, TREASURY_ACCOUNT)).balance;
      const result = await settle(db, { id: `${reference}:settle`, reservationId, charge: 370_000n, payouts: payouts(worker, 37, false) });
      assert.equal(result.status, "created");
      assert.equal(result.transfer.amount, 370_000n);
      assert.equal(result.transfer.code, "charge");
      assert.deepEqual(result.payouts.map((p) => [p.id, p.amount, p.code]), [
        [`${reference}:settle:1`, 277_500n, "worker_payout"],
        [`${reference}:settle:2`, 92_500n, "protocol_fee"],
      ]);

      const wallet = await account(db, walletAccountId(address));
      assert.equal(wallet.balance, 630_000n);
      assert.equal(wallet.available, 630_000n);
      assert.equal((await account(db, workerAccountId(worker))).balance, 277_500n);
      assert.equal((await account(db, TREASURY_ACCOUNT)).balance - treasuryBefore, 92_500n);
      const escrow = await account(db, escrowAccountId(address));
      assert.equal(escrow.balance, 0n);
      assert.equal(escrow.creditsPending, 0n);
      assert.deepEqual((await listTransfers(db, { reference })).map((t) => t.kind), ["pending", "post_pending", "posted", "posted"]);
      await assertHealthy(db);
    });

    it("pays a staked worker its larger share", async () => {
      const { worker, reservationId, reference } = await job();
      await settle(db, { id: `${reference}:settle`, reservationId, charge: 100_000n, payouts: payouts(worker, 10, true) });
      assert.equal((await account(db, workerAccountId(worker))).balance, 85_000n);
    });

    it("applies a retried settlement once", async () => {
      const { address, worker, reference, reservationId } = await job();
      const input = { id: `${reference}:settle`, reservationId, charge: 200_000n, payouts: payouts(worker, 20, false) };
      const first = await settle(db, input);
      const again = await settle(db, input);
      assert.equal(again.status, "exists");
      assert.deepEqual(again, { ...first, status: "exists" });
      assert.equal((await account(db, workerAccountId(worker))).balance, 150_000n);
      assert.equal((await account(db, walletAccountId(address))).balance, 800_000n);
      await assertHealthy(db);
    });

    it("refuses payouts that do not add up to the charge, changing nothing", async () => {
      const { worker, reference, reservationId } = await job();
      const short = payouts(worker, 20, false).map((p, i) => (i === 0 ? { ...p, amount: p.amount - 1n } : p));
      await assert.rejects(settle(db, { id: `${reference}:settle`, reservationId, charge: 200_000n, payouts: short }), InvalidTransferError);
      assert.equal((await getTransfer(db, reservationId))!.pendingState, "pending");
    });

    it("is all or nothing: a payout to an unknown account leaves the reservation open", async () => {
      const { address, reference, reservationId } = await job();
      const bad: Payout[] = [{ accountId: "worker:unknown", amount: 100_000n, code: "worker_payout" }];
      await assert.rejects(settle(db, { id: `${reference}:settle`, reservationId, charge: 100_000n, payouts: bad }), AccountNotFoundError);
      assert.equal((await getTransfer(db, reservationId))!.pendingState, "pending");
      assert.equal((await account(db, walletAccountId(address))).debitsPending, 1_000_000n);
      assert.equal(await getTransfer(db, `${reference}:settle`), null);
      await assertHealthy(db);
    });

    it("refuses to settle a reservation that was voided", async () => {
      const { worker, reference, reservationId } = await job();
      await voidPending(db, { id: `${reference}:void`, pendingId: reservationId });
      await assert.rejects(
        settle(db, { id: `${reference}:settle`, reservationId, charge: 100_000n, payouts: payouts(worker, 10, false) }),
        PendingTransferResolvedError,
      );
    });

    it("settles inside the caller's transaction together with its own rows", async () => {
      await db.exec("CREATE TABLE IF NOT EXISTS settled_jobs (id text PRIMARY KEY)");
      const { worker, reference, reservationId } = await job();
      await assert.rejects(
        db.transaction(async (tx) => {
          await tx.query("INSERT INTO settled_jobs VALUES ($1)", [reference]);
          await settle(tx, { id: `${reference}:settle`, reservationId, charge: 100_000n, payouts: payouts(worker, 10, false) });
          throw new Error("chain intent could not be written");
        }),
        /chain intent/,
      );
      assert.equal((await getTransfer(db, reservationId))!.pendingState, "pending");
      await db.transaction(async (tx) => {
        await tx.query("INSERT INTO settled_jobs VALUES ($1)", [reference]);
        await settle(tx, { id: `${reference}:settle`, reservationId, charge: 100_000n, payouts: payouts(worker, 10, false) });
      });
      assert.equal((await getTransfer(db, reservationId))!.pendingState, "posted");
      await assertHealthy(db);
    });
  });
}
