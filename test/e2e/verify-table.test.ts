/**
 * `svc verify` on a job of a 64-job escrow table, from RPC alone: a chain server in its own
 * process, the service's Chain locking 64 jobs of one wallet in three transactions and settling
 * them for one worker under two signatures of 32 jobs each; then the CLI, given one job's receipt
 * (its leaf and audit path), checks the lock, the worker's signature, the leaf under the signed
 * root, the charge and what the program paid. A changed leaf, path, position or job fails it.
 */
import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { openChain, type Chain, type TableSettlementJob } from "../../src/chain/index.ts";
import { addressBytes } from "../../src/chain/addresses.ts";
import { auditPath, creditsToBaseUnits, generateKeypair, leafBytes, leafHash, newId, outputHash, settlementMessageOf } from "../../src/core/index.ts";
import { runSvc } from "../cli/svc-process.ts";
import { startChainServer, type ChainServer } from "../support/chain-server.ts";
import { tempDir } from "../support/service.ts";

const JOBS = 64;
const dir = await tempDir("svc-verify-table-");
let server: ChainServer;
let chain: Chain;
const wallet = generateKeypair().address;
const worker = generateKeypair();
/** Each settlement's jobs, in leaf order, with their output text. */
const settlements: { jobs: (TableSettlementJob & { text: string })[]; signature: string }[] = [];

before(async () => {
  server = await startChainServer();
  chain = await openChain({ chainUrl: server.url, keysDir: server.keysDir });
  await chain.deposit({ wallet, credits: 1_000 });
  const jobs = Array.from({ length: JOBS }, (_, slot) => ({ jobId: newId("job"), tier: "lite" as const, credits: 10, slot }));
  for (const [from, to] of [[0, 29], [29, 58], [58, 64]] as const) {
    await chain.send((await chain.prepareTableLock({ wallet, tableId: 7n, capacity: 128, firstSlot: from, jobs: jobs.slice(from, to) })).wire);
  }
  for (const half of [jobs.slice(0, 32), jobs.slice(32)]) {
    const settled = half.map((job) => ({ jobId: job.jobId, slot: job.slot, creditsCharged: 1 + (job.slot % 7), proofHash: outputHash(`the output of slot ${job.slot}`), promptTokens: 12, completionTokens: job.slot, text: `the output of slot ${job.slot}` }));
    const message = settlementMessageOf(addressBytes(chain.tableAddressFor(wallet, 7n)), settled.map((j) => ({ ...j, outputHash: hashBytes(j.proofHash), charge: creditsToBaseUnits(j.creditsCharged) })));
    const prepared = await chain.prepareTableSettlement({ wallet, tableId: 7n, worker: worker.address, signature: worker.sign(message), jobs: settled });
    await chain.send(prepared.wire);
    settlements.push({ jobs: settled, signature: prepared.signature });
  }
});
after(async () => {
  await chain.close();
  await server.close();
  await dir.remove();
});

const hashBytes = (proofHash: string) => Buffer.from(proofHash.slice("sha256:".length), "hex");

/** The receipt of the job at `index` of settlement `which`, as the API's JSON. */
function receiptOf(which: number, index: number): Record<string, unknown> {
  const { jobs } = settlements[which]!;
  const leaves = jobs.map((j) => leafHash(leafBytes({ ...j, outputHash: hashBytes(j.proofHash) })));
  const job = jobs[index]!;
  return {
    table: chain.tableAddressFor(wallet, 7n),
    slot: job.slot,
    leaf_index: index,
    tree_size: jobs.length,
    path: auditPath(leaves, index).map((h) => Buffer.from(h).toString("hex")),
    prompt_tokens: job.promptTokens,
    completion_tokens: job.completionTokens,
    proof_hash: job.proofHash,
  };
}

async function verify(jobId: string, receipt: Record<string, unknown>, output?: string): Promise<{ code: number | null; out: string }> {
  const file = join(dir.path, `${newId("job")}.json`);
  await writeFile(file, JSON.stringify(receipt));
  const args = ["verify", jobId, "--rpc", server.url, "--receipt", file];
  if (output !== undefined) {
    await writeFile(`${file}.txt`, output);
    args.push("--output", `${file}.txt`);
  }
  const { code, stdout, stderr } = await runSvc(args, { SVC_API_KEY: "" });
  return { code, out: stdout + stderr };
}

test("a job of a 64-job table verifies from RPC alone: its lock, the signed root over its leaf, its charge, the payouts", async () => {
  const job = settlements[1]!.jobs[8]!;
  const { code, out } = await verify(job.jobId, receiptOf(1, 8), job.text);
  assert.equal(code, 0, out);
  assert.match(out, /All \d+ checks passed/);
  assert.match(out, new RegExp(`slot ${job.slot}`));
  assert.match(out, /settled with\s+31 other jobs under one signature \(leaf 8 of 32\)/);
  assert.match(out, new RegExp(`settlement\\s+${settlements[1]!.signature}`));
  assert.doesNotMatch(out, /MISMATCH/);
});

test("a changed leaf, path, position or job, or other text, fails the receipt", async () => {
  const job = settlements[1]!.jobs[8]!;
  const good = receiptOf(1, 8);
  const path = good.path as string[];
  const cases: [string, string, Record<string, unknown>, string?][] = [
    ["more tokens claimed", job.jobId, { ...good, completion_tokens: job.completionTokens + 1 }],
    ["another output", job.jobId, { ...good, proof_hash: outputHash("something else") }],
    ["an edited path", job.jobId, { ...good, path: [...path.slice(0, -1), "00".repeat(32)] }],
    ["another position", job.jobId, { ...good, leaf_index: 9 }],
    ["another job's receipt", settlements[1]!.jobs[9]!.jobId, good],
    ["the other settlement's slot", job.jobId, { ...good, slot: 8 }],
    ["other text received", job.jobId, good, "not what the worker signed"],
  ];
  for (const [what, jobId, receipt, output] of cases) {
    const { code, out } = await verify(jobId, receipt, output);
    assert.equal(code, 1, `${what}: ${out}`);
    assert.match(out, /MISMATCH/, what);
  }
});

test("a receipt that is not one is refused before anything is checked", async () => {
  const { code, out } = await verify(settlements[0]!.jobs[0]!.jobId, { ...receiptOf(0, 0), path: ["xyz"] });
  assert.equal(code, 2, out);
  assert.match(out, /receipt\.path/);
});
