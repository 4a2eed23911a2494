/**
 * Every ledger operation hands back the accounts it touched with their totals as it left them, so
 * callers (the job's escrow and settlement) never read a balance they just changed. Those figures
 * must be exactly what a fresh read finds, created or retried, inside a caller's transaction too.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  ensureWorkerAccount,
  escrowAccountId,
  FUNDING_ACCOUNT,
  getAccount,
  LEDGER_MIGRATIONS,
  postPending,
  reserve,
  settle,
  transfer,
  TREASURY_ACCOUNT,
  voidPending,
  walletAccountId,
  workerAccountId,
  type Account,
} from "../../src/ledger/index.ts";
import type { Db } from "../../src/store/index.ts";
import { testDatabases } from "../support/db.ts";
import { assertHealthy, fundedWallet, uniqueId } from "./fixtures.ts";

for (const backend of testDatabases({ sqlite: true })) {
  describe(`accounts returned by operations on ${backend.name}`, () => {
    let db: Db;
    before(async () => {
      db = await backend.open({ migrations: LEDGER_MIGRATIONS });
    });
    after(() => db.close());

    /** The returned accounts are the named ones, in id order, each equal to a fresh read. */
    async function assertFresh(returned: Account[], ids: string[]): Promise<void> {
      assert.deepEqual(returned.map((a) => a.id), [...ids].sort());
      for (const account of returned) assert.deepEqual(account, await getAccount(db, account.id), `figures of ${account.id}`);
    }

    const walletOf = (returned: Account[], address: string) => returned.find((a) => a.id === walletAccountId(address))!;

    it("reserve, settle and their retries return the wallet's new figures", async () => {
      const address = await fundedWallet(db, 1_000_000n);
      const worker = uniqueId("w");
      await ensureWorkerAccount(db, worker);
      const reference = uniqueId("job");
      const reserveInput = { id: `${reference}:reserve`, wallet: address, amount: 400_000n, reference };
      const reserved = await reserve(db, reserveInput);
      assert.equal(walletOf(reserved.accounts, address).available, 600_000n);
      await assertFresh(reserved.accounts, [walletAccountId(address), escrowAccountId(address)]);
      await assertFresh((await reserve(db, reserveInput)).accounts, [walletAccountId(address), escrowAccountId(address)]);

      const settleInput = {
        id: `${reference}:settle`,
        reservationId: reserveInput.id,
        charge: 100_000n,
        payouts: [
          { accountId: workerAccountId(worker), amount: 75_000n, code: "worker_payout" as const },
          { accountId: TREASURY_ACCOUNT, amount: 25_000n, code: "protocol_fee" as const },
        ],
      };
      const settled = await settle(db, settleInput);
      assert.equal(walletOf(settled.accounts, address).available, 900_000n);
      const touched = [walletAccountId(address), escrowAccountId(address), workerAccountId(worker), TREASURY_ACCOUNT];
      await assertFresh(settled.accounts, touched);
      const retried = await settle(db, settleInput);
      assert.equal(retried.status, "exists");
      await assertFresh(retried.accounts, touched);
      await assertHealthy(db);
    });

    it("void, post and a plain transfer return the figures, also inside a caller's transaction", async () => {
      const address = await fundedWallet(db, 500_000n);
      const ids = [walletAccountId(address), escrowAccountId(address)];
      const first = uniqueId("job");
      await reserve(db, { id: `${first}:reserve`, wallet: address, amount: 200_000n });
      const voided = await db.transaction(async (tx) => {
        const result = await voidPending(tx, { id: `${first}:void`, pendingId: `${first}:reserve` });
        assert.deepEqual(result.accounts, await Promise.all(ids.sort().map((id) => getAccount(tx, id))), "fresh inside the transaction");
        return result;
      });
      assert.equal(walletOf(voided.accounts, address).available, 500_000n);
      await assertFresh(voided.accounts, ids);

      const second = uniqueId("job");
      await reserve(db, { id: `${second}:reserve`, wallet: address, amount: 300_000n });
      const posted = await postPending(db, { id: `${second}:post`, pendingId: `${second}:reserve`, amount: 120_000n });
      assert.equal(walletOf(posted.accounts, address).available, 380_000n);
      await assertFresh(posted.accounts, ids);

      const deposited = await transfer(db, { id: uniqueId("deposit"), debitAccountId: FUNDING_ACCOUNT, creditAccountId: walletAccountId(address), amount: 20_000n, code: "deposit" });
      assert.equal(walletOf(deposited.accounts, address).available, 400_000n);
      await assertFresh(deposited.accounts, [FUNDING_ACCOUNT, walletAccountId(address)]);
      await assertHealthy(db);
    });
  });
}
