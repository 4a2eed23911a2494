import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it } from "node:test";
import {
  checkInvariants,
  LEDGER_MIGRATIONS,
  reserve,
  walletAccountId,
  type InvariantViolation,
} from "../../src/ledger/index.ts";
import type { Db } from "../../src/store/index.ts";
import { testDatabases } from "../support/db.ts";
import { fundedWallet, uniqueId } from "./fixtures.ts";

function kinds(violations: InvariantViolation[]): string[] {
  return [...new Set(violations.map((v) => v.invariant))].sort();
}

for (const backend of testDatabases({ sqlite: true })) {
  describe(`ledger invariants on ${backend.name}`, () => {
    let db: Db;
    let address: string;
    beforeEach(async () => {
      db = await backend.open({ migrations: LEDGER_MIGRATIONS });
      address = await fundedWallet(db, 50_000n);
      await reserve(db, { id: uniqueId("reserve"), wallet: address, amount: 20_000n });
    });
    afterEach(() => db.close());

    it("finds nothing wrong in a ledger only the ledger wrote", async () => {
      assert.deepEqual(await checkInvariants(db), []);
    });

    it("reports totals that drifted from the transfers and unbalanced the books", async () => {
      await db.query("UPDATE ledger_accounts SET credits_posted = credits_posted + 1 WHERE id = $1", [walletAccountId(address)]);
      const found = await checkInvariants(db);
      assert.deepEqual(kinds(found), ["balanced", "totals_match_transfers"]);
      assert.equal(found.find((v) => v.invariant === "totals_match_transfers")!.accountId, walletAccountId(address));
    });

    it("reports an overdrawn wallet", async () => {
      await db.exec("ALTER TABLE ledger_accounts DROP CONSTRAINT ledger_accounts_debits_within_credits");
      await db.query("UPDATE ledger_accounts SET debits_posted = 40000 WHERE id = $1", [walletAccountId(address)]);
      const found = await checkInvariants(db);
      assert.ok(found.some((v) => v.invariant === "within_credits" && v.accountId === walletAccountId(address)));
    });

    it("reports a void that does not release what its pending transfer reserved", async () => {
      const [pending] = await db.query<{ id: string }>("SELECT id FROM ledger_transfers WHERE kind = 'pending'");
      await db.query(
        `INSERT INTO ledger_transfers (id, kind, debit_account_id, credit_account_id, amount, pending_id, code)
         SELECT 'bad-void', 'void_pending', debit_account_id, credit_account_id, amount - 1, id, code
         FROM ledger_transfers WHERE id = $1`,
        [pending!.id],
      );
      const found = await checkInvariants(db);
      assert.ok(found.some((v) => v.invariant === "resolution_matches" && v.transferId === "bad-void"));
    });

    it("reports a transfer naming an account or a pending transfer that does not exist", async () => {
      await db.query(
        `INSERT INTO ledger_transfers (id, kind, debit_account_id, credit_account_id, amount, pending_id, code)
         VALUES ('to-nobody', 'posted', $1, 'wallet:nobody', 1, NULL, 'deposit'),
                ('void-of-nothing', 'void_pending', $1, 'wallet:nobody', 1, 'no-such-transfer', 'reserve')`,
        [walletAccountId(address)],
      );
      const found = (await checkInvariants(db)).filter((v) => v.invariant === "references_exist");
      assert.deepEqual(found.map((v) => [v.transferId, v.detail]).sort(), [
        ["to-nobody", "names account wallet:nobody, which does not exist"],
        ["void-of-nothing", "names account wallet:nobody, which does not exist"],
        ["void-of-nothing", "resolves no-such-transfer, which does not exist"],
      ]);
    });
  });
}
