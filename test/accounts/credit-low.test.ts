/**
 * The wallets' credit.low flags on every backend: a balance change that crosses the threshold is
 * answered once, a new threshold arms from the balance given, and the two halves an admission
 * uses (lock and answer, then write) leave the flags where recording each change would, in the
 * statement that confirms the caller's keys when it has any.
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { ACCOUNTS_MIGRATIONS, addCreditLowSides, ensureWallet, getWallet, issueApiKey, lockCreditLowSides, recordCreditLowSide } from "../../src/accounts/index.ts";
import { revokeApiKeys, setCreditLowThreshold } from "../../src/accounts/accounts.ts";
import { hashApiKey } from "../../src/accounts/api-key.ts";
import { ApiError } from "../../src/core/errors.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import { CombinedStatement, type Db, type Migration } from "../../src/store/index.ts";
import { testDatabases } from "../support/db.ts";

/** The flag the events part's migration (events/001) adds to wallets, here without its other tables. */
const CREDIT_LOW_FLAG: Migration = {
  id: "test/credit_low_armed",
  sql: "ALTER TABLE wallets ADD COLUMN credit_low_armed boolean NOT NULL DEFAULT true",
  sqlite: "ALTER TABLE wallets ADD COLUMN credit_low_armed boolean NOT NULL DEFAULT true",
};

async function flags(db: Db, wallets: readonly string[]): Promise<boolean[]> {
  const rows = await db.query<{ address: string; credit_low_armed: boolean }>("SELECT address, credit_low_armed FROM wallets");
  const byAddress = new Map(rows.map((row) => [row.address, row.credit_low_armed]));
  return wallets.map((wallet) => byAddress.get(wallet)!);
}

for (const backend of testDatabases({ sqlite: true })) {
  describe(`credit.low flags on ${backend.name}`, () => {
    let db: Db;
    beforeEach(async () => {
      db = await backend.open({ migrations: [...ACCOUNTS_MIGRATIONS, CREDIT_LOW_FLAG] });
    });
    afterEach(() => db.close());

    test("a crossing is answered once each way; a new threshold arms from the balance", async () => {
      const wallet = generateKeypair().address;
      await ensureWallet(db, wallet);
      assert.equal(await recordCreditLowSide(db, wallet, 150), undefined);
      assert.deepEqual(await recordCreditLowSide(db, wallet, 99), { below: true, thresholdCredits: 100 });
      assert.equal(await recordCreditLowSide(db, wallet, 50), undefined);
      assert.deepEqual(await recordCreditLowSide(db, wallet, 100), { below: false, thresholdCredits: 100 });
      await setCreditLowThreshold(db, wallet, 500, 300);
      assert.equal((await getWallet(db, wallet))?.creditLowThreshold, 500);
      assert.equal(await recordCreditLowSide(db, wallet, 200), undefined, "below the new threshold already");
      assert.deepEqual(await recordCreditLowSide(db, wallet, 600), { below: false, thresholdCredits: 500 });
    });

    test("locked flags answer a run of changes and write only what flipped", async () => {
      const wallets = [generateKeypair().address, generateKeypair().address, generateKeypair().address];
      for (const wallet of wallets) await ensureWallet(db, wallet);
      const answers = await db.transaction(async (tx) => {
        const sides = await lockCreditLowSides(tx, wallets);
        const answered = sides.answer([
          { wallet: wallets[0]!, availableCredits: 10 },
          { wallet: wallets[0]!, availableCredits: 5 },
          { wallet: wallets[1]!, availableCredits: 150 },
          { wallet: wallets[2]!, availableCredits: 99 },
          { wallet: wallets[2]!, availableCredits: 101 },
        ]);
        const statement = new CombinedStatement(tx);
        sides.addWrite(statement);
        await statement.run(tx);
        return answered;
      });
      assert.deepEqual(answers, [{ below: true, thresholdCredits: 100 }, undefined, undefined, { below: true, thresholdCredits: 100 }, { below: false, thresholdCredits: 100 }]);
      assert.deepEqual(await flags(db, wallets), [false, true, true]);
      const statement = new CombinedStatement(db);
      addCreditLowSides(statement, [
        { wallet: wallets[0]!, availableCredits: 50 },
        { wallet: wallets[0]!, availableCredits: 120 },
        { wallet: wallets[1]!, availableCredits: 20 },
      ]);
      await statement.run(db);
      assert.deepEqual(await flags(db, wallets), [true, false, true]);
    });

    test("locking the flags confirms the caller's keys in the same statement", async () => {
      const wallets = [generateKeypair().address, generateKeypair().address];
      const [live, revoked] = await Promise.all(wallets.map((wallet) => issueApiKey(db, wallet)));
      await revokeApiKeys(db, wallets[1]!);
      const locked = (keys: string[]) => db.transaction((tx) => lockCreditLowSides(tx, wallets, keys.map(hashApiKey)));
      assert.equal(await locked([live!, revoked!]).catch((error: ApiError) => error.code), "invalid_api_key");
      const sides = await locked([live!, live!]);
      assert.deepEqual(sides.answer(wallets.map((wallet) => ({ wallet, availableCredits: 99 }))), [
        { below: true, thresholdCredits: 100 },
        { below: true, thresholdCredits: 100 },
      ]);
    });
  });
}
