/**
 * Jobs admitted and settled in groups: concurrent requests from several wallets share
 * transactions, and every job still ends exactly as it would alone: settled, charged once, its
 * events in order, the ledger, the jobs and the chain in agreement. On PGlite, and on PostgreSQL
 * too when DATABASE_URL is set.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { checkInvariants } from "../../src/ledger/index.ts";
import { checkJobInvariants } from "../../src/jobs/job-invariants.ts";
import * as money from "../../src/jobs/money.ts";
import type { Db } from "../../src/store/index.ts";
import { assertChainAgrees } from "../support/chain-checks.ts";
import { testDatabases } from "../support/db.ts";
import { until } from "../support/eventually.ts";
import { MODEL, startTestGateway, type TestGateway } from "../support/service.ts";

/** The Db, counting the transactions opened on it (not savepoints inside them). */
function countingTransactions(db: Db): { db: Db; count(): number } {
  let opened = 0;
  const counted: Db = {
    kind: db.kind,
    query: (sql, params) => db.query(sql, params),
    exec: (sql) => db.exec(sql),
    transaction: (fn) => {
      opened++;
      return db.transaction(fn);
    },
    close: () => db.close(),
  };
  return { db: counted, count: () => opened };
}

for (const backend of testDatabases()) {
  describe(`jobs committed in groups on ${backend.name}`, () => {
    let gateway: TestGateway;
    let transactions: () => number;
    before(async () => {
      const counting = countingTransactions(await backend.open());
      transactions = counting.count;
      gateway = await startTestGateway({ db: counting.db, credits: 0, rateLimit: false });
    });
    after(() => gateway.close());

    test("24 concurrent requests from three wallets: all settled, each charged once, in fewer transactions than one per step", async () => {
      const callers = [await gateway.newAccount(100), await gateway.newAccount(100), await gateway.newAccount(100)];
      const before = transactions();
      const answers = await Promise.all(
        Array.from({ length: 24 }, (_, i) =>
          callers[i % 3]!.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: `Hi ${i}` }], max_tokens: 8, temperature: 0 }),
        ),
      );
      assert.equal(answers.length, 24);
      const db = gateway.service.db;
      // Answered before their settlements confirm: wait for the chain to have them all.
      const settling = () => db.query("SELECT id FROM jobs WHERE status = 'settling'");
      await until(settling, (rows) => rows.length === 0, "the settlements to confirm");
      // Alone, each job opens four: admission, its settlement's record, and the two confirmations.
      const opened = transactions() - before;
      assert.ok(opened < 4 * 24, `${opened} transactions for 24 jobs`);

      for (const caller of callers) {
        const jobs = await db.query<{ id: string; status: string; credits_charged: number }>("SELECT id, status, credits_charged FROM jobs WHERE wallet = $1", [caller.wallet]);
        assert.equal(jobs.length, 8);
        assert.ok(jobs.every((job) => job.status === "settled"));
        const charged = jobs.reduce((sum, job) => sum + job.credits_charged, 0);
        assert.equal((await money.availableCredits(db, caller.wallet)) + charged, 100);
        for (const job of jobs) {
          const events = await db.query<{ name: string }>("SELECT name FROM events WHERE body::jsonb -> 'data' ->> 'job_id' = $1 ORDER BY id", [job.id]);
          assert.deepEqual(events.map((e) => e.name), ["job.submitted", "job.processing", "job.completed"]);
        }
        await assertChainAgrees(gateway.service, caller.wallet);
      }
      assert.deepEqual(await checkInvariants(db), []);
      assert.deepEqual(await checkJobInvariants(db), []);
    });
  });
}
