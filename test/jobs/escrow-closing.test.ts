/**
 * Ended jobs' escrow records are closed once the program's dispute window has passed: every one
 * that is due in the sweep that finds it, however many, 20 to a transaction. A loaded node ends
 * hundreds of jobs a second; one transaction a sweep left the chain holding one more account a job.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { migratedTestDb, MODEL, startTestGateway } from "../support/service.ts";
import { jobConcluded, until } from "../support/eventually.ts";

const JOBS = 50;
/** The sweep's period: the dispute window the service is given, at most 10 s (jobs/disputes.ts). */
const SWEEP_MS = 10_000;

test(`${JOBS} ended jobs' escrow records are all closed by one sweep past the program's dispute window`, async () => {
  const gateway = await startTestGateway({ db: await migratedTestDb(), credits: 10_000, escrowRules: { disputeWindowSeconds: 1n }, disputes: { windowMs: SWEEP_MS } });
  try {
    const ids = await Promise.all(
      Array.from({ length: JOBS }, async () => {
        const { response } = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 4 }).withResponse();
        return response.headers.get("x-svc-job-id")!;
      }),
    );
    for (const id of ids) assert.equal((await jobConcluded(gateway.service, id)).status, "settled");
    const closed = async () => (await gateway.service.chain.escrowRecords(ids)).filter((record) => record === null).length;

    // Past the window (and the second the sweep adds) every record is due. A sweep may have run
    // meanwhile and closed those due then; the next one must close all the rest.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const before = await closed();
    if (before < JOBS) {
      await until(closed, (n) => n > before, "the next sweep", SWEEP_MS + 2_000);
      await until(closed, (n) => n === JOBS, `all ${JOBS} records closed by that sweep`, 3_000);
    }
    const rows = await gateway.service.db.query<{ n: number }>("SELECT count(*)::int AS n FROM jobs WHERE id = ANY($1::text[]) AND escrow_closed", [ids]);
    assert.equal(rows[0]!.n, JOBS);
  } finally {
    await gateway.close();
  }
});
