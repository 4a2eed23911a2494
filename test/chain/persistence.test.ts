/**
 * The embedded chain survives a clean restart and a kill -9: balances, accounts byte for byte,
 * and every transaction a caller was told about are there after reopening; nothing executes twice.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { appendFileSync, existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { test, type TestContext } from "node:test";
import { ChainTxError, openLiteSvmBackend, type LiteSvmBackend, openChain, type Chain } from "../../src/chain/index.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import { newId } from "../../src/core/ids.ts";
import { outputHash, proofMessage } from "../../src/core/proof.ts";
import { creditsToBaseUnits } from "../../src/core/units.ts";
import { TxLog } from "../../src/chain/txlog.ts";
import { replayedBalances, stateDigest } from "./fixtures/state.ts";
import { tempDir } from "./fixtures/temp-dir.ts";

async function open(dir: string, checkpointEvery?: number): Promise<{ chain: Chain; backend: LiteSvmBackend }> {
  const backend = await openLiteSvmBackend({ dataDir: join(dir, "chain"), ...(checkpointEvery ? { checkpointEvery } : {}) });
  return { chain: await openChain({ dataDir: dir, backend }), backend };
}

test("a clean restart keeps balances, accounts and transaction history", async (t) => {
  const { dir, defer } = tempDir(t);
  const first = await open(dir);
  const { chain } = first;
  const wallet = generateKeypair().address;
  const worker = generateKeypair();
  const deposit = await chain.deposit({ wallet, credits: 50 });
  const settledJob = newId("job");
  const lock = await chain.lockEscrow({ jobId: settledJob, tier: "lite", wallet, credits: 4 });
  const proofHash = outputHash("out");
  const settle = await chain.settle({
    jobId: settledJob, wallet, creditsLocked: 4, creditsCharged: 2, workerPublicKey: worker.address,
    proofHash, proofSignature: worker.sign(proofMessage(settledJob, proofHash)),
  });
  const openJob = newId("job");
  const openLock = await chain.prepareLockEscrow({ jobId: openJob, tier: "pro", wallet, credits: 20 });
  await chain.send(openLock.wire);
  const forged = await chain.prepareSettle({
    jobId: openJob, wallet, creditsLocked: 20, creditsCharged: 20, workerPublicKey: worker.address,
    proofHash, proofSignature: worker.sign(proofMessage(settledJob, proofHash)),
  });
  await assert.rejects(chain.send(forged.wire), ChainTxError);
  const unsent = await chain.prepareRefund({ jobId: openJob, wallet, creditsLocked: 20 });

  const addresses = [chain.feePayer, chain.mint, chain.treasuryAddress, chain.creditAccountAddress(wallet), chain.workerTokenAccount(worker.address), lock.escrowAddress, openLock.escrowAddress];
  const digest = await stateDigest(first.backend, addresses);
  const signatures = [deposit.signature, lock.signature, settle.signature, openLock.signature, forged.signature];
  const before = await Promise.all(signatures.map((s) => chain.readTransaction(s)));
  const service = [chain.feePayer, chain.mint, chain.serviceAuthority, chain.treasuryAddress];
  await chain.close();

  for (const name of ["fee-payer", "mint", "mint-authority", "custody", "treasury"]) {
    assert.equal(statSync(join(dir, "keys", `${name}.json`)).mode & 0o777, 0o600, `${name} key is private`);
  }

  const second = await open(dir);
  defer(() => second.chain.close());
  const again = second.chain;
  assert.deepEqual([again.feePayer, again.mint, again.serviceAuthority, again.treasuryAddress], service, "the same service keys and accounts");
  assert.equal(await stateDigest(second.backend, addresses), digest, "every account byte for byte");
  assert.equal(await again.creditBalance(wallet), creditsToBaseUnits(50 - 2 - 20));
  assert.deepEqual([(await again.escrowRecord(openJob))?.status, (await again.escrowRecord(openJob))?.amountLocked], ["locked", creditsToBaseUnits(20)]);
  assert.deepEqual(await Promise.all(signatures.map((s) => again.readTransaction(s))), before, "history survives");
  assert.ok(await again.isProcessed(settle.signature));

  const resent = await again.send(openLock.wire);
  assert.equal(resent.alreadyProcessed, true, "an old transaction is still known as processed");
  assert.equal(resent.slot, before[3]!.slot);
  await assert.rejects(again.send(forged.wire), (e: unknown) => e instanceof ChainTxError && e.details.landed);
  assert.equal(await again.creditBalance(wallet), creditsToBaseUnits(28), "nothing executed twice");

  const tampered = (await again.prepareDeposit({ wallet, credits: 1 })).wire.slice();
  tampered[tampered.length - 1]! ^= 1;
  await assert.rejects(again.send(tampered), (e: unknown) => e instanceof ChainTxError && e.details.err === "SignatureFailure", "signatures are checked again after replay");
  await assert.rejects(again.send(unsent.wire), (e: unknown) => e instanceof ChainTxError && e.details.err === "BlockhashNotFound");
  assert.equal(await again.isProcessed(unsent.signature), false, "prepared before the restart, never executed: safe to rebuild");
  await again.refund({ jobId: openJob, wallet, creditsLocked: 20 });
  assert.equal(await again.creditBalance(wallet), creditsToBaseUnits(48));
  assert.ok((await again.slot()) > before[4]!.slot, "the clock resumes after the last slot");
});

test("sends go on while checkpoints are written, and a reopen from the last one keeps every send", async (t) => {
  const { dir, defer } = tempDir(t);
  // A checkpoint every 3 records: its files are written while the next sends execute.
  const first = await open(dir, 3);
  const wallets = Array.from({ length: 36 }, () => generateKeypair().address);
  const receipts = await Promise.all(wallets.map((wallet, i) => first.chain.deposit({ wallet, credits: i + 1 })));
  const addresses = wallets.map((wallet) => first.chain.creditAccountAddress(wallet));
  const digest = await stateDigest(first.backend, addresses);
  const history = await Promise.all(receipts.map((r) => first.chain.readTransaction(r.signature)));
  await first.chain.close();
  assert.ok(existsSync(join(dir, "chain", "checkpoint")), "checkpointed");

  const second = await open(dir, 3);
  defer(() => second.chain.close());
  assert.equal(await stateDigest(second.backend, addresses), digest, "every account byte for byte");
  for (const [i, wallet] of wallets.entries()) assert.equal(await second.chain.creditBalance(wallet), creditsToBaseUnits(i + 1));
  assert.deepEqual(await Promise.all(receipts.map((r) => second.chain.readTransaction(r.signature))), history, "every send is found by its signature");
});

test("a data dir is owned by one open chain at a time", async (t) => {
  const { dir } = tempDir(t);
  const { chain } = await open(dir);
  await assert.rejects(open(dir), /already open/);
  await chain.close();
  const reopened = await open(dir);
  await reopened.chain.close();
});

const WORKER_BOUND_MS = 120_000;
/** Reopening and checking after the kill may hang only through a bug; the test then fails at this bound. */
const TEST_BOUND_MS = 240_000;

interface WorkerRun {
  intents: string[];
  acked: string[];
  landedRejections: string[];
  quiet?: { addresses: string[]; digest: string };
}

/**
 * Runs chain-worker.ts until `stop` says so, then kills it with SIGKILL, and reads what it had
 * written before dying: every transaction that could have executed was announced first.
 */
async function runAndKill(dir: string, args: { checkpointEvery: number; lanes: number; rounds: number; unsynced?: boolean }, stop: (run: WorkerRun) => boolean): Promise<WorkerRun> {
  const child = spawn(
    process.execPath,
    [
      ...["--import", "tsx", join(import.meta.dirname, "fixtures", "chain-worker.ts"), dir],
      ...[String(args.checkpointEvery), String(args.lanes), String(args.rounds), ...(args.unsynced ? ["unsynced"] : [])],
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on("exit", (_code, signal) => resolve(signal)));
  const run: WorkerRun = { intents: [], acked: [], landedRejections: [] };
  // A worker that stops making progress must fail the test, not hold the file until the runner's
  // 10-minute limit: bound the wait and say how far the worker got.
  let stalled = false;
  const watchdog = setTimeout(() => {
    stalled = true;
    child.kill("SIGKILL");
  }, WORKER_BOUND_MS);
  for await (const line of createInterface({ input: child.stdout })) {
    const e = JSON.parse(line) as { intent?: string; acked?: string; rejected?: string; landed?: boolean; quiet?: boolean; addresses?: string[]; digest?: string };
    if (e.intent) run.intents.push(e.intent);
    if (e.acked) run.acked.push(e.acked);
    if (e.rejected && e.landed) run.landedRejections.push(e.rejected);
    if (e.quiet) run.quiet = { addresses: e.addresses!, digest: e.digest! };
    if (!child.killed && stop(run)) child.kill("SIGKILL");
  }
  clearTimeout(watchdog);
  const signal = await exited;
  assert.ok(!stalled, `the worker had not got there after ${WORKER_BOUND_MS / 1000} s: ${run.intents.length} sent, ${run.acked.length} acknowledged, quiet: ${run.quiet !== undefined}`);
  assert.equal(signal, "SIGKILL", "the worker was killed, not closed");
  return run;
}

/** After a crash: every acknowledged transaction is there, and balances are exactly what the executed ones imply. */
async function assertRecovered(chain: Chain, run: WorkerRun): Promise<string[]> {
  for (const s of run.acked) assert.deepEqual((await chain.transactionStatus(s))?.ok, true, `acknowledged ${s} survived`);
  for (const s of run.landedRejections) assert.deepEqual((await chain.transactionStatus(s))?.ok, false, `landed failure ${s} survived`);
  const executed: string[] = [];
  for (const s of run.intents) if (await chain.isProcessed(s)) executed.push(s);
  const expected = await replayedBalances(chain, executed);
  for (const [address, amount] of expected) assert.equal(await chain.tokenBalance(address), amount, `balance of ${address}`);
  return executed;
}

for (const checkpointEvery of [1_000_000, 7]) {
  const mode = checkpointEvery > 1000 ? "the whole log" : "the last checkpoint and the log after it";
  test(`kill -9 once quiet: reopening replays ${mode} to identical state`, { timeout: TEST_BOUND_MS }, async (t) => {
    const { dir, defer } = tempDir(t);
    const run = await runAndKill(dir, { checkpointEvery, lanes: 3, rounds: 8 }, (r) => r.quiet !== undefined);
    assert.ok(run.quiet);
    assert.equal(existsSync(join(dir, "chain", "checkpoint")), checkpointEvery < 1000, "checkpointed as configured");
    const { chain, backend } = await open(dir);
    defer(() => chain.close());
    assert.equal(await stateDigest(backend, run.quiet.addresses), run.quiet.digest, "every account byte for byte");
    const executed = await assertRecovered(chain, run);
    assert.equal(executed.length, run.intents.length, "quiet: everything sent had executed");
  });
}

// An unsynced log (a node on PGlite) acknowledges a send once its record is written: a kill must
// not lose it either.
for (const unsynced of [false, true]) {
  const log = unsynced ? "a log not synced to the disk" : "a synced log";
  test(`kill -9 mid-stream, ${log}, a torn record at its end: acknowledged work survives, the rest is rebuildable`, { timeout: TEST_BOUND_MS }, async (t) => {
    await killMidStream(t, unsynced);
  });
}

/** Where the whole frames of the log at `path` end. */
function goodRecordsEnd(path: string): number {
  const log = TxLog.open(path);
  const end = { offset: 0 };
  Array.from(log.scan(0, end));
  log.close();
  return end.offset;
}

async function killMidStream(t: TestContext, unsynced: boolean): Promise<void> {
  const { dir, defer } = tempDir(t);
  const run = await runAndKill(dir, { checkpointEvery: 25, lanes: 4, rounds: 1000, unsynced }, (r) => r.acked.length >= 60 || r.quiet !== undefined);
  assert.equal(run.quiet, undefined, "killed in the middle of its work");
  // A write the kill cut short: a frame header promising more bytes than follow. The kill may
  // have torn the last frame itself (a write stopped at a page boundary): the log's good records
  // end where its last whole frame does.
  const log = join(dir, "chain", "txlog");
  const intact = goodRecordsEnd(log);
  const torn = Buffer.alloc(20);
  torn.writeUInt32LE(400, 0);
  appendFileSync(log, torn);

  const { chain } = await open(dir, 25);
  assert.equal(statSync(log).size, intact, "the torn record was cut off");
  let closed = false;
  defer(async () => {
    if (!closed) await chain.close();
  });
  const executed = await assertRecovered(chain, run);
  assert.ok(executed.length >= run.acked.length);
  const missing = run.intents.filter((s) => !executed.includes(s));
  for (const s of missing) {
    await assert.rejects(chain.readTransaction(s), /not on the chain/);
  }
  // The chain keeps working, and after another restart still agrees.
  const wallet = generateKeypair().address;
  await chain.deposit({ wallet, credits: 3 });
  await chain.close();
  closed = true;
  const { chain: reopened } = await open(dir);
  defer(() => reopened.close());
  assert.equal(await reopened.creditBalance(wallet), creditsToBaseUnits(3));
  await assertRecovered(reopened, run);
}
