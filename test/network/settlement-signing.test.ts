/**
 * A worker signs the settlement of many of its jobs at once, over the worker protocol on a real
 * gateway on loopback: the gateway names each job's slot, charge and charged tokens; the worker
 * puts its own record of each output's hash under the Merkle root and signs. What it signs is
 * exactly the message the gateway builds from its own job records; a job it did not run, a job
 * named twice and a signature over other outputs do not pass.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { base58Decode } from "../../src/core/base58.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import { verifyEd25519 } from "../../src/core/keys.ts";
import { newId } from "../../src/core/ids.ts";
import { settlementMessageOf } from "../../src/core/settlement-proof.ts";
import { SettlementRefusedError, type SettlementJob, type WorkerHandle } from "../../src/network/worker-handle.ts";
import type { JobRecord } from "../../src/jobs/job-record.ts";
import type { WorkerClient } from "../../src/worker/worker-client.ts";
import { jobConcluded } from "../support/eventually.ts";
import { MODEL } from "../support/service.ts";
import { startWorkerFixture, type WorkerFixture } from "../support/worker-fixture.ts";

let fixture: WorkerFixture;
let worker: WorkerClient;
let handle: WorkerHandle;
let jobs: JobRecord[];
const table = generateKeypair().address;

before(async () => {
  fixture = await startWorkerFixture({ credits: 500 });
  worker = await fixture.attach();
  handle = fixture.gateway.service.pool.all().find((h) => h.address === worker.address)!;
  jobs = [];
  for (const content of ["Say one word.", "Name a colour.", "Count to three."]) {
    const { response } = await fixture.gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content }], max_tokens: 8 }).withResponse();
    jobs.push(await jobConcluded(fixture.gateway.service, response.headers.get("x-svc-job-id")!));
  }
});
after(() => fixture.close());

/** What the gateway asks of the worker for its jobs, slots in the order given. */
const settlementOf = (records: JobRecord[]): SettlementJob[] =>
  records.map((job, slot) => ({ jobId: job.id, slot, charge: BigInt(job.creditsCharged) * 10_000n, promptTokens: job.promptTokens, completionTokens: job.completionTokens }));

/** The message the gateway expects signed, from its own records of the jobs' outputs. */
function expectedMessage(records: JobRecord[], settlement: SettlementJob[]): Uint8Array {
  const leaves = settlement.map((entry, i) => ({ ...entry, outputHash: Buffer.from(records[i]!.proofHash!.replace("sha256:", ""), "hex") }));
  return settlementMessageOf(base58Decode(table, 32), leaves);
}

test("the worker signs its jobs' settlement over the outputs the gateway recorded", async () => {
  const settlement = settlementOf(jobs);
  const signature = await handle.signSettlement({ table, jobs: settlement });
  assert.ok(verifyEd25519(worker.address, expectedMessage(jobs, settlement), signature));
  const reordered = [jobs[2]!, jobs[0]!];
  const again = await handle.signSettlement({ table, jobs: settlementOf(reordered) });
  assert.ok(verifyEd25519(worker.address, expectedMessage(reordered, settlementOf(reordered)), again), "any of its jobs, in any order");
});

test("a signature does not cover other outputs, other charges or another table", async () => {
  const settlement = settlementOf(jobs);
  const signature = await handle.signSettlement({ table, jobs: settlement });
  const other = `sha256:${"0".repeat(64)}`;
  const edited = [{ ...jobs[0]!, proofHash: other }, jobs[1]!, jobs[2]!];
  assert.equal(verifyEd25519(worker.address, expectedMessage(edited, settlement), signature), false, "another output's hash");
  const overcharged = settlement.map((s, i) => (i === 1 ? { ...s, charge: s.charge + 1n } : s));
  assert.equal(verifyEd25519(worker.address, expectedMessage(jobs, overcharged), signature), false, "another charge");
  const elsewhere = settlementMessageOf(base58Decode(generateKeypair().address, 32), settlement.map((s, i) => ({ ...s, outputHash: Buffer.from(jobs[i]!.proofHash!.slice(7), "hex") })));
  assert.equal(verifyEd25519(worker.address, elsewhere, signature), false, "another table");
});

test("the worker refuses a job it did not run, a job named twice, and a table that is not an address", async () => {
  const [first] = settlementOf(jobs);
  const stranger = { ...first!, jobId: newId("job") };
  await assert.rejects(handle.signSettlement({ table, jobs: [first!, stranger] }), (e: unknown) => e instanceof SettlementRefusedError && /did not finish/.test((e as Error).message));
  await assert.rejects(handle.signSettlement({ table, jobs: [first!, { ...first!, slot: 1 }] }), SettlementRefusedError);
  await assert.rejects(handle.signSettlement({ table: "not-an-address", jobs: [first!] }), SettlementRefusedError);
  assert.ok(await handle.signSettlement({ table, jobs: [first!] }), "and keeps its connection");
});
