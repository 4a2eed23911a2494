import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  escrowAccountId,
  ExceedsPendingAmountError,
  getTransfer,
  LEDGER_MIGRATIONS,
  PendingTransferNotFoundError,
  PendingTransferResolvedError,
  postPending,
  reserve,
  TransferIdConflictError,
  voidPending,
  walletAccountId,
} from "../../src/ledger/index.ts";
import type { Db } from "../../src/store/index.ts";
import { testDatabases } from "../support/db.ts";
import { account, assertHealthy, fundedWallet, uniqueId } from "./fixtures.ts";

for (const backend of testDatabases({ sqlite: true })) {
  describe(`pending transfers on ${backend.name}`, () => {
    let db: Db;
    before(async () => {
      db = await backend.open({ migrations: LEDGER_MIGRATIONS });
    });
    after(() => db.close());

    /** A wallet holding 10,000 with a 6,000 reservation open. */
    async function reserved(): Promise<{ address: string; pendingId: string }> {
      const address = await fundedWallet(db, 10_000n);
      const pendingId = uniqueId("reserve");
      await reserve(db, { id: pendingId, wallet: address, amount: 6_000n, reference: "job_x" });
      return { address, pendingId };
    }

    it("reserves: available drops, balance stays", async () => {
      const { address, pendingId } = await reserved();
      const wallet = await account(db, walletAccountId(address));
      assert.equal(wallet.debitsPending, 6_000n);
      assert.equal(wallet.available, 4_000n);
      assert.equal(wallet.balance, 10_000n);
      assert.equal((await account(db, escrowAccountId(address))).creditsPending, 6_000n);
      assert.equal((await getTransfer(db, pendingId))!.pendingState, "pending");
      await assertHealthy(db);
    });

    it("posts part and releases the rest in the same step", async () => {
      const { address, pendingId } = await reserved();
      const posted = await postPending(db, { id: uniqueId("post"), pendingId, amount: 2_500n });
      assert.equal(posted.status, "created");
      assert.equal(posted.transfer.kind, "post_pending");
      assert.equal(posted.transfer.amount, 2_500n);
      assert.equal(posted.transfer.reference, "job_x");
      const wallet = await account(db, walletAccountId(address));
      assert.equal(wallet.debitsPending, 0n);
      assert.equal(wallet.debitsPosted, 2_500n);
      assert.equal(wallet.available, 7_500n);
      assert.equal(wallet.balance, 7_500n);
      const escrow = await account(db, escrowAccountId(address));
      assert.equal(escrow.creditsPending, 0n);
      assert.equal(escrow.creditsPosted, 2_500n);
      assert.equal((await getTransfer(db, pendingId))!.pendingState, "posted");
      await assertHealthy(db);
    });

    it("posts all by default", async () => {
      const { address, pendingId } = await reserved();
      const posted = await postPending(db, { id: uniqueId("post"), pendingId, code: "charge" });
      assert.equal(posted.transfer.amount, 6_000n);
      assert.equal(posted.transfer.code, "charge");
      assert.equal((await account(db, walletAccountId(address))).balance, 4_000n);
      await assertHealthy(db);
    });

    it("posts zero, which charges nothing and releases everything", async () => {
      const { address, pendingId } = await reserved();
      await postPending(db, { id: uniqueId("post"), pendingId, amount: 0n });
      assert.equal((await account(db, walletAccountId(address))).available, 10_000n);
      await assertHealthy(db);
    });

    it("voids: everything returns", async () => {
      const { address, pendingId } = await reserved();
      const voided = await voidPending(db, { id: uniqueId("void"), pendingId });
      assert.equal(voided.transfer.kind, "void_pending");
      assert.equal(voided.transfer.amount, 6_000n);
      const wallet = await account(db, walletAccountId(address));
      assert.equal(wallet.available, 10_000n);
      assert.equal(wallet.debitsPending, 0n);
      assert.equal(wallet.debitsPosted, 0n);
      assert.equal((await getTransfer(db, pendingId))!.pendingState, "voided");
      await assertHealthy(db);
    });

    it("resolves a pending transfer once: second post, void after post, post after void", async () => {
      const a = await reserved();
      await postPending(db, { id: uniqueId("post"), pendingId: a.pendingId, amount: 1_000n });
      await assert.rejects(postPending(db, { id: uniqueId("post"), pendingId: a.pendingId }), (err) => {
        assert.ok(err instanceof PendingTransferResolvedError);
        assert.equal(err.state, "posted");
        return true;
      });
      await assert.rejects(voidPending(db, { id: uniqueId("void"), pendingId: a.pendingId }), PendingTransferResolvedError);

      const b = await reserved();
      await voidPending(db, { id: uniqueId("void"), pendingId: b.pendingId });
      await assert.rejects(postPending(db, { id: uniqueId("post"), pendingId: b.pendingId }), (err) => {
        assert.ok(err instanceof PendingTransferResolvedError);
        assert.equal(err.state, "voided");
        return true;
      });
      assert.equal((await account(db, walletAccountId(a.address))).balance, 9_000n);
      assert.equal((await account(db, walletAccountId(b.address))).balance, 10_000n);
      await assertHealthy(db);
    });

    it("lets exactly one of two concurrent resolutions through", async () => {
      const { address, pendingId } = await reserved();
      const results = await Promise.allSettled([
        postPending(db, { id: uniqueId("post"), pendingId, amount: 5_000n }),
        voidPending(db, { id: uniqueId("void"), pendingId }),
        postPending(db, { id: uniqueId("post"), pendingId, amount: 1_000n }),
      ]);
      const won = results.filter((r) => r.status === "fulfilled");
      assert.equal(won.length, 1);
      for (const r of results) if (r.status === "rejected") assert.ok(r.reason instanceof PendingTransferResolvedError);
      const winner = (won[0] as PromiseFulfilledResult<{ transfer: { kind: string; amount: bigint } }>).value.transfer;
      const charged = winner.kind === "post_pending" ? winner.amount : 0n;
      assert.equal((await account(db, walletAccountId(address))).balance, 10_000n - charged);
      await assertHealthy(db);
    });

    it("refuses to post more than was reserved", async () => {
      const { address, pendingId } = await reserved();
      await assert.rejects(postPending(db, { id: uniqueId("post"), pendingId, amount: 6_001n }), (err) => {
        assert.ok(err instanceof ExceedsPendingAmountError);
        assert.equal(err.pendingAmount, 6_000n);
        return true;
      });
      assert.equal((await account(db, walletAccountId(address))).debitsPending, 6_000n);
      assert.equal((await getTransfer(db, pendingId))!.pendingState, "pending");
    });

    it("returns a retried post or void as existing, and refuses the id for another amount", async () => {
      const { address, pendingId } = await reserved();
      const input = { id: uniqueId("post"), pendingId, amount: 2_000n };
      const first = await postPending(db, input);
      const again = await postPending(db, input);
      assert.equal(again.status, "exists");
      assert.deepEqual(again.transfer, first.transfer);
      await assert.rejects(postPending(db, { ...input, amount: 2_001n }), TransferIdConflictError);
      await assert.rejects(voidPending(db, { id: input.id, pendingId }), TransferIdConflictError);
      assert.equal((await account(db, walletAccountId(address))).balance, 8_000n);

      const other = await reserved();
      const voidInput = { id: uniqueId("void"), pendingId: other.pendingId };
      await voidPending(db, voidInput);
      assert.equal((await voidPending(db, voidInput)).status, "exists");
      await assertHealthy(db);
    });

    it("refuses to resolve what is not a pending transfer", async () => {
      await assert.rejects(postPending(db, { id: uniqueId("post"), pendingId: "nothing" }), PendingTransferNotFoundError);
      const address = await fundedWallet(db, 1_000n);
      await assert.rejects(
        voidPending(db, { id: uniqueId("void"), pendingId: `deposit_${address}` }),
        PendingTransferNotFoundError,
      );
    });
  });
}
