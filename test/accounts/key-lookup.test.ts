/**
 * The API-key check does the same work whatever the key's shape, so its timing cannot
 * tell a malformed key from an unknown well-formed one. Asserted on the work done (the database
 * statements and their parameters' shape), not on timing; bench/key-check.ts measures the time.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { authenticate, issueApiKey } from "../../src/accounts/accounts.ts";
import { generateApiKey } from "../../src/accounts/api-key.ts";
import { ACCOUNTS_MIGRATIONS } from "../../src/accounts/schema.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import { ApiError } from "../../src/core/errors.ts";
import type { Db } from "../../src/store/db.ts";
import { testDatabases } from "../support/db.ts";

/** The database with every statement it is sent recorded (SQL text and parameters). */
function recording(db: Db, log: { sql: string; params: unknown[] }[]): Db {
  return new Proxy(db, {
    get(target, name, receiver) {
      if (name === "query") {
        return (sql: string, params: unknown[] = []) => {
          log.push({ sql, params });
          return target.query(sql, params);
        };
      }
      return Reflect.get(target, name, receiver) as unknown;
    },
  });
}

async function lookupWork(db: Db, authorization: string): Promise<{ code: string; statements: { sql: string; params: unknown[] }[] }> {
  const statements: { sql: string; params: unknown[] }[] = [];
  const error = await authenticate(recording(db, statements), authorization).then(
    () => undefined,
    (e: unknown) => e,
  );
  return { code: error instanceof ApiError ? error.code : "ok", statements };
}

for (const backend of testDatabases({ sqlite: true })) {
  test(`on ${backend.name}: a malformed key, an unknown well-formed key and a valid key each cost one lookup by a SHA-256`, async () => {
    const db = await backend.open({ migrations: ACCOUNTS_MIGRATIONS });
    try {
      const valid = await issueApiKey(db, generateKeypair().address);
      const shapes = {
        "not bearer": "Basic abc",
        "short key": "Bearer svc_live_abc",
        "wrong prefix": `Bearer ${generateApiKey().replace("svc_live_", "sk-proj-")}`,
        "16 KB of junk": `Bearer ${"x".repeat(16_000)}`,
        "unknown well-formed": `Bearer ${generateApiKey()}`,
        valid: `Bearer ${valid}`,
      };
      const work = Object.fromEntries(await Promise.all(Object.entries(shapes).map(async ([name, header]) => [name, await lookupWork(db, header)] as const)));
      const reference = work.valid!.statements;
      assert.equal(reference.length, 1);
      for (const [name, { code, statements }] of Object.entries(work)) {
        assert.equal(code, name === "valid" ? "ok" : "invalid_api_key", name);
        assert.equal(statements.length, 1, `${name}: one statement`);
        assert.equal(statements[0]!.sql, reference[0]!.sql, `${name}: the same statement`);
        assert.match(String(statements[0]!.params[0]), /^[0-9a-f]{64}$/, `${name}: looked up by a hash, never by the key`);
      }
    } finally {
      await db.close();
    }
  });
}
