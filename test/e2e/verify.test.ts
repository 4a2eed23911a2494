/**
 * `svc verify` as a real process against a real gateway and the chain's JSON-RPC: a paid
 * completion through the openai SDK checks out from the chain, with and without the service's
 * claims; a tampered output, a wrong transaction and an unreachable chain do not. Jobs whose locks
 * share one transaction each check out on their own lock, open and closed. The jobs here hold
 * escrow records of their own (`escrowTables: false`); an escrow table job's receipt is checked in
 * escrow-tables.test.ts.
 */
import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, test, type TestContext } from "node:test";
import { ChainTxError, startChainRpc, type ChainRpcServer } from "../../src/chain/index.ts";
import { ESCROW_PROGRAM } from "../../src/chain/escrow-program/index.ts";
import { generateKeypair, newId, outputHash, proofMessage } from "../../src/core/index.ts";
import type { Address } from "@solana/kit";
import { runSvc, startSvc } from "../cli/svc-process.ts";
import { ForgingWorker } from "../support/forging-worker.ts";
import { MODEL, migratedTestDb, startTestGateway, tempDir, testWorker, type TestGateway } from "../support/service.ts";

let gateway: TestGateway;
let rpc: ChainRpcServer;
const dir = await tempDir("svc-verify-");

before(async () => {
  gateway = await startTestGateway({ db: await migratedTestDb(), credits: 100, escrowTables: false });
  rpc = await startChainRpc({ chain: gateway.service.chain, port: 0 });
});
after(async () => {
  await rpc.close();
  await gateway.close();
  await dir.remove();
});

async function verify(args: string[], apiKey?: string): Promise<{ code: number | null; out: string }> {
  const run = startSvc(["verify", ...args, "--base-url", gateway.baseUrl, "--rpc", rpc.url], apiKey ? { SVC_API_KEY: apiKey } : { SVC_API_KEY: "" });
  const { code } = await run.exited();
  return { code, out: run.stdout() + run.stderr() };
}

async function paidJob(): Promise<{ jobId: string; text: string; escrowTx: string; settlementTx: string }> {
  const { data, response } = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }] }).withResponse();
  return {
    jobId: response.headers.get("x-svc-job-id")!,
    text: data.choices[0]!.message.content ?? "",
    escrowTx: response.headers.get("x-svc-escrow-tx")!,
    settlementTx: response.headers.get("x-svc-settlement-tx")!,
  };
}

test("a paid completion's receipt checks out from the chain, the service's claims and the text received", async () => {
  const job = await paidJob();
  const escrow = await gateway.service.chain.backend.getAccount(gateway.service.chain.escrowAddressFor(job.jobId) as Address);
  assert.equal(escrow?.owner, ESCROW_PROGRAM, "the escrow account is the program's");
  const output = join(dir.path, "received.txt");
  await writeFile(output, job.text);
  const ok = await verify([job.jobId, "--output", output], gateway.apiKey);
  assert.equal(ok.code, 0, ok.out);
  assert.match(ok.out, /^Receipt for job_/m);
  assert.match(ok.out, /status {10}settled/);
  assert.match(ok.out, /ok {8}that signature verifies here too/);
  assert.match(ok.out, /ok {8}the text received hashes to the proof/);
  assert.match(ok.out, /All \d+ checks passed\./);
  assert.doesNotMatch(ok.out, /MISMATCH/);

  await writeFile(output, `${job.text} (edited)`);
  const tampered = await verify([job.jobId, "--output", output], gateway.apiKey);
  assert.equal(tampered.code, 1, tampered.out);
  assert.match(tampered.out, /MISMATCH {2}the text received hashes to the proof/);
  assert.match(tampered.out, /1 of \d+ checks failed\./);
});

test("without an API key the chain alone is read: the transactions are found from the job's escrow address, or given", async () => {
  const job = await paidJob();
  const found = await verify([job.jobId]);
  assert.equal(found.code, 0, found.out);
  assert.match(found.out, new RegExp(`lock {12}${job.escrowTx}`));
  assert.match(found.out, new RegExp(`settlement {6}${job.settlementTx}`));
  assert.match(found.out, /SVC_API_KEY not set/);
  const given = await verify([job.jobId, "--escrow-tx", job.escrowTx, "--settlement-tx", job.settlementTx]);
  assert.equal(given.code, 0, given.out);
  const swapped = await verify([job.jobId, "--escrow-tx", job.settlementTx, "--settlement-tx", job.settlementTx]);
  assert.equal(swapped.code, 1, swapped.out);
  assert.match(swapped.out, /MISMATCH {2}the lock names this job/);
});

test("a job that charged nothing shows its refund; an unknown job, a bad id and an unreachable chain are not checked", async () => {
  const forger = new ForgingWorker(await testWorker());
  gateway.service.trust.vouch(forger.address);
  gateway.service.pool.add(forger);
  for (const w of gateway.service.pool.hosting(MODEL)) if (!(w instanceof ForgingWorker)) gateway.service.pool.remove(w.address);
  const failed = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }] }).withResponse().catch((e: { headers?: Headers }) => e);
  const jobId = (failed as { headers?: Headers }).headers?.get("x-svc-job-id");
  assert.ok(jobId);
  const refunded = await verify([jobId], gateway.apiKey);
  assert.equal(refunded.code, 0, refunded.out);
  assert.match(refunded.out, /status {10}refunded/);
  assert.match(refunded.out, /ok {8}the whole lock went back to the vault/);

  const unknown = await verify(["job_01J00000000000000000000000"]);
  assert.equal(unknown.code, 1, unknown.out);
  assert.match(unknown.out, /MISMATCH {2}the job has an escrow record in the program/);
  assert.equal((await verify(["not-a-job"])).code, 2);
  const run = startSvc(["verify", "job_01J00000000000000000000000", "--rpc", "http://127.0.0.1:9"], { SVC_API_KEY: "" });
  assert.equal((await run.exited()).code, 2);
  assert.match(run.stderr(), /could not check job_01J0+: .*\(chain: http:\/\/127\.0\.0\.1:9\)/);
});

/** A gateway and its chain's JSON-RPC where an ended job's escrow record may be closed a second after it ended. */
async function startClosingGateway(t: TestContext): Promise<{ closing: TestGateway; closingRpc: ChainRpcServer }> {
  const closing = await startTestGateway({ db: await migratedTestDb(), credits: 100, escrowTables: false, escrowRules: { disputeWindowSeconds: 1n }, disputes: { windowMs: 1_000 } });
  const closingRpc = await startChainRpc({ chain: closing.service.chain, port: 0 });
  t.after(async () => {
    await closingRpc.close();
    await closing.close();
  });
  return { closing, closingRpc };
}

test("once its dispute window has passed the service closes the job's escrow record, recovering the rent, and the receipt is read from its transactions", async (t) => {
  const { closing, closingRpc } = await startClosingGateway(t);
  const { chain, db } = closing.service;
  const { data, response } = await closing.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }] }).withResponse();
  const jobId = response.headers.get("x-svc-job-id")!;
  const escrow = chain.escrowAddressFor(jobId) as Address;
  assert.ok(await chain.backend.getAccount(escrow), "the record exists while the job can be disputed");
  const deadline = Date.now() + 30_000;
  while ((await chain.backend.getAccount(escrow)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  assert.equal(await chain.backend.getAccount(escrow), null, "closed");
  const [row] = await db.query<{ escrow_closed: boolean }>("SELECT escrow_closed FROM jobs WHERE id = $1", [jobId]);
  assert.equal(row?.escrow_closed, true);

  const output = join(dir.path, "closed.txt");
  await writeFile(output, data.choices[0]!.message.content ?? "");
  const run = startSvc(["verify", jobId, "--base-url", closing.baseUrl, "--rpc", closingRpc.url, "--output", output], { SVC_API_KEY: closing.apiKey });
  const { code } = await run.exited();
  assert.equal(code, 0, run.stdout() + run.stderr());
  assert.match(run.stdout(), /\(closed: read from its transactions\)/);
  assert.match(run.stdout(), /ok {8}the escrow record was closed after its dispute window/);
  assert.match(run.stdout(), /ok {8}the program paid exactly that/);
});

test("two jobs of one wallet locked in one transaction: each receipt checks its own lock and the transfer that lock made, open and once closed", async (t) => {
  const { closing, closingRpc } = await startClosingGateway(t);
  const { chain } = closing.service;
  const wallet = generateKeypair().address;
  await chain.deposit({ wallet, credits: 50, reference: "test" });
  const [settled, refunded] = [newId("job"), newId("job")];
  // The settled job's lock comes first, so only a lock check summing the whole transaction's
  // transfers (12 + 5 credits) would fail it; the refunded job's comes second, so a check taking
  // the first lock instruction would read the other job's.
  const prepared = await chain.prepareLockEscrows([
    { jobId: settled, tier: "standard", wallet, credits: 12 },
    { jobId: refunded, tier: "lite", wallet, credits: 5 },
  ]);
  const lock = await chain.send(prepared.wire);
  const worker = generateKeypair();
  const proofHash = outputHash("the output");
  await chain.settle({ jobId: settled, wallet, creditsLocked: 12, creditsCharged: 8, workerPublicKey: worker.address, proofHash, proofSignature: worker.sign(proofMessage(settled, proofHash)) });
  await chain.refund({ jobId: refunded, wallet, creditsLocked: 5 });

  const jobs = [
    { jobId: settled, status: "settled", locked: "12 credits \\(0\\.1200 USDC\\)", units: 120_000n },
    { jobId: refunded, status: "refunded", locked: "5 credits \\(0\\.0500 USDC\\)", units: 50_000n },
  ];
  const receipts = async (closed: boolean) => {
    for (const job of jobs) {
      const run = await runSvc(["verify", job.jobId, "--rpc", closingRpc.url], { SVC_API_KEY: "" });
      const out = run.stdout + run.stderr;
      assert.equal(run.code, 0, out);
      assert.match(out, new RegExp(`status {10}${job.status}`));
      assert.match(out, new RegExp(`locked {10}${job.locked}`));
      assert.match(out, new RegExp(`lock {12}${lock.signature} \\(slot ${lock.slot}; it locks 2 jobs\\)`));
      assert.match(out, new RegExp(`ok {8}the lock names this job, its amount and tier: job ${job.jobId}, ${job.units} base units`));
      assert.match(out, new RegExp(`ok {8}the lock moved the amount from the vault into the escrow pool: ${job.units} base units`));
      if (closed) {
        assert.match(out, /\(closed: read from its transactions\)/);
        assert.match(out, /record closed {3}\S+ \(slot \d+; it closes 2 records\)/);
        assert.match(out, /ok {8}the escrow record was closed after its dispute window/);
      }
    }
  };
  await receipts(false);

  // Both records closed in one transaction once the window has passed, the refunded job's first:
  // each receipt must find its own record's close, not the first in it.
  const deadline = Date.now() + 30_000;
  for (;;) {
    const close = await chain.prepareCloseEscrows([refunded, settled]);
    const sent = await chain.send(close.wire).then(
      () => true,
      (e: unknown) => {
        if (!(e instanceof ChainTxError) || !/Custom\(22\)/.test(e.details.err) || Date.now() > deadline) throw e;
        return false;
      },
    );
    if (sent) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal(await chain.escrowRecord(settled), null, "closed");
  await receipts(true);
});
