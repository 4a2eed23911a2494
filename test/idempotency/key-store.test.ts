/**
 * The stored keys on PGlite, SQLite and, with DATABASE_URL, PostgreSQL: many concurrent claims of
 * one key give it to exactly one (on PostgreSQL they run on separate pooled connections, as two
 * gateway nodes on one database would), keys are per wallet, an expired key is claimed anew and
 * swept, and a claim let go is claimed again. Expiry is shown by moving a row's time back in the
 * database, the clock every node shares.
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { ABANDONED_CLAIM_MS, canonicalJson, IDEMPOTENCY_MIGRATIONS, IdempotencyKeys, parseIdempotencyKey, requestFingerprint } from "../../src/idempotency/index.ts";
import { plusMs, type Db } from "../../src/store/index.ts";
import { testDatabases } from "../support/db.ts";

const HOUR_MS = 60 * 60 * 1000;
const DAY_MS = 24 * HOUR_MS;

test("the same body in another key order or spacing is the same request; another value is not", () => {
  const a = JSON.parse('{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":1.0}');
  const b = JSON.parse('{ "temperature": 1, "messages": [ { "content": "hi", "role": "user" } ], "model": "m" }');
  assert.equal(canonicalJson(a), canonicalJson(b));
  assert.equal(requestFingerprint("POST", "/v1/chat/completions", a), requestFingerprint("POST", "/v1/chat/completions", b));
  assert.notEqual(requestFingerprint("POST", "/v1/chat/completions", a), requestFingerprint("POST", "/v1/chat/completions", { ...a, temperature: 0.5 }));
  assert.notEqual(requestFingerprint("POST", "/v1/chat/completions", a), requestFingerprint("POST", "/v1/chat/completions", { ...a, seed: null }));
  assert.notEqual(requestFingerprint("POST", "/v1/webhooks", a), requestFingerprint("POST", "/v1/chat/completions", a));
});

test("keys of 1 to 255 characters are accepted; longer, empty or repeated ones are refused", () => {
  assert.equal(parseIdempotencyKey(undefined), undefined);
  assert.equal(parseIdempotencyKey("k".repeat(255)), "k".repeat(255));
  assert.throws(() => parseIdempotencyKey("k".repeat(256)), { code: "invalid_request", param: "idempotency-key" });
  assert.throws(() => parseIdempotencyKey(""), { code: "invalid_request" });
  assert.throws(() => parseIdempotencyKey(["a", "b"]), { code: "invalid_request" });
});

for (const backend of testDatabases({ sqlite: true })) {
  describe(`stored keys on ${backend.name}`, () => {
    let db: Db;
    let keys: IdempotencyKeys;
    beforeEach(async () => {
      db = await backend.open({ migrations: IDEMPOTENCY_MIGRATIONS });
      keys = new IdempotencyKeys(db);
    });
    afterEach(() => db.close());

    test("concurrent claims of one key: exactly one holds it, the others see its row", async () => {
      const claims = await Promise.all(Array.from({ length: 20 }, () => keys.claim("w1", "k", "f")));
      assert.equal(claims.filter((c) => c.claim !== undefined).length, 1);
      for (const c of claims) if (c.claim === undefined) assert.deepEqual(c.row, { fingerprint: "f", jobId: null, outcome: undefined });
    });

    test("keys are per wallet; the outcome is read back as recorded", async () => {
      const first = await keys.claim("w1", "k", "f");
      const other = await keys.claim("w2", "k", "g");
      assert.ok(first.claim && other.claim);
      await keys.linkJob("w1", "k", first.claim, "job_1");
      await keys.record("w1", "k", first.claim, { kind: "response", headers: {}, body: { text: "\ud800 lone" } });
      const again = await keys.claim("w1", "k", "f");
      assert.deepEqual(again, { row: { fingerprint: "f", jobId: "job_1", outcome: { kind: "response", headers: {}, body: { text: "\ud800 lone" } } } });
    });

    test("a key older than 24 hours is claimed anew, and swept", async () => {
      const first = await keys.claim("w1", "k", "f");
      await keys.record("w1", "k", first.claim!, { done: true });
      await db.query(`UPDATE idempotency_keys SET created_at = ${plusMs(db, "created_at", String(-(DAY_MS + 1000)))}`);
      assert.equal(await keys.read("w1", "k"), undefined);
      const second = await keys.claim("w1", "k", "other");
      assert.ok(second.claim, "a new request under the old key");
      await db.query(`UPDATE idempotency_keys SET created_at = ${plusMs(db, "created_at", String(-(DAY_MS + HOUR_MS)))}`);
      assert.equal(await keys.sweep(), 1);
      assert.equal((await db.query("SELECT 1 FROM idempotency_keys")).length, 0);
    });

    test("a claim let go, or abandoned before any job, is claimed again; one with a job is not", async () => {
      const first = await keys.claim("w1", "k", "f");
      await keys.release("w1", "k", first.claim!);
      const second = await keys.claim("w1", "k", "f");
      assert.ok(second.claim);
      await keys.claim("w1", "j", "f").then((c) => keys.linkJob("w1", "j", c.claim!, "job_2"));
      await db.query(`UPDATE idempotency_keys SET updated_at = ${plusMs(db, "updated_at", String(-(ABANDONED_CLAIM_MS + 1000)))}`);
      assert.ok((await keys.claim("w1", "k", "f")).claim, "abandoned without a job");
      assert.equal((await keys.claim("w1", "j", "f")).claim, undefined, "its job still runs or ran");
      // Letting go is only the holder's, and never after an outcome.
      const third = await keys.claim("w1", "x", "f");
      await keys.release("w1", "x", "not-the-claim");
      assert.equal((await keys.claim("w1", "x", "f")).claim, undefined);
      await keys.record("w1", "x", third.claim!, { done: true });
      await keys.release("w1", "x", third.claim!);
      assert.deepEqual((await keys.read("w1", "x"))?.outcome, { done: true });
    });

    test("a key whose request never answered: one of concurrent retries reclaims it; an outcome recorded first stands", async () => {
      const first = await keys.claim("w1", "k", "f");
      await keys.linkJob("w1", "k", first.claim!, "job_1");
      assert.equal(await keys.reclaim("w1", "k", "other", "job_1"), undefined, "another request's body");
      const claims = await Promise.all(Array.from({ length: 10 }, () => keys.reclaim("w1", "k", "f", "job_1")));
      const won = claims.filter((c) => c !== undefined);
      assert.equal(won.length, 1);
      assert.deepEqual(await keys.read("w1", "k"), { fingerprint: "f", jobId: null, outcome: undefined });
      // The old holder's late outcome is not the new request's.
      await keys.record("w1", "k", first.claim!, { stale: true });
      assert.equal((await keys.read("w1", "k"))?.outcome, undefined);
      await keys.record("w1", "k", won[0]!, { fresh: true });
      assert.deepEqual((await keys.read("w1", "k"))?.outcome, { fresh: true });

      const other = await keys.claim("w1", "j", "f");
      await keys.linkJob("w1", "j", other.claim!, "job_2");
      await keys.record("w1", "j", other.claim!, { answered: true });
      await keys.recordUnanswered("w1", "j", "job_2", { lost: true });
      assert.equal(await keys.reclaim("w1", "j", "f", "job_2"), undefined);
      assert.deepEqual((await keys.read("w1", "j"))?.outcome, { answered: true }, "the first request's own outcome stands");
      const third = await keys.claim("w1", "m", "f");
      await keys.linkJob("w1", "m", third.claim!, "job_3");
      await keys.recordUnanswered("w1", "m", "job_3", { lost: true });
      assert.deepEqual((await keys.read("w1", "m"))?.outcome, { lost: true });
    });
  });
}
