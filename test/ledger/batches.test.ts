/**
 * Reservations, resolutions and payouts in batches (reserveAll, resolveAll, payOutAll), as group
 * commit uses them: the same movements as one at a time, in one operation, all or nothing; and a
 * posted charge given back (returnCharge); resolutions naming their reservations as made
 * (`reserved`), checked in the statement that records them.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  ensureWorkerAccount,
  escrowAccountId,
  ExceedsCreditsError,
  getTransfer,
  InvalidTransferError,
  LEDGER_MIGRATIONS,
  payOutAll,
  PendingTransferResolvedError,
  reserve,
  reserveAll,
  reservedTransfer,
  resolveAll,
  returnCharge,
  TREASURY_ACCOUNT,
  voidPending,
  walletAccountId,
  workerAccountId,
} from "../../src/ledger/index.ts";
import type { Db } from "../../src/store/index.ts";
import { testDatabases } from "../support/db.ts";
import { account, assertHealthy, fundedWallet, uniqueId } from "./fixtures.ts";

for (const backend of testDatabases({ sqlite: true })) {
  describe(`ledger batches on ${backend.name}`, () => {
    let db: Db;
    before(async () => {
      db = await backend.open({ migrations: LEDGER_MIGRATIONS });
    });
    after(() => db.close());

    it("reserves for several wallets at once, returning every account as the batch left it", async () => {
      const [a, b] = [await fundedWallet(db, 500n), await fundedWallet(db, 300n)];
      const ids = [uniqueId("r"), uniqueId("r"), uniqueId("r")];
      const accounts = await reserveAll(db, [
        { id: ids[0]!, wallet: a, amount: 100n },
        { id: ids[1]!, wallet: b, amount: 300n },
        { id: ids[2]!, wallet: a, amount: 150n },
      ]);
      const byId = new Map(accounts.map((acc) => [acc.id, acc]));
      assert.equal(byId.get(walletAccountId(a))!.available, 250n);
      assert.equal(byId.get(walletAccountId(b))!.available, 0n);
      assert.equal(byId.get(escrowAccountId(a))!.creditsPending, 250n);
      for (const id of ids) assert.equal((await getTransfer(db, id))!.pendingState, "pending");
      await assertHealthy(db);
    });

    it("records none of a batch in which one wallet cannot cover its share", async () => {
      const [a, b] = [await fundedWallet(db, 500n), await fundedWallet(db, 100n)];
      const ids = [uniqueId("r"), uniqueId("r"), uniqueId("r")];
      // b can cover each of its reservations alone, not both.
      await assert.rejects(
        reserveAll(db, [
          { id: ids[0]!, wallet: a, amount: 100n },
          { id: ids[1]!, wallet: b, amount: 60n },
          { id: ids[2]!, wallet: b, amount: 60n },
        ]),
        (error: unknown) => error instanceof ExceedsCreditsError && error.accountId === walletAccountId(b),
      );
      for (const id of ids) assert.equal(await getTransfer(db, id), null);
      assert.equal((await account(db, walletAccountId(a))).available, 500n);
      await assertHealthy(db);
    });

    it("settles and voids several reservations at once, paying out exactly as one at a time", async () => {
      const wallet = await fundedWallet(db, 1_000n);
      const worker = uniqueId("w");
      await ensureWorkerAccount(db, worker);
      const [first, second] = [uniqueId("r"), uniqueId("r")];
      await reserve(db, { id: first, wallet, amount: 400n });
      await reserve(db, { id: second, wallet, amount: 300n });
      const treasuryBefore = (await account(db, TREASURY_ACCOUNT)).balance;
      const accounts = await resolveAll(db, [
        {
          id: `${first}:charge`,
          pendingId: first,
          post: true,
          amount: 100n,
          code: "charge",
          payouts: [
            { accountId: workerAccountId(worker), amount: 75n, code: "worker_payout" },
            { accountId: TREASURY_ACCOUNT, amount: 25n, code: "protocol_fee" },
          ],
        },
        { id: `${second}:void`, pendingId: second, post: false, payouts: [] },
      ]);
      assert.equal(accounts.find((acc) => acc.id === walletAccountId(wallet))!.available, 900n);
      assert.equal((await account(db, workerAccountId(worker))).balance, 75n);
      assert.equal((await account(db, TREASURY_ACCOUNT)).balance - treasuryBefore, 25n);
      assert.equal((await account(db, escrowAccountId(wallet))).balance, 0n);
      assert.equal((await getTransfer(db, first))!.pendingState, "posted");
      assert.equal((await getTransfer(db, second))!.pendingState, "voided");
      await assertHealthy(db);
    });

    it("resolves none of a batch holding a reservation resolved before", async () => {
      const wallet = await fundedWallet(db, 1_000n);
      const [open, done] = [uniqueId("r"), uniqueId("r")];
      await reserve(db, { id: open, wallet, amount: 200n });
      await reserve(db, { id: done, wallet, amount: 200n });
      await voidPending(db, { id: `${done}:void`, pendingId: done });
      await assert.rejects(
        resolveAll(db, [
          { id: `${open}:void`, pendingId: open, post: false, payouts: [] },
          { id: `${done}:again`, pendingId: done, post: false, payouts: [] },
        ]),
        PendingTransferResolvedError,
      );
      assert.equal((await getTransfer(db, open))!.pendingState, "pending");
      assert.equal((await account(db, walletAccountId(wallet))).available, 800n);
      await assertHealthy(db);
    });

    it("charges reservations named as they were made, in the statement that records the charges", async () => {
      const wallet = await fundedWallet(db, 1_000n);
      const locks = [{ id: uniqueId("r"), wallet, amount: 400n, reference: "job-1" }, { id: uniqueId("r"), wallet, amount: 300n }];
      await reserveAll(db, locks);
      const charged = await resolveAll(db, [
        { id: `${locks[0]!.id}:charge`, pendingId: locks[0]!.id, post: true, amount: 100n, code: "charge", payouts: [], reserved: reservedTransfer(locks[0]!) },
        { id: `${locks[1]!.id}:void`, pendingId: locks[1]!.id, post: false, payouts: [], reserved: reservedTransfer(locks[1]!) },
      ]);
      assert.equal(charged.find((acc) => acc.id === walletAccountId(wallet))!.available, 900n);
      assert.equal((await account(db, escrowAccountId(wallet))).balance, 100n);
      assert.equal((await account(db, escrowAccountId(wallet))).creditsPending, 0n);
      assert.equal((await getTransfer(db, locks[0]!.id))!.pendingState, "posted");
      assert.equal((await getTransfer(db, `${locks[0]!.id}:charge`))!.reference, "job-1");
      assert.equal((await getTransfer(db, locks[1]!.id))!.pendingState, "voided");
      await assertHealthy(db);
    });

    it("resolves reservations named otherwise than they were made as they were made, by reading them", async () => {
      const wallet = await fundedWallet(db, 1_000n);
      const [larger, referenced, smaller] = [{ id: uniqueId("r"), wallet, amount: 400n }, { id: uniqueId("r"), wallet, amount: 300n }, { id: uniqueId("r"), wallet, amount: 200n }];
      await reserveAll(db, [larger, referenced, smaller]);
      // Taken as named, the first would release 600 from the pending totals and not 400, and the
      // third could not be charged 150 at all.
      await resolveAll(db, [
        { id: `${larger.id}:charge`, pendingId: larger.id, post: true, amount: 100n, code: "charge", payouts: [], reserved: reservedTransfer({ ...larger, amount: 600n }) },
        { id: `${referenced.id}:void`, pendingId: referenced.id, post: false, payouts: [], reserved: reservedTransfer({ ...referenced, reference: "another-job" }) },
        { id: `${smaller.id}:charge`, pendingId: smaller.id, post: true, amount: 150n, code: "charge", payouts: [], reserved: reservedTransfer({ ...smaller, amount: 50n }) },
      ]);
      assert.equal((await account(db, walletAccountId(wallet))).available, 750n);
      assert.equal((await account(db, escrowAccountId(wallet))).creditsPending, 0n);
      assert.equal((await getTransfer(db, `${referenced.id}:void`))!.reference, null);
      await assertHealthy(db);
    });

    it("refuses a reservation named as made that was resolved before, and one named under another id", async () => {
      const wallet = await fundedWallet(db, 1_000n);
      const lock = { id: uniqueId("r"), wallet, amount: 200n };
      await reserve(db, lock);
      await voidPending(db, { id: `${lock.id}:void`, pendingId: lock.id });
      await assert.rejects(resolveAll(db, [{ id: `${lock.id}:again`, pendingId: lock.id, post: false, payouts: [], reserved: reservedTransfer(lock) }]), /already recorded/);
      await assert.rejects(
        resolveAll(db, [{ id: `${lock.id}:other`, pendingId: lock.id, post: false, payouts: [], reserved: reservedTransfer({ ...lock, id: uniqueId("r") }) }]),
        InvalidTransferError,
      );
      assert.equal((await account(db, walletAccountId(wallet))).available, 1_000n);
      await assertHealthy(db);
    });

    it("charges first and pays out later, with the charge held in the wallet's escrow account between", async () => {
      const wallet = await fundedWallet(db, 1_000n);
      const worker = uniqueId("w");
      await ensureWorkerAccount(db, worker);
      const [paid, refused] = [uniqueId("r"), uniqueId("r")];
      await reserve(db, { id: paid, wallet, amount: 400n });
      await reserve(db, { id: refused, wallet, amount: 300n });
      const charges = [
        { id: `${paid}:charge`, pendingId: paid, post: true, amount: 100n, code: "charge" as const, payouts: [] },
        { id: `${refused}:charge`, pendingId: refused, post: true, amount: 50n, code: "charge" as const, payouts: [] },
      ];
      const charged = await resolveAll(db, charges);
      assert.equal(charged.find((acc) => acc.id === walletAccountId(wallet))!.available, 850n, "the unused part of each lock is back at once");
      assert.equal((await account(db, escrowAccountId(wallet))).balance, 150n);
      const treasuryBefore = (await account(db, TREASURY_ACCOUNT)).balance;
      const payouts = [
        { accountId: workerAccountId(worker), amount: 100n, code: "worker_payout" as const },
        { accountId: TREASURY_ACCOUNT, amount: 0n, code: "protocol_fee" as const },
      ];
      await payOutAll(db, [{ id: `${paid}:charge`, wallet, payouts }]);
      assert.equal((await account(db, workerAccountId(worker))).balance, 100n);
      assert.equal((await account(db, TREASURY_ACCOUNT)).balance, treasuryBefore, "a zero share records nothing");
      assert.equal(await getTransfer(db, `${paid}:charge:2`), null);
      await assert.rejects(payOutAll(db, [{ id: `${paid}:charge`, wallet, payouts }]), /already recorded/);
      // The other settlement was refused on-chain: its charge goes back, once.
      const returned = await returnCharge(db, { id: `${refused}:return`, wallet, amount: 50n });
      assert.equal(returned.accounts.find((acc) => acc.id === walletAccountId(wallet))!.available, 900n);
      assert.equal((await returnCharge(db, { id: `${refused}:return`, wallet, amount: 50n })).status, "exists");
      assert.equal((await account(db, escrowAccountId(wallet))).balance, 0n);
      await assertHealthy(db);
    });
  });
}
