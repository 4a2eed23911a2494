/**
 * The audit log on every backend, through the key actions: each action taken has its row, newest
 * first, with who and why; an action that cannot be taken leaves none.
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { ACCOUNTS_MIGRATIONS, issueApiKey } from "../../src/accounts/index.ts";
import { ADMIN_MIGRATIONS, AdminRefusal, auditLog, runAdminOperation } from "../../src/admin/index.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import type { Db } from "../../src/store/index.ts";
import { testDatabases } from "../support/db.ts";

for (const backend of testDatabases({ sqlite: true })) {
  describe(`audit log on ${backend.name}`, () => {
    let db: Db;
    beforeEach(async () => {
      db = await backend.open({ migrations: [...ACCOUNTS_MIGRATIONS, ...ADMIN_MIGRATIONS] });
    });
    afterEach(() => db.close());

    test("each key action taken has its row, newest first; a refused one has none", async () => {
      const wallet = generateKeypair().address;
      await issueApiKey(db, wallet);
      const startedAt = Date.now();
      await runAdminOperation(db, { action: "keys.suspend", wallet, reason: "abuse report" }, "ops@test");
      await assert.rejects(runAdminOperation(db, { action: "keys.suspend", wallet, reason: "again" }, "ops@test"), AdminRefusal);
      await runAdminOperation(db, { action: "keys.reinstate", wallet }, "lead@test");
      const entries = await auditLog(db, 10);
      assert.deepEqual(
        entries.map((e) => [e.action, e.target, e.reason, e.actor]),
        [
          ["keys.reinstate", wallet, null, "lead@test"],
          ["keys.suspend", wallet, "abuse report", "ops@test"],
        ],
      );
      for (const entry of entries) {
        assert.ok(entry.at instanceof Date);
        assert.ok(Math.abs(entry.at.getTime() - startedAt) < 60_000);
      }
      assert.deepEqual((await auditLog(db, 1)).map((e) => e.action), ["keys.reinstate"]);
      const logged = await runAdminOperation(db, { action: "log", limit: 5 }, "ops@test");
      assert.match(logged.lines[0]!, /lead@test {2}keys\.reinstate/);
    });
  });
}
