/**
 * A database error while a job's settlement is recorded (FAULT INJECTION: a trigger refusing the
 * job's move to `settling`, as a deadlock or a lost connection would refuse that transaction):
 * the caller gets a 500 saying nothing was charged, and the job's escrow goes back at once, on
 * the chain and in the ledger, instead of waiting for the node's next start.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { checkJobInvariants } from "../../src/jobs/job-invariants.ts";
import * as money from "../../src/jobs/money.ts";
import { checkInvariants } from "../../src/ledger/index.ts";
import { assertChainAgrees } from "../support/chain-checks.ts";
import { testDatabases } from "../support/db.ts";
import { jobConcluded, until } from "../support/eventually.ts";
import { MODEL, startTestGateway, type TestGateway } from "../support/service.ts";

for (const backend of testDatabases()) {
  describe(`a settlement's record refused on ${backend.name}`, () => {
    let gateway: TestGateway;
    before(async () => {
      gateway = await startTestGateway({ db: await backend.open(), credits: 100 });
    });
    after(() => gateway?.close());

    test("the caller hears nothing was charged, and the escrow comes back without a restart", async () => {
      const { db } = gateway.service;
      await db.exec(`
        CREATE FUNCTION refuse_settling() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.status = 'settling' AND OLD.status = 'processing' THEN RAISE EXCEPTION 'settlement record refused'; END IF;
          RETURN NEW;
        END $$;
        CREATE TRIGGER refuse_settling BEFORE UPDATE ON jobs FOR EACH ROW EXECUTE FUNCTION refuse_settling();
      `);
      let refused: unknown;
      try {
        refused = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 8, temperature: 0 }).then(
          () => assert.fail("a job whose settlement could not be recorded was answered"),
          (error: unknown) => error,
        );
      } finally {
        await db.exec("DROP TRIGGER refuse_settling ON jobs; DROP FUNCTION refuse_settling()");
      }
      assert.ok(refused instanceof OpenAI.APIError && refused.status === 500 && refused.code === "internal_error", String(refused));
      const [row] = await db.query<{ id: string }>("SELECT id FROM jobs WHERE wallet = $1", [gateway.wallet]);
      const job = await jobConcluded(gateway.service, row!.id);
      assert.deepEqual({ status: job.status, charged: job.creditsCharged, reason: job.failureReason }, { status: "failed", charged: 0, reason: "interrupted" });
      assert.ok(job.refundTx, "the escrow went back on-chain");
      await until(() => money.availableCredits(db, gateway.wallet), (credits) => credits === 100, "the credits back in the ledger");
      await assertChainAgrees(gateway.service, gateway.wallet);
      assert.deepEqual(await checkInvariants(db), []);
      assert.deepEqual(await checkJobInvariants(db), []);
    });
  });
}
