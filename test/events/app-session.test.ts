/** The web app's wallet sign-in: a signed one-time challenge buys a session token. */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ACCOUNTS_MIGRATIONS } from "../../src/accounts/schema.ts";
import { EVENTS_MIGRATIONS } from "../../src/events/schema.ts";
import { base58Encode } from "../../src/chain/base58.ts";
import { generateKeypair } from "../../src/chain/keys.ts";
import { createChallenge, decodeSignature, openSession, sessionWallet } from "../../src/events/app-session.ts";
import type { Db } from "../../src/store/db.ts";
import { testDatabases } from "../support/db.ts";

const HOUR = 3_600_000;
const sign = (kp: ReturnType<typeof generateKeypair>, message: string) => kp.sign(new TextEncoder().encode(message));

for (const backend of testDatabases()) {
  describe(`app sessions on ${backend.name}`, () => {
    let db: Db;
    before(async () => {
      db = await backend.open({ migrations: [...ACCOUNTS_MIGRATIONS, ...EVENTS_MIGRATIONS] });
    });
    after(() => db.close());

    test("the wallet's signature of the challenge opens a session; its token names the wallet", async () => {
      const kp = generateKeypair();
      const challenge = await createChallenge(db, kp.address, "https://app.example");
      assert.match(challenge.message, /^https:\/\/app\.example wants you to sign in/);
      assert.ok(challenge.message.includes(kp.address) && challenge.message.includes(`Nonce: ${challenge.nonce}`));
      const session = await openSession(db, kp.address, sign(kp, challenge.message), HOUR);
      assert.ok(session);
      assert.match(session.token, /^svc_sess_/);
      assert.equal(await sessionWallet(db, session.token), kp.address);
      const stored = await db.query<{ token_hash: string }>("SELECT token_hash FROM app_sessions");
      assert.ok(stored.every((r) => !r.token_hash.includes(session.token)), "only a hash is stored");
      assert.equal(await sessionWallet(db, "svc_sess_unknown"), undefined);
    });

    test("a challenge opens one session; a wrong signature does not use it up", async () => {
      const kp = generateKeypair();
      const challenge = await createChallenge(db, kp.address, "https://app.example");
      const forged = new Uint8Array(sign(kp, challenge.message));
      forged[0]! ^= 1;
      assert.equal(await openSession(db, kp.address, forged, HOUR), undefined);
      assert.ok(await openSession(db, kp.address, sign(kp, challenge.message), HOUR));
      assert.equal(await openSession(db, kp.address, sign(kp, challenge.message), HOUR), undefined, "not twice");
    });

    test("asking for another challenge, by anyone, leaves the first one valid; a nonce picks one", async () => {
      const kp = generateKeypair();
      const first = await createChallenge(db, kp.address, "https://app.example");
      const second = await createChallenge(db, kp.address, "https://app.example");
      assert.equal(await openSession(db, kp.address, sign(kp, first.message), HOUR, second.nonce), undefined, "the nonce names another challenge");
      assert.ok(await openSession(db, kp.address, sign(kp, first.message), HOUR, first.nonce));
      assert.ok(await openSession(db, kp.address, sign(kp, second.message), HOUR));
    });

    test("another wallet's signature, a stale challenge and an expired session are refused", async () => {
      const [owner, other] = [generateKeypair(), generateKeypair()];
      const challenge = await createChallenge(db, owner.address, "https://app.example");
      assert.equal(await openSession(db, owner.address, sign(other, challenge.message), HOUR), undefined);

      const stale = await createChallenge(db, owner.address, "https://app.example");
      await db.query("UPDATE app_challenges SET expires_at = now() - interval '1 second' WHERE wallet = $1", [owner.address]);
      assert.equal(await openSession(db, owner.address, sign(owner, stale.message), HOUR), undefined);

      const live = await createChallenge(db, owner.address, "https://app.example");
      const session = await openSession(db, owner.address, sign(owner, live.message), HOUR);
      await db.query("UPDATE app_sessions SET expires_at = now() - interval '1 second' WHERE wallet = $1", [owner.address]);
      assert.equal(await sessionWallet(db, session!.token), undefined);
    });
  });
}

test("signatures are accepted as base58 or base64, 64 bytes only", () => {
  const bytes = new Uint8Array(64).map((_, i) => i + 1);
  assert.deepEqual(decodeSignature(base58Encode(bytes)), bytes);
  assert.deepEqual(decodeSignature(Buffer.from(bytes).toString("base64")), bytes);
  assert.equal(decodeSignature("abc"), undefined);
  assert.equal(decodeSignature(Buffer.from(bytes.subarray(0, 32)).toString("base64")), undefined);
});
