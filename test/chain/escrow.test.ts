/**
 * Deposits, escrow locks, settlements and refunds through the escrow program, each read back from
 * the chain to check what the program moved: on the embedded (in-memory) LiteSVM chain, and the
 * same tests on a cluster over RPC (`svc chain serve` in its own process), since both backends
 * make the same promises.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ChainTxError, MAX_LOCKS_PER_TRANSACTION, openChain, type Chain, type ChainTransaction } from "../../src/chain/index.ts";
import { generateKeypair, type Keypair } from "../../src/core/keys.ts";
import { newId } from "../../src/core/ids.ts";
import { outputHash, proofMessage } from "../../src/core/proof.ts";
import { creditsToBaseUnits } from "../../src/core/units.ts";
import { MIN_ACTIVE_STAKE } from "../../src/core/payout.ts";
import { ProgramError, TIER_CODES, escrowPoolAddress, vaultAddress } from "../../src/chain/escrow-program/index.ts";
import type { Address } from "@solana/kit";
import { startChainServer } from "../support/chain-server.ts";

/** The token transfers the program made while the transaction ran: [from, to, base units]. */
const innerTransfers = (tx: ChainTransaction) =>
  tx.innerInstructions.filter((i) => i.kind === "transfer").map((t) => [t.from, t.to, t.amount] as const);
const memos = (tx: ChainTransaction) => tx.instructions.filter((i) => i.kind === "memo").map((i) => i.memo);

function proof(worker: Keypair, jobId: string, text = "the output") {
  const proofHash = outputHash(text);
  return { proofHash, proofSignature: worker.sign(proofMessage(jobId, proofHash)) };
}

const CHAINS: [string, () => Promise<{ chain: Chain; close(): Promise<void> }>][] = [
  ["the embedded chain", async () => {
    const chain = await openChain({});
    return { chain, close: () => chain.close() };
  }],
  ["a cluster over RPC", async () => {
    const server = await startChainServer();
    const chain = await openChain({ chainUrl: server.url, keysDir: server.keysDir });
    return { chain, close: async () => (await chain.close(), await server.close()) };
  }],
];

for (const [name, open] of CHAINS) describe(`escrow on ${name}`, () => {
  let chain: Chain;
  let close: () => Promise<void>;
  before(async () => {
    ({ chain, close } = await open());
  });
  after(() => close());

  async function fundedWallet(credits: number): Promise<string> {
    const wallet = generateKeypair().address;
    await chain.deposit({ wallet, credits, reference: "test" });
    return wallet;
  }

  test("a deposit opens the wallet's vault in the escrow program and mints into it, with a memo", async () => {
    const wallet = generateKeypair().address;
    const first = await chain.deposit({ wallet, credits: 40, reference: "pay_1" });
    const second = await chain.deposit({ wallet, credits: 2 });
    assert.equal(await chain.creditBalance(wallet), creditsToBaseUnits(42));
    assert.equal(chain.creditAccountAddress(wallet), vaultAddress(wallet as Address).address);

    const tx = await chain.readTransaction(first.signature);
    assert.ok(tx.ok);
    assert.equal(tx.slot, first.slot);
    assert.equal(tx.feePayer, chain.feePayer);
    assert.equal(tx.instructions.find((i) => i.kind === "openVault")?.account, chain.creditAccountAddress(wallet), "the program opens the vault");
    assert.deepEqual(
      tx.instructions.filter((i) => i.kind === "mintTo").map((i) => [i.to, i.amount]),
      [[chain.creditAccountAddress(wallet), 400_000n]],
    );
    assert.deepEqual(memos(tx), [`svc:deposit wallet=${wallet} credits=40 ref=pay_1`]);
    const again = await chain.readTransaction(second.signature);
    assert.equal(again.instructions.some((i) => i.kind === "openVault"), false, "the vault is opened once");
  });

  test("lock, then settle: the program pays the worker 75%, the treasury 25%, returns the rest, and records it all", async () => {
    const wallet = await fundedWallet(100);
    const worker = generateKeypair();
    const jobId = newId("job");
    const treasuryBefore = await chain.tokenBalance(chain.treasuryAddress);
    const pool = escrowPoolAddress().address;

    const lock = await chain.lockEscrow({ jobId, tier: "standard", wallet, credits: 12 });
    assert.equal(lock.escrowAddress, chain.escrowAddressFor(jobId));
    assert.equal(await chain.creditBalance(wallet), creditsToBaseUnits(88));
    const record = await chain.escrowRecord(jobId);
    assert.deepEqual([record?.status, record?.jobId, record?.wallet, record?.amountLocked, record?.tier], ["locked", jobId, wallet, 120_000n, TIER_CODES.standard]);
    const locked = await chain.readTransaction(lock.signature);
    const lockIx = locked.instructions.find((i) => i.kind === "lock");
    assert.deepEqual([lockIx?.program, lockIx?.jobId, lockIx?.amount, lockIx?.tier], ["escrow", jobId, 120_000n, TIER_CODES.standard]);
    assert.deepEqual(innerTransfers(locked), [[chain.creditAccountAddress(wallet), pool, 120_000n]], "the program moved the lock into its pool");

    const settled = await chain.settle({
      jobId, wallet, creditsLocked: 12, creditsCharged: 8, workerPublicKey: worker.address, ...proof(worker, jobId),
    });
    const tx = await chain.readTransaction(settled.signature);
    assert.ok(tx.ok);
    assert.equal(tx.instructions[0]?.kind, "ed25519", "the proof check comes first");
    assert.equal(tx.instructions[0]?.publicKey, worker.address);
    assert.equal(tx.instructions[0]?.message, `${jobId}:${outputHash("the output")}`);
    const settle = tx.instructions.find((i) => i.kind === "settle");
    assert.deepEqual([settle?.amount, settle?.publicKey, settle?.proofHash], [80_000n, worker.address, outputHash("the output")]);
    const workerAccount = chain.workerTokenAccount(worker.address);
    assert.deepEqual(innerTransfers(tx).filter(([from]) => from === pool), [
      [pool, workerAccount, 60_000n],
      [pool, chain.treasuryAddress, 20_000n],
      [pool, chain.creditAccountAddress(wallet), 40_000n],
    ]);

    assert.equal(await chain.tokenBalance(workerAccount), 60_000n);
    assert.equal((await chain.tokenBalance(chain.treasuryAddress)) - treasuryBefore, 20_000n);
    assert.equal(await chain.creditBalance(wallet), creditsToBaseUnits(92));
    const closed = await chain.escrowRecord(jobId);
    assert.deepEqual(
      [closed?.status, closed?.charge, closed?.workerPaid, closed?.treasuryPaid, closed?.returned, closed?.worker, closed?.workerStaked],
      ["settled", 80_000n, 60_000n, 20_000n, 40_000n, worker.address, false],
    );
  });

  test("a worker staked on-chain gets 85%, because the program reads its stake", async () => {
    const wallet = await fundedWallet(50);
    const worker = generateKeypair();
    await chain.grantNative({ to: worker.address, amount: MIN_ACTIVE_STAKE });
    await chain.stake({ worker, amount: MIN_ACTIVE_STAKE });
    assert.equal(await chain.isStaked(worker.address), true);
    const jobId = newId("job");
    await chain.lockEscrow({ jobId, tier: "max", wallet, credits: 40 });
    const { signature } = await chain.settle({
      jobId, wallet, creditsLocked: 40, creditsCharged: 40, workerPublicKey: worker.publicKey, ...proof(worker, jobId),
    });
    const amounts = innerTransfers(await chain.readTransaction(signature)).map(([, to, amount]) => [to, amount]);
    assert.deepEqual(amounts, [
      [chain.workerTokenAccount(worker.address), 340_000n],
      [chain.treasuryAddress, 60_000n],
    ]);
    assert.equal(await chain.tokenBalance(chain.workerTokenAccount(worker.address)), 340_000n);
    assert.equal(await chain.creditBalance(wallet), creditsToBaseUnits(10));
    assert.equal((await chain.escrowRecord(jobId))?.workerStaked, true);
  });

  test("a settlement charging nothing returns the whole lock and pays no one", async () => {
    const wallet = await fundedWallet(10);
    const worker = generateKeypair();
    const jobId = newId("job");
    await chain.lockEscrow({ jobId, tier: "lite", wallet, credits: 3 });
    const { signature } = await chain.settle({
      jobId, wallet, creditsLocked: 3, creditsCharged: 0, workerPublicKey: worker.address, ...proof(worker, jobId),
    });
    assert.deepEqual(innerTransfers(await chain.readTransaction(signature)).map(([, to, amount]) => [to, amount]), [[chain.creditAccountAddress(wallet), 30_000n]]);
    assert.equal(await chain.creditBalance(wallet), creditsToBaseUnits(10));
    assert.equal((await chain.escrowRecord(jobId))?.status, "settled");
  });

  for (const [name, forge] of [
    ["a signature over a different hash", (w: Keypair, jobId: string) => w.sign(proofMessage(jobId, outputHash("something else")))],
    ["another key's signature", (_: Keypair, jobId: string) => generateKeypair().sign(proofMessage(jobId, outputHash("the output")))],
    ["garbage bytes", () => new Uint8Array(64).fill(7)],
  ] as const) {
    test(`a forged proof (${name}) fails on-chain, moves nothing, and the escrow can still be refunded`, async () => {
      const wallet = await fundedWallet(20);
      const worker = generateKeypair();
      const jobId = newId("job");
      const lock = await chain.lockEscrow({ jobId, tier: "lite", wallet, credits: 5 });
      const treasuryBefore = await chain.tokenBalance(chain.treasuryAddress);
      const prepared = await chain.prepareSettle({
        jobId, wallet, creditsLocked: 5, creditsCharged: 4, workerPublicKey: worker.address,
        proofHash: outputHash("the output"), proofSignature: forge(worker, jobId),
      });
      await assert.rejects(chain.send(prepared.wire), (e: unknown) => {
        assert.ok(chain.isRejection(e) && e instanceof ChainTxError);
        assert.equal(e.details.signature, prepared.signature);
        assert.equal(e.details.err, "InstructionError(0, Custom(2))", "the Ed25519 precompile refused the signature");
        assert.equal(e.details.landed, true);
        return true;
      });
      const failed = await chain.readTransaction(prepared.signature);
      assert.equal(failed.ok, false);
      assert.equal(failed.err, "InstructionError(0, Custom(2))");
      assert.deepEqual(await chain.transactionStatus(prepared.signature), { ok: false, slot: failed.slot, err: failed.err });
      assert.equal((await chain.escrowRecord(jobId))?.status, "locked", "the escrow still holds the funds");
      assert.equal(lock.escrowAddress, chain.escrowAddressFor(jobId));
      assert.equal(await chain.tokenBalance(chain.workerTokenAccount(worker.address)), 0n);
      assert.equal(await chain.tokenBalance(chain.treasuryAddress), treasuryBefore);

      const refund = await chain.refund({ jobId, wallet, creditsLocked: 5 });
      assert.ok((await chain.readTransaction(refund.signature)).ok);
      assert.equal(await chain.creditBalance(wallet), creditsToBaseUnits(20));
    });
  }

  test("a refund returns everything to the vault and closes the escrow as refunded", async () => {
    const wallet = await fundedWallet(30);
    const jobId = newId("job");
    await chain.lockEscrow({ jobId, tier: "pro", wallet, credits: 27 });
    assert.equal(await chain.creditBalance(wallet), creditsToBaseUnits(3));
    const refund = await chain.refund({ jobId, wallet, creditsLocked: 27 });
    const tx = await chain.readTransaction(refund.signature);
    assert.equal(tx.instructions.find((i) => i.kind === "refund")?.account, chain.escrowAddressFor(jobId));
    assert.deepEqual(innerTransfers(tx), [[escrowPoolAddress().address, chain.creditAccountAddress(wallet), 270_000n]]);
    assert.equal(await chain.creditBalance(wallet), creditsToBaseUnits(30));
    assert.deepEqual([(await chain.escrowRecord(jobId))?.status, (await chain.escrowRecord(jobId))?.returned], ["refunded", 270_000n]);
  });

  test("several jobs' locks in one transaction: each escrow recorded, then settled or refunded, on its own", async () => {
    // Five wallets, the most a transaction has room for whatever the jobs (each a vault of its own).
    const wallets = await Promise.all(Array.from({ length: MAX_LOCKS_PER_TRANSACTION }, () => fundedWallet(20)));
    const jobs = wallets.map((wallet, i) => ({ jobId: newId("job"), tier: "standard" as const, wallet, credits: 3 + i }));
    const prepared = await chain.prepareLockEscrows(jobs);
    assert.deepEqual(prepared.escrowAddresses, jobs.map((j) => chain.escrowAddressFor(j.jobId)));
    await chain.send(prepared.wire);
    const tx = await chain.readTransaction(prepared.signature);
    assert.deepEqual(tx.instructions.filter((i) => i.kind === "lock").map((i) => [i.jobId, i.amount]), jobs.map((j) => [j.jobId, creditsToBaseUnits(j.credits)]));
    for (const [i, job] of jobs.entries()) {
      assert.deepEqual([(await chain.escrowRecord(job.jobId))?.status, (await chain.escrowRecord(job.jobId))?.amountLocked], ["locked", creditsToBaseUnits(job.credits)]);
      assert.equal(await chain.creditBalance(wallets[i]!), creditsToBaseUnits(20 - job.credits));
    }
    const worker = generateKeypair();
    const [first, second] = jobs as [(typeof jobs)[0], (typeof jobs)[0]];
    await chain.settle({ jobId: first.jobId, wallet: first.wallet, creditsLocked: first.credits, creditsCharged: 2, workerPublicKey: worker.address, ...proof(worker, first.jobId) });
    await chain.refund({ jobId: second.jobId, wallet: second.wallet, creditsLocked: second.credits });
    assert.deepEqual(
      await Promise.all(jobs.map(async (j) => (await chain.escrowRecord(j.jobId))?.status)),
      ["settled", "refunded", "locked", "locked", "locked"],
    );
  });

  test("a lock the program refuses fails every lock of its transaction; a job or one too many is refused before signing", async () => {
    const rich = await fundedWallet(20);
    const poor = await fundedWallet(2);
    const jobs = [
      { jobId: newId("job"), tier: "lite" as const, wallet: rich, credits: 5 },
      { jobId: newId("job"), tier: "lite" as const, wallet: poor, credits: 3 },
    ];
    const prepared = await chain.prepareLockEscrows(jobs);
    await assert.rejects(chain.send(prepared.wire), (e: unknown) => {
      const insufficient = `InstructionError(1, Custom(${ProgramError.insufficientFunds}))`;
      assert.ok(e instanceof ChainTxError && e.details.landed && e.details.err === insufficient, String(e));
      return true;
    });
    assert.equal(await chain.accountExists(chain.escrowAddressFor(jobs[0]!.jobId)), false, "the first lock was undone with the second");
    assert.equal(await chain.creditBalance(rich), creditsToBaseUnits(20));
    await assert.rejects(chain.prepareLockEscrows([jobs[0]!, jobs[0]!]), /appears twice/);
    await assert.rejects(chain.prepareLockEscrows([]), RangeError);
    const six = Array.from({ length: MAX_LOCKS_PER_TRANSACTION + 1 }, () => ({ ...jobs[0]!, jobId: newId("job") }));
    await assert.rejects(chain.prepareLockEscrows(six), RangeError);
  });

  test("re-sending the same bytes, even concurrently, executes once", async () => {
    const wallet = await fundedWallet(10);
    const jobId = newId("job");
    const prepared = await chain.prepareLockEscrow({ jobId, tier: "lite", wallet, credits: 2 });
    const results = await Promise.all([chain.send(prepared.wire), chain.send(prepared.wire)]);
    assert.deepEqual(results.map((r) => r.signature), [prepared.signature, prepared.signature]);
    assert.deepEqual(results.map((r) => r.alreadyProcessed).sort(), [false, true]);
    assert.equal(results[0]!.slot, results[1]!.slot);
    const later = await chain.send(prepared.wire);
    assert.equal(later.alreadyProcessed, true);
    assert.equal(await chain.creditBalance(wallet), creditsToBaseUnits(8), "moved once");
    assert.equal((await chain.escrowRecord(jobId))?.amountLocked, creditsToBaseUnits(2));
  });

  test("a signature is known before sending and on-chain only after", async () => {
    const wallet = await fundedWallet(5);
    const prepared = await chain.prepareLockEscrow({ jobId: newId("job"), tier: "lite", wallet, credits: 2 });
    assert.equal(await chain.isProcessed(prepared.signature), false);
    assert.equal(await chain.transactionStatus(prepared.signature), null);
    await assert.rejects(chain.readTransaction(prepared.signature), /not on the chain/);
    const sent = await chain.send(prepared.wire);
    assert.equal(await chain.isProcessed(prepared.signature), true);
    assert.deepEqual(await chain.transactionStatus(prepared.signature), { ok: true, slot: sent.slot });
  });

  test("a transaction whose signature does not match its bytes is refused and leaves no trace", async () => {
    const wallet = await fundedWallet(5);
    const prepared = await chain.prepareLockEscrow({ jobId: newId("job"), tier: "lite", wallet, credits: 2 });
    const tampered = prepared.wire.slice();
    tampered[tampered.length - 1]! ^= 1; // the job id's last byte, under both signatures
    await assert.rejects(chain.send(tampered), (e: unknown) => {
      assert.ok(e instanceof ChainTxError);
      assert.deepEqual([e.details.err, e.details.landed], ["SignatureFailure", false]);
      return true;
    });
    assert.equal(await chain.isProcessed(prepared.signature), false);
    assert.equal(await chain.creditBalance(wallet), creditsToBaseUnits(5));
    await chain.send(prepared.wire);
    assert.equal(await chain.creditBalance(wallet), creditsToBaseUnits(3), "the genuine bytes still execute");
  });

  test("locking more than the vault holds is refused by the program and moves nothing", async () => {
    const wallet = await fundedWallet(3);
    const jobId = newId("job");
    await assert.rejects(chain.lockEscrow({ jobId, tier: "lite", wallet, credits: 4 }), (e: unknown) => {
      const insufficient = `InstructionError(0, Custom(${ProgramError.insufficientFunds}))`;
      assert.ok(e instanceof ChainTxError && e.details.landed && e.details.err === insufficient, String(e));
      return true;
    });
    assert.equal(await chain.creditBalance(wallet), creditsToBaseUnits(3));
    assert.equal(await chain.accountExists(chain.escrowAddressFor(jobId)), false, "no escrow record");
  });

  test("inputs that can only be mistakes are refused before anything is signed", async () => {
    const wallet = await fundedWallet(5);
    const worker = generateKeypair();
    const jobId = newId("job");
    const base = { jobId, wallet, creditsLocked: 5, creditsCharged: 2, workerPublicKey: worker.address, ...proof(worker, jobId) };
    await assert.rejects(chain.prepareSettle({ ...base, creditsCharged: 6 }), RangeError);
    await assert.rejects(chain.prepareSettle({ ...base, proofHash: "md5:abc" }), TypeError);
    await assert.rejects(chain.prepareSettle({ ...base, jobId: "wh_01ARZ3NDEKTSV4RRFFQ69G5FAV" }), TypeError);
    await assert.rejects(chain.prepareLockEscrow({ jobId, tier: "huge" as "lite", wallet, credits: 1 }), TypeError);
    await assert.rejects(chain.prepareLockEscrow({ jobId, tier: "lite", wallet, credits: 1.5 }), RangeError);
    await assert.rejects(chain.prepareDeposit({ wallet: "not-an-address", credits: 1 }), TypeError);
    await assert.rejects(chain.prepareDeposit({ wallet, credits: 1, reference: "has space" }), TypeError);
    assert.throws(() => chain.escrowAddressFor("job_nope"), TypeError);
  });
});

describe("blockhash lifetime", () => {
  test("a transaction not sent within its blockhash's lifetime never executes", async () => {
    const chain = await openChain({ slotMs: 1 });
    try {
      const wallet = generateKeypair().address;
      const prepared = await chain.prepareDeposit({ wallet, credits: 1 });
      while ((await chain.blockHeight()) <= prepared.lastValidBlockHeight) await new Promise((r) => setTimeout(r, 20));
      await assert.rejects(chain.send(prepared.wire), (e: unknown) => {
        assert.ok(e instanceof ChainTxError);
        assert.deepEqual([e.details.err, e.details.landed], ["BlockhashNotFound", false]);
        return true;
      });
      assert.equal(await chain.isProcessed(prepared.signature), false);
      assert.equal(await chain.creditBalance(wallet), 0n);
    } finally {
      await chain.close();
    }
  });
});
