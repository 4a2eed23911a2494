import assert from "node:assert/strict";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  AccountConflictError,
  AccountNotFoundError,
  ensureAccount,
  ExceedsCreditsError,
  FUNDING_ACCOUNT,
  getAccount,
  InvalidTransferError,
  LEDGER_MIGRATIONS,
  listTransfers,
  transfer,
  TransferIdConflictError,
  TREASURY_ACCOUNT,
  walletAccountId,
} from "../../src/ledger/index.ts";
import { sqlState, type Db } from "../../src/store/index.ts";
import { testDatabases } from "../support/db.ts";
import { account, assertHealthy, fundedWallet, uniqueId } from "./fixtures.ts";

for (const backend of testDatabases({ sqlite: true })) {
  describe(`ledger transfers on ${backend.name}`, () => {
    let db: Db;
    before(async () => {
      db = await backend.open({ migrations: LEDGER_MIGRATIONS });
    });
    after(() => db.close());

    it("starts with the shared funding and treasury accounts", async () => {
      assert.equal((await account(db, FUNDING_ACCOUNT)).code, "funding");
      assert.equal((await account(db, TREASURY_ACCOUNT)).code, "treasury");
      assert.equal(await getAccount(db, "no-such-account"), null);
    });

    it("creates accounts idempotently, limiting wallets by default", async () => {
      const id = uniqueId("wallet");
      const first = await ensureAccount(db, { id, code: "wallet" });
      const again = await ensureAccount(db, { id, code: "wallet" });
      assert.deepEqual(again, first);
      assert.equal(first.debitsMustNotExceedCredits, true);
      assert.equal(first.available, 0n);
      assert.equal((await ensureAccount(db, { id: uniqueId("worker"), code: "worker" })).debitsMustNotExceedCredits, false);
      await assert.rejects(ensureAccount(db, { id, code: "worker" }), AccountConflictError);
      await assert.rejects(ensureAccount(db, { id, code: "wallet", debitsMustNotExceedCredits: false }), AccountConflictError);
    });

    it("deposits from funding, which may run a debit balance", async () => {
      const big = 2n ** 60n + 1n; // beyond 2^53: must stay exact
      const address = await fundedWallet(db, big);
      const wallet = await account(db, walletAccountId(address));
      assert.equal(typeof wallet.creditsPosted, "bigint");
      assert.equal(wallet.creditsPosted, big);
      assert.equal(wallet.balance, big);
      assert.equal(wallet.available, big);
      assert.ok((await account(db, FUNDING_ACCOUNT)).balance <= -big);
      await assertHealthy(db);
    });

    it("moves value between wallets and refuses to overdraw a limited one", async () => {
      const alice = await fundedWallet(db, 50_000n);
      const bob = await fundedWallet(db, 0n);
      const moved = await transfer(db, {
        id: uniqueId("t"),
        debitAccountId: walletAccountId(alice),
        creditAccountId: walletAccountId(bob),
        amount: 30_000n,
        code: "deposit" as const,
        reference: "ref-1",
      });
      assert.equal(moved.status, "created");
      assert.equal(moved.transfer.amount, 30_000n);
      assert.equal(moved.transfer.kind, "posted");
      assert.equal(moved.transfer.reference, "ref-1");
      assert.ok(moved.transfer.createdAt instanceof Date);

      const refused = await transfer(db, {
        id: uniqueId("t"),
        debitAccountId: walletAccountId(alice),
        creditAccountId: walletAccountId(bob),
        amount: 20_001n,
        code: "deposit" as const,
      }).then(
        () => assert.fail("overdraft accepted"),
        (err: unknown) => err,
      );
      assert.ok(refused instanceof ExceedsCreditsError);
      assert.equal(refused.available, 20_000n);
      assert.equal(refused.accountId, walletAccountId(alice));
      assert.equal((await account(db, walletAccountId(alice))).balance, 20_000n);
      assert.equal((await account(db, walletAccountId(bob))).balance, 30_000n);
      await assertHealthy(db);
    });

    it("applies a retried transfer id once and refuses the id for a different transfer", async () => {
      const alice = await fundedWallet(db, 10_000n);
      const bob = await fundedWallet(db, 0n);
      const input = {
        id: uniqueId("t"),
        debitAccountId: walletAccountId(alice),
        creditAccountId: walletAccountId(bob),
        amount: 4_000n,
        code: "deposit" as const,
      };
      const first = await transfer(db, input);
      const retried = await transfer(db, input);
      assert.equal(first.status, "created");
      assert.equal(retried.status, "exists");
      assert.deepEqual(retried.transfer, first.transfer);
      const concurrent = await Promise.all([transfer(db, input), transfer(db, input)]);
      assert.deepEqual(concurrent.map((r) => r.status), ["exists", "exists"]);
      assert.equal((await account(db, walletAccountId(bob))).balance, 4_000n);

      await assert.rejects(transfer(db, { ...input, amount: 4_001n }), TransferIdConflictError);
      await assert.rejects(transfer(db, { ...input, reference: "other" }), TransferIdConflictError);
      await assert.rejects(transfer(db, { ...input, pending: true }), TransferIdConflictError);
      await assertHealthy(db);
    });

    it("applies the first of two concurrent new transfers with one id", async () => {
      const alice = await fundedWallet(db, 10_000n);
      const input = {
        id: uniqueId("t"),
        debitAccountId: walletAccountId(alice),
        creditAccountId: TREASURY_ACCOUNT,
        amount: 1_000n,
        code: "protocol_fee" as const,
      };
      const results = await Promise.all(Array.from({ length: 5 }, () => transfer(db, input)));
      assert.deepEqual(results.map((r) => r.status).sort(), ["created", "exists", "exists", "exists", "exists"]);
      assert.equal((await account(db, walletAccountId(alice))).balance, 9_000n);
    });

    it("refuses malformed transfers and unknown accounts without recording anything", async () => {
      const alice = await fundedWallet(db, 10_000n);
      const base = { debitAccountId: walletAccountId(alice), creditAccountId: TREASURY_ACCOUNT, code: "protocol_fee" as const };
      await assert.rejects(transfer(db, { ...base, id: uniqueId("t"), amount: 0n }), InvalidTransferError);
      await assert.rejects(transfer(db, { ...base, id: uniqueId("t"), amount: -1n }), InvalidTransferError);
      await assert.rejects(transfer(db, { ...base, id: uniqueId("t"), amount: 5 as unknown as bigint }), InvalidTransferError);
      await assert.rejects(transfer(db, { ...base, id: "", amount: 1n }), InvalidTransferError);
      await assert.rejects(
        transfer(db, { ...base, id: uniqueId("t"), creditAccountId: base.debitAccountId, amount: 1n }),
        InvalidTransferError,
      );
      const id = uniqueId("t");
      await assert.rejects(transfer(db, { ...base, id, creditAccountId: "wallet:nobody", amount: 1n }), (err) => {
        assert.ok(err instanceof AccountNotFoundError);
        assert.equal(err.accountId, "wallet:nobody");
        return true;
      });
      assert.deepEqual(await listTransfers(db, { accountId: walletAccountId(alice) }).then((ts) => ts.length), 1);
      await assertHealthy(db);
    });

    it("lists transfers by account, reference and kind, oldest first", async () => {
      const alice = await fundedWallet(db, 10_000n);
      const reference = uniqueId("job");
      for (const [i, pending] of [false, true, false].entries()) {
        await transfer(db, {
          id: `${reference}:${i}`,
          debitAccountId: walletAccountId(alice),
          creditAccountId: TREASURY_ACCOUNT,
          amount: 100n,
          pending,
          code: "protocol_fee" as const,
          reference,
        });
      }
      const byReference = await listTransfers(db, { reference });
      assert.deepEqual(byReference.map((t) => t.id), [`${reference}:0`, `${reference}:1`, `${reference}:2`]);
      assert.deepEqual(byReference.map((t) => t.pendingState), [null, "pending", null]);
      const byAccount = await listTransfers(db, { accountId: walletAccountId(alice) });
      assert.deepEqual(byAccount.map((t) => t.id), [`deposit_${alice}`, ...byReference.map((t) => t.id)]);
      assert.deepEqual((await listTransfers(db, { reference, kind: "pending" })).map((t) => t.id), [`${reference}:1`]);
      assert.equal((await listTransfers(db, { accountId: walletAccountId(alice), limit: 2 })).length, 2);
    });

    it("joins a caller's transaction: all or nothing, and a refusal leaves it usable", async () => {
      await db.exec("CREATE TABLE IF NOT EXISTS caller_jobs (id text PRIMARY KEY, status text NOT NULL)");
      const alice = await fundedWallet(db, 10_000n);
      const wallet = walletAccountId(alice);
      const base = { debitAccountId: wallet, creditAccountId: TREASURY_ACCOUNT, code: "protocol_fee" as const };

      await assert.rejects(
        db.transaction(async (tx) => {
          await tx.query("INSERT INTO caller_jobs VALUES ('job-a', 'charged')");
          await transfer(tx, { ...base, id: uniqueId("t"), amount: 3_000n });
          throw new Error("caller failed after the transfer");
        }),
        /caller failed/,
      );
      assert.equal((await account(db, wallet)).balance, 10_000n);

      await db.transaction(async (tx) => {
        await tx.query("INSERT INTO caller_jobs VALUES ('job-b', 'pending')");
        await assert.rejects(transfer(tx, { ...base, id: uniqueId("t"), amount: 10_001n }), ExceedsCreditsError);
        await tx.query("UPDATE caller_jobs SET status = 'refused' WHERE id = 'job-b'");
        await transfer(tx, { ...base, id: uniqueId("t"), amount: 2_500n });
      });
      assert.deepEqual(await db.query("SELECT status FROM caller_jobs WHERE id = 'job-b'"), [{ status: "refused" }]);
      assert.equal((await account(db, wallet)).balance, 7_500n);
      await assertHealthy(db);
    });

    it("keeps transfers immutable in the database", async () => {
      const alice = await fundedWallet(db, 1_000n);
      const id = `deposit_${alice}`;
      await assert.rejects(db.query("UPDATE ledger_transfers SET amount = 1 WHERE id = $1", [id]), (err) => sqlState(err) === "23001");
      await assert.rejects(db.query("DELETE FROM ledger_transfers WHERE id = $1", [id]), (err) => sqlState(err) === "23001");
      assert.equal((await listTransfers(db, { accountId: walletAccountId(alice) }))[0]!.amount, 1_000n);
    });
  });
}

it("no ledger code updates or deletes a transfer row", async () => {
  const dir = join(import.meta.dirname, "../../src/ledger");
  for (const file of await readdir(dir)) {
    const source = await readFile(join(dir, file), "utf8");
    assert.doesNotMatch(source, /UPDATE\s+ledger_transfers|DELETE\s+FROM\s+ledger_transfers|TRUNCATE/i, file);
  }
});
