/**
 * Ended jobs' escrow records are closed once the program's dispute window has passed: every one
 * that is due in the sweep that finds it, however many, 20 to a transaction. A loaded node ends
 * hundreds of jobs a second; one transaction a sweep left the chain holding one more account a job.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { migratedTestDb, MODEL, startTestGateway } from "../support/service.ts";
import { jobConcluded, until } from "../support/eventually.ts";
import { isAnyOf } from "../../src/store/index.ts";

const JOBS = 50;
/** The sweep's period: the dispute window the service is given, at most 10 s (jobs/disputes.ts). */
const SWEEP_MS = 10_000;

test(`${JOBS} ended jobs' escrow records are all closed by one sweep past the program's dispute window`, async () => {
  const gateway = await startTestGateway({ db: await migratedTestDb(), credits: 10_000, escrowTables: false, escrowRules: { disputeWindowSeconds: 1n }, disputes: { windowMs: SWEEP_MS } });
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
    const db = gateway.service.db;
    const rows = await db.query<{ n: bigint }>(`SELECT count(*) AS n FROM jobs WHERE ${isAnyOf(db, "id", "$1::text[]")} AND escrow_closed`, [ids]);
    assert.equal(Number(rows[0]!.n), JOBS);
  } finally {
    await gateway.close();
  }
});

test("an escrow table is closed once every slot is final past the dispute window, and a table still taking locks is not", async () => {
  const gateway = await startTestGateway({ db: await migratedTestDb(), credits: 10_000, escrowTables: true, escrowRules: { disputeWindowSeconds: 1n }, disputes: { windowMs: 2_000 } });
  try {
    // A wallet's first table has 8 slots, its next twice as many: 12 jobs fill the first and not the second.
    const ids = await Promise.all(
      Array.from({ length: 12 }, async () => {
        const { response } = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 4 }).withResponse();
        return response.headers.get("x-svc-job-id")!;
      }),
    );
    const jobs = await Promise.all(ids.map((id) => jobConcluded(gateway.service, id)));
    const tables = [...new Set(jobs.map((job) => job.escrowTableId!))].sort((a, b) => a - b);
    assert.equal(tables.length, 2);
    const [full, open] = tables.map((id) => jobs.filter((job) => job.escrowTableId === id));
    assert.deepEqual([full!.length, open!.length], [8, 4]);
    const { chain } = gateway.service;
    await until(() => chain.tableRecord(gateway.wallet, BigInt(tables[0]!)), (table) => table === null, "the full table closed", 15_000);
    const closedJobs = async () => (await gateway.service.db.query<{ id: string }>(`SELECT id FROM jobs WHERE ${isAnyOf(gateway.service.db, "id", "$1::text[]")} AND escrow_closed`, [ids])).map((row) => row.id);
    await until(closedJobs, (closed) => closed.length === 8, "the full table's jobs marked closed", 5_000);
    assert.deepEqual((await closedJobs()).sort(), full!.map((job) => job.id).sort());
    // The program refuses to close a table that is not full within its append window: it stays.
    assert.ok(await chain.tableRecord(gateway.wallet, BigInt(tables[1]!)), "the table still taking locks is open");
  } finally {
    await gateway.close();
  }
});
