/** A suspension is the wallet's: replacing the key (the app's "new key") does not lift it. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ACCOUNTS_MIGRATIONS, authenticate, issueApiKey, reinstateWalletKey, suspendWalletKey } from "../../src/accounts/index.ts";
import { ApiError } from "../../src/core/errors.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import { testDatabases } from "../support/db.ts";

async function refusal(promise: Promise<unknown>): Promise<string> {
  return promise.then(
    () => "ok",
    (error: unknown) => (error instanceof ApiError ? error.code : String(error)),
  );
}

for (const backend of testDatabases({ sqlite: true })) {
  test(`on ${backend.name}: a suspended wallet's new key is suspended too, and reinstating lifts it`, async () => {
    const db = await backend.open({ migrations: ACCOUNTS_MIGRATIONS });
    try {
      const wallet = (await generateKeypair()).address;
      const first = await issueApiKey(db, wallet);
      assert.equal((await suspendWalletKey(db, wallet))?.changed, true);
      assert.equal(await refusal(authenticate(db, `Bearer ${first}`)), "key_suspended");
      const second = await issueApiKey(db, wallet);
      assert.equal(await refusal(authenticate(db, `Bearer ${second}`)), "key_suspended");
      assert.equal(await refusal(authenticate(db, `Bearer ${first}`)), "invalid_api_key");
      assert.equal((await reinstateWalletKey(db, wallet))?.changed, true);
      assert.equal(await refusal(authenticate(db, `Bearer ${second}`)), "ok");
      const third = await issueApiKey(db, wallet);
      assert.equal(await refusal(authenticate(db, `Bearer ${third}`)), "ok");
    } finally {
      await db.close();
    }
  });
}
