/**
 * The embedded chain on its own thread (the default of openChain): what crosses between the
 * threads keeps its meaning (a failed transaction's details, watchers' events in order, the
 * slot), the data dir stays one owner's, and the thread neither keeps a process alive nor lets it
 * end with a call unanswered.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { truncateSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { test } from "node:test";
import { ChainTxError, openLiteSvmBackend, type LiteSvmBackend, openChain } from "../../src/chain/index.ts";
import { ThreadedChainBackend } from "../../src/chain/chain-thread.ts";
import type { ChainEvent } from "../../src/chain/backend.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import { newId } from "../../src/core/ids.ts";
import { outputHash, proofMessage } from "../../src/core/proof.ts";
import { tempDir } from "./fixtures/temp-dir.ts";

test("a transaction that fails on the chain thread fails here as a ChainTxError with its details; watchers see each landing before its send resolves", async (t) => {
  const { dir, defer } = tempDir(t);
  const chain = await openChain({ dataDir: dir });
  defer(() => chain.close());
  assert.ok(chain.backend instanceof ThreadedChainBackend, "openChain's embedded chain runs on its own thread");
  const events: ChainEvent[] = [];
  const unwatch = (chain.backend as ThreadedChainBackend).watch((event) => events.push(event));

  const wallet = generateKeypair().address;
  const worker = generateKeypair();
  await chain.deposit({ wallet, credits: 10 });
  const jobId = newId("job");
  const lock = await chain.lockEscrow({ jobId, tier: "lite", wallet, credits: 4 });
  assert.ok(events.some((e) => e.type === "tx" && e.signature === lock.signature), "the lock's landing came before its send resolved");

  const proofHash = outputHash("out");
  const forged = await chain.prepareSettle({
    jobId, wallet, creditsLocked: 4, creditsCharged: 4, workerPublicKey: worker.address,
    proofHash, proofSignature: worker.sign(proofMessage(newId("job"), proofHash)),
  });
  const err = await chain.send(forged.wire).then(() => assert.fail("a proof of another job settled"), (e: unknown) => e);
  assert.ok(err instanceof ChainTxError, `a ChainTxError, got ${String(err)}`);
  assert.equal(err.details.landed, true, "it landed: its fee was charged");
  assert.equal(typeof err.details.slot, "number");
  assert.match(err.details.err, /^InstructionError\(/, "the runtime's error as the in-process chain words it");
  assert.match(err.message, new RegExp(`^transaction ${forged.signature} failed: InstructionError`));

  const slot = await chain.backend.getSlot();
  const landed = events.filter((e) => e.type === "tx");
  assert.ok(landed.length >= 3, "the deposit, the lock and the failed settlement");
  assert.ok(landed.every((e) => e.type === "tx" && e.record.slot <= slot), "no landing is ahead of the slot this side knows");
  unwatch();
});

test("a data dir the chain thread owns is refused to a second opener in the same process, and free again once closed", async (t) => {
  const dir = join(tempDir(t).dir, "chain");
  const first = await ThreadedChainBackend.open({ dataDir: dir });
  await assert.rejects(ThreadedChainBackend.open({ dataDir: dir }), /already open in this process/);
  await assert.rejects(openLiteSvmBackend({ dataDir: dir }), /already open in this process/);
  await first.close();
  await assert.rejects(first.getAccount(generateKeypair().address), /closed/, "a call after close fails");
  const again = await openLiteSvmBackend({ dataDir: dir });
  await again.close();
});

test("an opening that fails on the thread fails here with the thread's reason", async (t) => {
  const dir = join(tempDir(t).dir, "chain");
  const written = await openLiteSvmBackend({ dataDir: dir });
  await written.requestAirdrop(generateKeypair().address, 1_000_000n);
  await written.close();
  // The log lost what the checkpoint counts on (a damaged disk): the thread refuses to open it.
  truncateSync(join(dir, "txlog"), 0);
  await assert.rejects(ThreadedChainBackend.open({ dataDir: dir }), /txlog is shorter than the checkpoint says/);
  await assert.rejects(openLiteSvmBackend({ dataDir: dir }), /txlog is shorter than the checkpoint says/, "the lock was released: the same refusal, not a lock's");
});

test("an open chain thread does not keep a finished process alive, and a call in flight does until it is answered", async () => {
  const script = join(import.meta.dirname, "fixtures", "thread-left-open.ts");
  const started = Date.now();
  const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", script], { timeout: 60_000 });
  assert.match(stdout, /^airdrop answered: 5000000 lamports$/m, "the call in flight was answered before the process ended");
  assert.ok(Date.now() - started < 60_000);
});

test("a thread whose chain was closed serves the next chain, which sees nothing of the one before", async (t) => {
  const dir = tempDir(t).dir;
  const address = generateKeypair().address;
  const first = await ThreadedChainBackend.open({});
  const watched: ChainEvent[] = [];
  first.watch((event) => watched.push(event));
  await first.requestAirdrop(address, 7_000_000n);
  await first.close();

  const second = await ThreadedChainBackend.open({ dataDir: join(dir, "chain") });
  const seen: ChainEvent[] = [];
  second.watch((event) => seen.push(event));
  assert.equal(await second.getAccount(address), null, "the first chain's airdrop is not in the second");
  await second.requestAirdrop(address, 3_000_000n);
  assert.equal((await second.getAccount(address))?.lamports, 3_000_000n);
  assert.ok(seen.some((e) => e.type === "airdrop"), "the second chain's watchers hear it");
  assert.equal(watched.filter((e) => e.type === "airdrop").length, 1, "the first chain's watchers hear nothing more");
  await second.close();

  const reopened = await ThreadedChainBackend.open({ dataDir: join(dir, "chain") });
  assert.equal((await reopened.getAccount(address))?.lamports, 3_000_000n, "the second chain's state is durable");
  await reopened.close();
});

test("several accounts in one call: in the order asked, null where there is none, as one at a time reads them", async () => {
  const backend = await ThreadedChainBackend.open({});
  try {
    const funded = [generateKeypair().address, generateKeypair().address];
    await backend.requestAirdrop(funded[0]!, 1_000_000n);
    await backend.requestAirdrop(funded[1]!, 2_000_000n);
    const asked = [funded[1]!, generateKeypair().address, funded[0]!, funded[1]!];
    const accounts = await backend.getAccounts(asked);
    assert.deepEqual(accounts.map((a) => a?.lamports ?? null), [2_000_000n, null, 1_000_000n, 2_000_000n]);
    assert.deepEqual(accounts, await Promise.all(asked.map((address) => backend.getAccount(address))));
    assert.deepEqual(await backend.getAccounts([]), []);
  } finally {
    await backend.close();
  }
});
