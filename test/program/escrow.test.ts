/**
 * Job escrows instruction by instruction: lock, settle against the worker's Ed25519 proof, refund
 * by the authority or by anyone after the timeout, and every refusal, read back from the chain.
 */
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { addressBytes } from "../../src/chain/addresses.ts";
import { generateKeypair, type Keypair } from "../../src/core/keys.ts";
import { splitPayout } from "../../src/core/payout.ts";
import {
  decodeEscrow,
  decodeEscrowInstruction,
  escrowAddress,
  escrowInstructions as ix,
  escrowPoolAddress,
  stakeAddress,
} from "../../src/chain/escrow-program/index.ts";
import type { Address, Instruction } from "@solana/kit";
import { EscrowChain, customError, demote, proofOf, substitute } from "./harness.ts";

let jobs = 0;
const newJobId = () => `job_test${String(++jobs).padStart(6, "0")}`;

describe("job escrows", () => {
  let chain: EscrowChain;
  let worker: Keypair;
  let workerAccount: Address;
  before(async () => {
    chain = await EscrowChain.open();
    worker = generateKeypair();
    workerAccount = chain.tokenAccount(worker.address, chain.usdcMint.address);
  });

  function lockIx(wallet: Address, jobId: string, amount: bigint): Instruction {
    return ix.lock({ serviceAuthority: chain.authority.address, payer: chain.payer.address, wallet, jobId, tier: 2, amount });
  }
  function locked(amount: bigint, funded = amount) {
    const w = chain.fundedWallet(funded);
    const jobId = newJobId();
    chain.expectOk(chain.send([lockIx(w.wallet.address, jobId, amount)], [chain.authority]));
    return { ...w, jobId };
  }
  function settleIx(wallet: Address, jobId: string, charge: bigint, proofHash: Uint8Array, by: Keypair = worker): Instruction {
    return ix.settle({
      serviceAuthority: chain.authority.address, jobId, wallet, worker: by.address,
      workerTokenAccount: by === worker ? workerAccount : chain.tokenAccount(by.address, chain.usdcMint.address),
      treasury: chain.treasury, charge, proofHash,
    });
  }
  function settle(wallet: Address, jobId: string, charge: bigint) {
    const p = proofOf(worker, jobId);
    return chain.send([p.verify, settleIx(wallet, jobId, charge, p.proofHash)], [chain.authority]);
  }

  test("lock moves the estimate from the vault to the pool and records wallet, tier, job id, amount, time", () => {
    const { wallet, vault } = chain.fundedWallet(1_000_000n);
    const pool = chain.balance(escrowPoolAddress().address);
    const jobId = newJobId();
    chain.advance(1000n);
    chain.expectOk(chain.send([lockIx(wallet.address, jobId, 300_000n)], [chain.authority]));
    assert.equal(chain.balance(vault), 700_000n);
    assert.equal(chain.balance(escrowPoolAddress().address), pool + 300_000n);
    const e = decodeEscrow(chain.data(escrowAddress(jobId).address)!);
    assert.equal(e.status, "locked");
    assert.equal(e.wallet, wallet.address);
    assert.equal(e.vault, vault);
    assert.equal(e.tier, 2);
    assert.equal(e.jobId, jobId);
    assert.equal(e.amountLocked, 300_000n);
    assert.equal(e.lockedAt, chain.now());
    const rent = chain.svm.minimumBalanceForRentExemption(256n);
    assert.equal(chain.svm.getBalance(addressBytes(escrowAddress(jobId).address)), rent, "exactly rent-exempt, read from the rent sysvar");
  });

  test("lock refusals: another signer, unsigned, beyond the vault, zero, twice, substituted vault or pool, bad job id", () => {
    const { wallet, vault } = chain.fundedWallet(100_000n);
    const other = chain.fundedWallet(100_000n);
    const impostor = generateKeypair();
    const jobId = newJobId();
    const base = lockIx(wallet.address, jobId, 50_000n);
    const cases: [string, Instruction[], Keypair[], string][] = [
      ["signed by another key", [substitute(base, 1, impostor.address)], [impostor], customError("wrongAddress")],
      ["authority not signing", [demote(base, 1)], [], customError("missingSigner")],
      ["beyond the vault", [lockIx(wallet.address, jobId, 100_001n)], [chain.authority], customError("insufficientFunds")],
      ["u64 max", [lockIx(wallet.address, jobId, 2n ** 64n - 1n)], [chain.authority], customError("insufficientFunds")],
      ["zero", [lockIx(wallet.address, jobId, 0n)], [chain.authority], customError("invalidAmount")],
      ["another wallet's vault", [substitute(base, 4, other.vault)], [chain.authority], customError("wrongAddress")],
      ["a substituted pool", [substitute(base, 5, other.own)], [chain.authority], customError("wrongAddress")],
      ["a substituted escrow address", [substitute(base, 3, escrowAddress(newJobId()).address)], [chain.authority], customError("wrongAddress")],
      ["an empty job id", [lockIx(wallet.address, "", 1n)], [chain.authority], customError("invalidJobId")],
      ["a job id with a space", [lockIx(wallet.address, "job 1", 1n)], [chain.authority], customError("invalidJobId")],
    ];
    for (const [name, ixs, signers, err] of cases) assert.equal(chain.send(ixs, signers).err, err, name);
    assert.equal(chain.balance(vault), 100_000n);
    chain.expectOk(chain.send([base], [chain.authority]));
    assert.equal(chain.send([lockIx(wallet.address, jobId, 1n)], [chain.authority]).err, customError("alreadyExists"), "twice");
    assert.equal(chain.balance(vault), 50_000n);
  });

  test("settle pays the worker 75% and the treasury 25% of the charge and returns the rest, as splitPayout does", () => {
    for (const credits of [0, 1, 7, 33, 250]) {
      const charge = BigInt(credits) * 10_000n;
      const { wallet, vault, jobId } = locked(3_000_000n);
      const before = { worker: chain.balance(workerAccount), treasury: chain.balance(chain.treasury) };
      chain.expectOk(settle(wallet.address, jobId, charge));
      const split = splitPayout(credits, false);
      assert.equal(chain.balance(workerAccount) - before.worker, split.worker);
      assert.equal(chain.balance(chain.treasury) - before.treasury, split.treasury);
      assert.equal(chain.balance(vault), 3_000_000n - charge);
      const e = decodeEscrow(chain.data(escrowAddress(jobId).address)!);
      assert.equal(e.status, "settled");
      assert.equal(e.worker, worker.address);
      assert.deepEqual(e.proofHash, proofOf(worker, jobId).proofHash);
      assert.deepEqual([e.charge, e.workerPaid, e.treasuryPaid, e.returned], [charge, split.worker, split.treasury, 3_000_000n - charge]);
      assert.equal(e.workerStaked, false);
    }
  });

  test("settle needs the worker's proof of this job in the same transaction", () => {
    const { wallet, vault, jobId } = locked(500_000n);
    const impostor = generateKeypair();
    const own = proofOf(worker, jobId);
    const otherJob = proofOf(worker, newJobId());
    const foreign = proofOf(impostor, jobId);
    const tampered = proofOf(worker, jobId);
    const signed = tampered.verify.data as Uint8Array;
    signed[16 + 32] = signed[16 + 32]! ^ 1; // first signature byte
    const wrongHash = proofOf(worker, jobId, "another output");
    const cases: [string, Instruction[], string][] = [
      ["no proof", [settleIx(wallet.address, jobId, 10_000n, own.proofHash)], customError("proofMissing")],
      ["proof of another job", [otherJob.verify, settleIx(wallet.address, jobId, 10_000n, own.proofHash)], customError("proofMissing", 1)],
      ["signed by someone else, for this worker", [foreign.verify, settleIx(wallet.address, jobId, 10_000n, own.proofHash)], customError("proofMissing", 1)],
      ["proof of another output", [wrongHash.verify, settleIx(wallet.address, jobId, 10_000n, own.proofHash)], customError("proofMissing", 1)],
      ["a forged signature", [tampered.verify, settleIx(wallet.address, jobId, 10_000n, own.proofHash)], "InstructionError(0, Custom(2))"],
      ["another worker claiming it", [own.verify, settleIx(wallet.address, jobId, 10_000n, own.proofHash, impostor)], customError("proofMissing", 1)],
    ];
    for (const [name, ixs, err] of cases) assert.equal(chain.send(ixs, [chain.authority]).err, err, name);
    assert.equal(chain.balance(vault), 0n);
    assert.equal(decodeEscrow(chain.data(escrowAddress(jobId).address)!).status, "locked");
    chain.expectOk(chain.send([own.verify, settleIx(wallet.address, jobId, 10_000n, own.proofHash)], [chain.authority]));
  });

  test("settle refusals: charge beyond the lock, another signer, substituted accounts", () => {
    const { wallet, jobId } = locked(500_000n);
    const other = locked(500_000n);
    const p = proofOf(worker, jobId);
    const base = settleIx(wallet.address, jobId, 10_000n, p.proofHash);
    const stranger = generateKeypair();
    const cases: [string, Instruction, Keypair[], string][] = [
      ["charge beyond the lock", settleIx(wallet.address, jobId, 500_001n, p.proofHash), [chain.authority], customError("chargeExceedsLock", 1)],
      ["u64 max charge", settleIx(wallet.address, jobId, 2n ** 64n - 1n, p.proofHash), [chain.authority], customError("chargeExceedsLock", 1)],
      ["signed by another key", substitute(base, 1, stranger.address), [stranger], customError("wrongAddress", 1)],
      ["authority not signing", demote(base, 1), [], customError("missingSigner", 1)],
      ["another job's escrow", substitute(base, 2, escrowAddress(other.jobId).address), [chain.authority], customError("wrongAddress", 1)],
      ["another wallet's vault", substitute(base, 4, other.vault), [chain.authority], customError("wrongAddress", 1)],
      ["a substituted pool", substitute(base, 3, other.vault), [chain.authority], customError("wrongAddress", 1)],
      ["a substituted treasury", substitute(base, 6, other.own), [chain.authority], customError("wrongAddress", 1)],
      ["paying someone else's account", substitute(base, 5, other.own), [chain.authority], customError("wrongTokenOwner", 1)],
      ["paying in another mint", substitute(base, 5, chain.tokenAccount(worker.address, chain.stakeMint.address)), [chain.authority], customError("wrongMint", 1)],
      ["someone else's stake account", substitute(base, 7, stakeAddress(stranger.address).address), [chain.authority], customError("wrongAddress", 1)],
      ["a fake instructions sysvar", substitute(base, 9, other.own), [chain.authority], customError("wrongAddress", 1)],
      ["a config look-alike", substitute(base, 0, other.vault), [chain.authority], customError("wrongOwner", 1)],
      ["an escrow that is not ours", substitute(base, 2, escrowPoolAddress().address), [chain.authority], customError("wrongOwner", 1)],
    ];
    for (const [name, instruction, signers, err] of cases) assert.equal(chain.send([p.verify, instruction], signers).err, err, name);
    chain.expectOk(chain.send([p.verify, base], [chain.authority]));
  });

  test("each escrow closes once: settle twice, refund after settle, settle after refund are refused", () => {
    const a = locked(100_000n);
    chain.expectOk(settle(a.wallet.address, a.jobId, 20_000n));
    assert.equal(settle(a.wallet.address, a.jobId, 20_000n).err, customError("wrongStatus", 1), "settle twice");
    const refundA = ix.refund({ jobId: a.jobId, wallet: a.wallet.address, caller: chain.authority.address });
    assert.equal(chain.send([refundA], [chain.authority]).err, customError("wrongStatus"), "refund after settle");
    assert.equal(chain.balance(a.vault), 80_000n);

    const b = locked(100_000n);
    chain.expectOk(chain.send([ix.refund({ jobId: b.jobId, wallet: b.wallet.address, caller: chain.authority.address })], [chain.authority]));
    assert.equal(chain.balance(b.vault), 100_000n);
    assert.equal(decodeEscrow(chain.data(escrowAddress(b.jobId).address)!).status, "refunded");
    assert.equal(settle(b.wallet.address, b.jobId, 20_000n).err, customError("wrongStatus", 1), "settle after refund");
    const again = ix.refund({ jobId: b.jobId, wallet: b.wallet.address, caller: chain.authority.address });
    assert.equal(chain.send([again], [chain.authority]).err, customError("wrongStatus"), "refund twice");
    assert.equal(chain.balance(b.vault), 100_000n);
  });

  test("refund: the authority any time; anyone else only once the job is older than the 120 s timeout", () => {
    const { wallet, vault, jobId } = locked(100_000n);
    const byWallet = ix.refund({ jobId, wallet: wallet.address, caller: wallet.address });
    assert.equal(chain.send([byWallet], [wallet]).err, customError("tooEarly"), "at once");
    chain.advance(120n);
    assert.equal(chain.send([byWallet], [wallet]).err, customError("tooEarly"), "at exactly the timeout");
    const unsignedAuthority = ix.refund({ jobId, wallet: wallet.address, caller: chain.authority.address });
    assert.equal(chain.send([demote(unsignedAuthority, 6)]).err, customError("tooEarly"), "naming the authority is not signing as it");
    const stranger = generateKeypair();
    const other = chain.fundedWallet(0n);
    chain.advance(1n);
    assert.equal(chain.send([substitute(ix.refund({ jobId, wallet: wallet.address, caller: stranger.address }), 3, other.vault)], [stranger]).err,
      customError("wrongAddress"), "the lock goes back to its own vault only");
    chain.expectOk(chain.send([ix.refund({ jobId, wallet: wallet.address, caller: stranger.address })], [stranger]));
    assert.equal(chain.balance(vault), 100_000n);
    assert.equal(chain.balance(other.vault), 0n);
  });
});

test("amounts at the u64 boundary: the whole supply locks, and the split of u64 max is exact", async () => {
  const chain = await EscrowChain.open();
  const max = 2n ** 64n - 1n;
  const worker = generateKeypair();
  const workerAccount = chain.tokenAccount(worker.address, chain.usdcMint.address);
  const { wallet, vault } = chain.fundedWallet(max);
  const jobId = "job_u64max";
  chain.expectOk(chain.send([ix.lock({ serviceAuthority: chain.authority.address, payer: chain.payer.address, wallet: wallet.address, jobId, tier: 0, amount: max })], [chain.authority]));
  const p = proofOf(worker, jobId);
  chain.expectOk(chain.send([p.verify, ix.settle({
    serviceAuthority: chain.authority.address, jobId, wallet: wallet.address, worker: worker.address,
    workerTokenAccount: workerAccount, treasury: chain.treasury, charge: max, proofHash: p.proofHash,
  })], [chain.authority]));
  assert.equal(chain.balance(workerAccount), (max * 7500n) / 10000n);
  assert.equal(chain.balance(chain.treasury), max - (max * 7500n) / 10000n);
  assert.equal(chain.balance(vault), 0n);
});

test("lock and settle data decode back to what was sent", () => {
  const wallet = generateKeypair().address;
  const worker = generateKeypair().address;
  const proofHash = new Uint8Array(32).fill(9);
  const lock = ix.lock({ serviceAuthority: wallet, payer: wallet, wallet, jobId: "job_decode", tier: 3, amount: 123_456n });
  const decodedLock = decodeEscrowInstruction(lock.data as Uint8Array);
  assert.deepEqual(
    decodedLock.op === "lock" && [decodedLock.wallet, decodedLock.amount, decodedLock.tier, decodedLock.jobId],
    [wallet, 123_456n, 3, "job_decode"],
  );
  const settle = ix.settle({ serviceAuthority: wallet, jobId: "job_decode", wallet, worker, workerTokenAccount: wallet, treasury: wallet, charge: 2n ** 64n - 1n, proofHash });
  assert.deepEqual(decodeEscrowInstruction(settle.data as Uint8Array), { op: "settle", charge: 2n ** 64n - 1n, worker, proofHash });
  assert.throws(() => decodeEscrowInstruction((settle.data as Uint8Array).subarray(0, 72)));
  assert.deepEqual(decodeEscrowInstruction(Uint8Array.of(200)), { op: "other", code: 200 });
});
