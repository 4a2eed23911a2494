/**
 * Accepted API keys are kept by each node, and a key that changes is dropped from every node's
 * cache by the database's notification: a revoked or suspended key fails on the next request,
 * here at once on PGlite and SQLite and, on PostgreSQL, on another node as soon as the
 * notification lands; before it lands, a key the cache accepted there is refused when confirmed
 * (accounts.confirmKeys).
 * A node that loses its listening connection stops trusting its cache until it listens again.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ACCOUNTS_MIGRATIONS, ApiKeyCache, authenticate, confirmKeys, issueApiKey, lockCreditLowSides } from "../../src/accounts/index.ts";
import { hashApiKey } from "../../src/accounts/api-key.ts";
import { revokeApiKeys, suspendApiKey } from "../../src/accounts/accounts.ts";
import { ApiError } from "../../src/core/errors.ts";
import { EVENTS_MIGRATIONS } from "../../src/events/index.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import { openDb, type Db } from "../../src/store/index.ts";
import { listenerName } from "../../src/store/postgres.ts";
import { testDatabases } from "../support/db.ts";
import { until } from "../support/eventually.ts";

/** The database, counting the statements sent through this handle. */
function counting(db: Db): Db & { statements: number } {
  const handle = {
    kind: db.kind,
    statements: 0,
    query: <T,>(sql: string, params?: unknown[]) => {
      handle.statements++;
      return db.query<T>(sql, params);
    },
    exec: (sql: string) => db.exec(sql),
    transaction: <T,>(fn: (tx: Db) => Promise<T>) => db.transaction(fn),
    close: () => db.close(),
  };
  return handle;
}

/**
 * The fault: a change whose notification has not reached the other nodes yet. The triggers that
 * notify do not fire for a session replaying changes as a replica, so this one never arrives.
 */
async function changeUnheard(db: Db, sql: string, keyHash: string): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.exec("SET LOCAL session_replication_role = replica");
    await tx.query(sql, [keyHash]);
  });
}

async function refusal(db: Db, key: string, cache: ApiKeyCache): Promise<string> {
  return authenticate(db, `Bearer ${key}`, cache).then(
    () => "accepted",
    (error: unknown) => (error instanceof ApiError ? error.code : String(error)),
  );
}

for (const backend of testDatabases({ sqlite: true })) {
  describe(`API key cache on ${backend.name}`, () => {
    let db: Db;
    let cache: ApiKeyCache;
    before(async () => {
      db = await backend.open({ migrations: ACCOUNTS_MIGRATIONS });
      cache = await ApiKeyCache.open(db);
    });
    after(() => db.close());

    test("an accepted key is looked up once; revoked, it fails on the next request", async () => {
      const wallet = generateKeypair().address;
      const key = await issueApiKey(db, wallet);
      const seen = counting(db);
      assert.equal((await authenticate(seen, `Bearer ${key}`, cache)).wallet, wallet);
      assert.equal((await authenticate(seen, `Bearer ${key}`, cache)).wallet, wallet);
      assert.equal(seen.statements, 1, "the second request used the cache");
      // Only PostgreSQL's notifications can arrive after a request that should have been refused.
      const fromCache = await authenticate(seen, `Bearer ${key}`, cache);
      assert.equal(fromCache.keyToConfirm, backend.name === "postgres" ? hashApiKey(key) : undefined);
      await revokeApiKeys(db, wallet);
      if (backend.name === "postgres") await until(() => refusal(db, key, cache), (code) => code === "invalid_api_key", "the revocation's notification arrived", 2_000);
      assert.equal(await refusal(db, key, cache), "invalid_api_key");
    });

    test("a suspended key fails on the next request", async () => {
      const key = await issueApiKey(db, generateKeypair().address);
      assert.equal(await refusal(db, key, cache), "accepted");
      await suspendApiKey(db, key);
      if (backend.name === "postgres") await until(() => refusal(db, key, cache), (code) => code === "key_suspended", "the suspension's notification arrived", 2_000);
      assert.equal(await refusal(db, key, cache), "key_suspended");
    });

    test("keys deleted by hand, or the whole table truncated, are dropped too", async () => {
      const wallet = generateKeypair().address;
      const deleted = await issueApiKey(db, wallet);
      const truncated = await issueApiKey(db, generateKeypair().address);
      for (const key of [deleted, truncated]) assert.equal(await refusal(db, key, cache), "accepted");
      await db.query("DELETE FROM api_keys WHERE wallet = $1", [wallet]);
      await until(() => refusal(db, deleted, cache), (code) => code === "invalid_api_key", "the deleted key dropped", 2_000);
      // SQLite has no TRUNCATE; its DELETE of every row notifies each key instead.
      await db.exec(backend.name === "sqlite" ? "DELETE FROM api_keys" : "TRUNCATE api_keys");
      await until(() => refusal(db, truncated, cache), (code) => code === "invalid_api_key", "the truncated keys dropped", 2_000);
    });

    test("unknown and malformed keys are never kept", async () => {
      const seen = counting(db);
      for (let i = 0; i < 2; i++) {
        assert.equal(await refusal(seen, "svc_live_" + "a".repeat(32), cache), "invalid_api_key");
        assert.equal(await refusal(seen, "not-a-key", cache), "invalid_api_key");
      }
      assert.equal(seen.statements, 4);
    });
  });
}

const url = process.env.DATABASE_URL;
describe("API key cache across PostgreSQL nodes", { skip: url === undefined && "DATABASE_URL is not set" }, () => {
  let nodeA: Db;
  let nodeB: Db;
  let schema: string;
  before(async () => {
    // The events part's migration adds the wallets' credit.low flags that an admission locks with its keys.
    nodeA = await testDatabases().find((d) => d.name === "postgres")!.open({ migrations: [...ACCOUNTS_MIGRATIONS, ...EVENTS_MIGRATIONS] });
    [{ schema }] = (await nodeA.query<{ schema: string }>("SELECT current_schema() AS schema")) as [{ schema: string }];
    nodeB = await openDb({ databaseUrl: url!, schema });
  });
  after(async () => {
    await nodeB?.close();
    await nodeA?.close();
  });

  test("a key revoked through one node fails on the other once notified", async () => {
    const cacheB = await ApiKeyCache.open(nodeB);
    const wallet = generateKeypair().address;
    const key = await issueApiKey(nodeA, wallet);
    assert.equal(await refusal(nodeB, key, cacheB), "accepted");
    const revokedAt = performance.now();
    await revokeApiKeys(nodeA, wallet);
    await until(() => refusal(nodeB, key, cacheB), (code) => code === "invalid_api_key", "node B dropped the revoked key", 2_000);
    assert.ok(performance.now() - revokedAt < 2_000);
  });

  test("a key accepted from a cache that has not yet heard of its revocation is refused when confirmed", async () => {
    const cacheB = await ApiKeyCache.open(nodeB);
    const keys = [await issueApiKey(nodeA, generateKeypair().address), await issueApiKey(nodeA, generateKeypair().address), await issueApiKey(nodeA, generateKeypair().address)];
    for (const key of keys) assert.equal(await refusal(nodeB, key, cacheB), "accepted");
    const [revoked, suspended, live] = keys.map(hashApiKey) as [string, string, string];
    await changeUnheard(nodeA, "UPDATE api_keys SET revoked_at = now() WHERE key_hash = $1", revoked);
    await changeUnheard(nodeA, "UPDATE api_keys SET suspended_at = now() WHERE key_hash = $1", suspended);
    for (const key of keys) {
      const owner = await authenticate(nodeB, `Bearer ${key}`, cacheB);
      assert.equal(owner.keyToConfirm, hashApiKey(key), "still cached on node B, to be confirmed");
    }
    await confirmKeys(nodeB, [live, live]);
    assert.equal(await confirmKeys(nodeB, [live, revoked]).catch((e: ApiError) => e.code), "invalid_api_key");
    assert.equal(await confirmKeys(nodeB, [suspended, live]).catch((e: ApiError) => e.code), "key_suspended");
    assert.equal(await confirmKeys(nodeB, [hashApiKey("svc_live_" + "b".repeat(32))]).catch((e: ApiError) => e.code), "invalid_api_key");
  });

  test("an admission confirms its keys in the statement that locks the wallets' credit.low flags", async () => {
    const wallets = [generateKeypair().address, generateKeypair().address, generateKeypair().address];
    const keys = await Promise.all(wallets.map((wallet) => issueApiKey(nodeA, wallet)));
    const [revoked, suspended, live] = keys.map(hashApiKey) as [string, string, string];
    await changeUnheard(nodeA, "UPDATE api_keys SET revoked_at = now() WHERE key_hash = $1", revoked);
    await changeUnheard(nodeA, "UPDATE api_keys SET suspended_at = now() WHERE key_hash = $1", suspended);
    const refused = (keysToConfirm: string[]) =>
      nodeB.transaction((tx) => lockCreditLowSides(tx, wallets, keysToConfirm)).then(() => "accepted", (e: ApiError) => e.code);
    assert.equal(await refused([live, live]), "accepted");
    assert.equal(await refused([live, revoked]), "invalid_api_key");
    assert.equal(await refused([suspended, live]), "key_suspended");
    assert.equal(await refused([hashApiKey("svc_live_" + "c".repeat(32))]), "invalid_api_key");
    // The flags read beside the keys are the wallets' own: new wallets, armed at the default threshold (100).
    const sides = await nodeB.transaction((tx) => lockCreditLowSides(tx, wallets, [live]));
    assert.deepEqual(sides.answer(wallets.map((wallet, i) => ({ wallet, availableCredits: 99 + i }))), [{ below: true, thresholdCredits: 100 }, undefined, undefined]);
  });

  test("a node whose listening connection is lost looks every key up until it listens again", async () => {
    const cacheB = await ApiKeyCache.open(nodeB);
    const key = await issueApiKey(nodeA, generateKeypair().address);
    const seen = counting(nodeB);
    await authenticate(seen, `Bearer ${key}`, cacheB);
    await authenticate(seen, `Bearer ${key}`, cacheB);
    assert.equal(seen.statements, 1);
    // The fault: PostgreSQL ends this deployment's listening connections (as a restart or a network
    // cut would); other test files' deployments on the same server keep theirs.
    const [{ ended }] = (await nodeA.query<{ ended: bigint }>("SELECT count(pg_terminate_backend(pid)) AS ended FROM pg_stat_activity WHERE application_name = $1", [listenerName(schema)])) as [{ ended: bigint }];
    // Each cache opened on node B in this file listens: at least this one's connection was ended.
    assert.ok(ended >= 1n, "node B's listening connections were ended");
    await until(async () => {
      const before = seen.statements;
      await authenticate(seen, `Bearer ${key}`, cacheB);
      return seen.statements - before;
    }, (lookups) => lookups === 1, "the cache stopped answering", 2_000);
    // Listening again, it keeps keys again.
    await until(async () => {
      await authenticate(seen, `Bearer ${key}`, cacheB);
      const before = seen.statements;
      await authenticate(seen, `Bearer ${key}`, cacheB);
      return seen.statements - before;
    }, (lookups) => lookups === 0, "the cache answers again", 5_000);
  });
});
