/**
 * The web app's sign-in nonces and sessions in the database, on every backend: a nonce is used
 * up once and never after it expired, expired rows are swept, and a session is found by its token
 * until it expires or is closed.
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { generateKeypair } from "../../src/core/keys.ts";
import type { Db } from "../../src/store/index.ts";
import { WEB_MIGRATIONS } from "../../src/web/schema.ts";
import { closeSession, issueNonce, NONCE_TTL_MS, openSession, sessionWallet, sweepNonces, useNonce } from "../../src/web/sessions.ts";
import { testDatabases } from "../support/db.ts";

for (const backend of testDatabases({ sqlite: true })) {
  describe(`sign-in nonces and sessions on ${backend.name}`, () => {
    let db: Db;
    beforeEach(async () => {
      db = await backend.open({ migrations: WEB_MIGRATIONS });
    });
    afterEach(() => db.close());

    test("a nonce is used up once, never once expired; sweeping deletes only the expired", async () => {
      const live = await issueNonce(db);
      const stale = await issueNonce(db, new Date(Date.now() - NONCE_TTL_MS - 1000));
      const kept = await issueNonce(db);
      assert.equal((await useNonce(db, live.nonce))?.getTime(), live.expiresAt.getTime());
      assert.equal(await useNonce(db, live.nonce), undefined, "used up");
      assert.equal(await useNonce(db, stale.nonce), undefined, "expired");
      assert.equal(await useNonce(db, "unknown"), undefined);
      await sweepNonces(db);
      const rows = await db.query<{ nonce: string; expires_at: Date }>("SELECT nonce, expires_at FROM web_sign_in_nonces");
      assert.deepEqual(rows, [{ nonce: kept.nonce, expires_at: kept.expiresAt }]);
    });

    test("a session is found by its token until it expires or is closed", async () => {
      const wallet = generateKeypair().address;
      const session = await openSession(db, wallet, 60_000);
      assert.deepEqual(await sessionWallet(db, session.token), { wallet, expiresAt: session.expiresAt });
      assert.equal(await sessionWallet(db, "not-a-token"), undefined);
      const expired = await openSession(db, wallet, -1000);
      assert.equal(await sessionWallet(db, expired.token), undefined);
      // Opening a session deletes the expired ones.
      const other = await openSession(db, generateKeypair().address, 60_000);
      assert.equal((await db.query("SELECT 1 FROM web_sessions")).length, 2);
      await closeSession(db, session.token);
      assert.equal(await sessionWallet(db, session.token), undefined);
      assert.equal((await sessionWallet(db, other.token))?.expiresAt.getTime(), other.expiresAt.getTime());
    });
  });
}
