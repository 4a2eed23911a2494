import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  ensureWorkerAccount,
  ExceedsCreditsError,
  FUNDING_ACCOUNT,
  LEDGER_MIGRATIONS,
  listTransfers,
  postPending,
  reserve,
  settle,
  transfer,
  TREASURY_ACCOUNT,
  voidPending,
  walletAccountId,
  workerAccountId,
  type TransferResult,
} from "../../src/ledger/index.ts";
import { openDb, type Db } from "../../src/store/index.ts";
import { testDatabases } from "../support/db.ts";
import { account, assertHealthy, fundedWallet, uniqueId } from "./fixtures.ts";

const SIZE = 130_000n; // one reservation: 13 credits
const START = 7n * SIZE + 65_000n; // room for exactly 7, and half of an 8th

for (const backend of testDatabases({ sqlite: true })) {
  describe(`no overspend on ${backend.name}`, () => {
    let db: Db;
    /** On PostgreSQL a second pool on the same schema: a second gateway node racing the first. */
    let peer: Db;
    before(async () => {
      db = await backend.open({ migrations: LEDGER_MIGRATIONS, poolSize: 8 });
      if (db.kind === "postgres") {
        const [{ schema }] = (await db.query<{ schema: string }>("SELECT current_schema() AS schema")) as [{ schema: string }];
        peer = await openDb({ databaseUrl: process.env.DATABASE_URL!, schema, poolSize: 8 });
      } else {
        peer = db;
      }
    });
    after(async () => {
      if (peer !== db) await peer.close();
      await db.close();
    });

    it("lets exactly 7 of 50 concurrent reservations through when only 7 fit", async () => {
      const address = await fundedWallet(db, START);
      const attempts = Array.from({ length: 50 }, (_, i) =>
        reserve(i % 2 === 0 ? db : peer, { id: uniqueId("reserve"), wallet: address, amount: SIZE, reference: `job_${i}` }),
      );
      const results = await Promise.allSettled(attempts);
      const won = results.filter((r): r is PromiseFulfilledResult<TransferResult> => r.status === "fulfilled").map((r) => r.value);
      const lost = results.filter((r): r is PromiseRejectedResult => r.status === "rejected").map((r) => r.reason as unknown);
      assert.equal(won.length, 7);
      assert.equal(lost.length, 43);
      for (const err of lost) {
        assert.ok(err instanceof ExceedsCreditsError, String(err));
        assert.equal(err.available, START - 7n * SIZE);
        assert.equal(err.amount, SIZE);
      }
      const wallet = await account(db, walletAccountId(address));
      assert.equal(wallet.debitsPending, 7n * SIZE);
      assert.equal(wallet.available, 65_000n);
      await assertHealthy(db);

      // Charge four jobs various amounts, release the other three.
      const charges = [SIZE, 1n, 99_999n, 0n];
      await Promise.all(
        won.map((r, i) => {
          const charge = charges[i];
          const conn = i % 2 === 0 ? db : peer;
          return charge === undefined
            ? voidPending(conn, { id: uniqueId("void"), pendingId: r.transfer.id })
            : postPending(conn, { id: uniqueId("post"), pendingId: r.transfer.id, amount: charge });
        }),
      );
      const after = await account(db, walletAccountId(address));
      const charged = (await listTransfers(db, { accountId: walletAccountId(address), kind: "post_pending" })).reduce(
        (sum, t) => sum + t.amount,
        0n,
      );
      assert.equal(charged, charges.reduce((a, b) => a + b, 0n));
      assert.equal(after.balance + charged, START);
      assert.equal(after.debitsPending, 0n);
      assert.equal(after.available, after.balance);
      await assertHealthy(db);
    });

    it("lets no two posted transfers spend the same last credits", async () => {
      const address = await fundedWallet(db, 3n * SIZE + SIZE / 2n);
      const results = await Promise.allSettled(
        Array.from({ length: 20 }, (_, i) =>
          transfer(i % 2 === 0 ? db : peer, {
            id: uniqueId("spend"),
            debitAccountId: walletAccountId(address),
            creditAccountId: TREASURY_ACCOUNT,
            amount: SIZE,
            code: "protocol_fee",
          }),
        ),
      );
      assert.equal(results.filter((r) => r.status === "fulfilled").length, 3);
      for (const r of results) if (r.status === "rejected") assert.ok(r.reason instanceof ExceedsCreditsError);
      assert.equal((await account(db, walletAccountId(address))).balance, SIZE / 2n);
      await assertHealthy(db);
    });

    it("keeps reservations from many wallets independent while they run at once", async () => {
      const wallets = await Promise.all(Array.from({ length: 6 }, () => fundedWallet(db, 2n * SIZE)));
      const results = await Promise.allSettled(
        wallets.flatMap((address, w) =>
          Array.from({ length: 4 }, (_, i) =>
            reserve((w + i) % 2 === 0 ? db : peer, { id: uniqueId("reserve"), wallet: address, amount: SIZE }),
          ),
        ),
      );
      assert.equal(results.filter((r) => r.status === "fulfilled").length, 12);
      for (const address of wallets) assert.equal((await account(db, walletAccountId(address))).available, 0n);
      await assertHealthy(db);
    });

    it("runs a mix of operations over shared accounts at once without deadlock or drift", async () => {
      const wallets = await Promise.all(Array.from({ length: 4 }, () => fundedWallet(db, 2_000_000n)));
      const workers = [uniqueId("w"), uniqueId("w")];
      for (const w of workers) await ensureWorkerAccount(db, w);
      const step = async (i: number) => {
        const conn = i % 2 === 0 ? db : peer;
        const wallet = wallets[i % wallets.length]!;
        const worker = workerAccountId(workers[i % workers.length]!);
        const id = uniqueId("mix");
        switch (i % 5) {
          case 0:
          case 1: {
            await reserve(conn, { id: `${id}:r`, wallet, amount: 100_000n });
            const charge = BigInt(i % 7) * 10_000n;
            const share = (charge * 3n) / 4n;
            await settle(conn, {
              id: `${id}:s`,
              reservationId: `${id}:r`,
              charge,
              payouts: [
                { accountId: worker, amount: share, code: "worker_payout" },
                { accountId: TREASURY_ACCOUNT, amount: charge - share, code: "protocol_fee" },
              ],
            });
            return;
          }
          case 2:
            await reserve(conn, { id: `${id}:r`, wallet, amount: 50_000n });
            await voidPending(conn, { id: `${id}:v`, pendingId: `${id}:r` });
            return;
          case 3:
            await transfer(conn, { id, debitAccountId: FUNDING_ACCOUNT, creditAccountId: walletAccountId(wallet), amount: 5_000n, code: "deposit" });
            return;
          default:
            // Shared and per-user accounts in the opposite roles: treasury and workers pay out.
            await transfer(conn, { id, debitAccountId: i % 2 ? TREASURY_ACCOUNT : worker, creditAccountId: FUNDING_ACCOUNT, amount: 1n, code: "withdrawal" });
        }
      };
      let next = 0;
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          for (let i = next++; i < 300; i = next++) await step(i);
        }),
      );
      await assertHealthy(db);
    });
  });
}
