/**
 * Disputes and slashing, instruction by instruction on LiteSVM: a caller's dispute of a settled job
 * within the window, the arbitration's outcome (the treasury pays the charge back, or the job
 * stays settled), a worker's stake slashed to the treasury, and every refusal.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { before, describe, test } from "node:test";
import type { Address, Instruction } from "@solana/kit";
import { addressBytes } from "../../src/chain/addresses.ts";
import { generateKeypair, type Keypair } from "../../src/core/keys.ts";
import { MIN_ACTIVE_STAKE, splitPayout } from "../../src/core/payout.ts";
import {
  DEFAULT_RULES,
  Op,
  decodeDispute,
  decodeEscrow,
  decodeStake,
  disputeAddress,
  escrowAddress,
  escrowInstructions as ix,
  escrowPoolAddress,
  stakeAddress,
  stakePoolAddress,
  type OutcomeName,
} from "../../src/chain/escrow-program/index.ts";
import { EscrowChain, customError, demote, proofOf, substitute } from "./harness.ts";

const CHARGE = 200_000n;
const BOND = 50_000n;
const otherHash = (text = "the text the caller got") => new Uint8Array(createHash("sha256").update(text).digest());
let jobs = 0;

describe("disputes and slashing", () => {
  let chain: EscrowChain;
  let worker: Keypair;
  let workerAccount: Address;
  before(async () => {
    chain = await EscrowChain.open();
    worker = generateKeypair();
    workerAccount = chain.tokenAccount(worker.address, chain.usdcMint.address);
    chain.mint(chain.treasury, chain.usdcMint.address, 10_000_000n); // the treasury pays upheld disputes back
  });

  /** A job locked at 300,000 and settled at CHARGE: its wallet, vault and job id. */
  function settledJob() {
    const funded = chain.fundedWallet(1_000_000n);
    const jobId = `job_dispute${String(++jobs).padStart(6, "0")}`;
    chain.expectOk(chain.send([ix.lock({ serviceAuthority: chain.authority.address, payer: chain.payer.address, wallet: funded.wallet.address, jobId, tier: 1, amount: 300_000n })], [chain.authority]));
    const p = proofOf(worker, jobId);
    chain.expectOk(chain.send([p.verify, ix.settle({
      serviceAuthority: chain.authority.address, jobId, wallet: funded.wallet.address, worker: worker.address,
      workerTokenAccount: workerAccount, treasury: chain.treasury, charge: CHARGE, proofHash: p.proofHash,
    })], [chain.authority]));
    return { ...funded, jobId, proofHash: p.proofHash };
  }
  const disputeIx = (jobId: string, wallet: Address, callerHash = otherHash(), bond = BOND): Instruction =>
    ix.dispute({ serviceAuthority: chain.authority.address, payer: chain.payer.address, wallet, jobId, callerHash, bond });
  const resolveIx = (jobId: string, wallet: Address, outcome: OutcomeName): Instruction =>
    ix.resolve({ serviceAuthority: chain.authority.address, jobId, wallet, treasury: chain.treasury, treasuryOwner: chain.treasuryOwner.address, outcome });
  const escrowOf = (jobId: string) => decodeEscrow(chain.data(escrowAddress(jobId).address)!);
  const disputeOf = (jobId: string) => decodeDispute(chain.data(disputeAddress(jobId).address)!);

  test("a dispute within the window records the caller's hash, holds its bond in the pool and the escrow disputed", () => {
    const { wallet, vault, jobId } = settledJob();
    chain.advance(DEFAULT_RULES.disputeWindowSeconds); // the last second of the window
    const [vaultBefore, poolBefore] = [chain.balance(vault), chain.balance(escrowPoolAddress().address)];
    chain.expectOk(chain.send([disputeIx(jobId, wallet.address)], [chain.authority]));
    assert.equal(escrowOf(jobId).status, "disputed");
    assert.equal(vaultBefore - chain.balance(vault), BOND, "the bond left the vault");
    assert.equal(chain.balance(escrowPoolAddress().address) - poolBefore, BOND, "and waits in the pool");
    const d = disputeOf(jobId);
    assert.deepEqual([d.outcome, d.escrow, Buffer.from(d.callerHash).equals(otherHash()), d.openedAt, d.returned, d.bond], ["open", escrowAddress(jobId).address, true, chain.now(), 0n, BOND]);
    assert.equal(chain.send([disputeIx(jobId, wallet.address, otherHash("again"))], [chain.authority]).err, customError("wrongStatus"), "a second dispute");
  });

  test("dispute refusals: after the window, the worker's own hash, an unsettled job, another signer, a substituted record, vault or pool, a bond the vault cannot cover", () => {
    const late = settledJob();
    chain.advance(DEFAULT_RULES.disputeWindowSeconds + 1n);
    assert.equal(chain.send([disputeIx(late.jobId, late.wallet.address)], [chain.authority]).err, customError("windowClosed"));
    const same = settledJob();
    assert.equal(chain.send([disputeIx(same.jobId, same.wallet.address, same.proofHash)], [chain.authority]).err, customError("sameHash"));
    const { wallet } = chain.fundedWallet(100_000n);
    const lockedOnly = `job_disputelocked${++jobs}`;
    chain.expectOk(chain.send([ix.lock({ serviceAuthority: chain.authority.address, payer: chain.payer.address, wallet: wallet.address, jobId: lockedOnly, tier: 1, amount: 50_000n })], [chain.authority]));
    assert.equal(chain.send([disputeIx(lockedOnly, wallet.address)], [chain.authority]).err, customError("wrongStatus"));
    const fresh = settledJob();
    const mine = disputeIx(fresh.jobId, fresh.wallet.address);
    const impostor = generateKeypair();
    assert.equal(chain.send([substitute(mine, 1, impostor.address)], [impostor]).err, customError("wrongAddress"));
    assert.equal(chain.send([demote(mine, 1)]).err, customError("missingSigner"));
    assert.equal(chain.send([substitute(mine, 4, disputeAddress(same.jobId).address)], [chain.authority]).err, customError("wrongAddress"));
    assert.equal(chain.send([substitute(mine, 6, same.vault)], [chain.authority]).err, customError("wrongAddress"), "another wallet's vault pays no bond");
    assert.equal(chain.send([substitute(mine, 7, same.vault)], [chain.authority]).err, customError("wrongAddress"), "the bond goes to the pool only");
    const vaultHolds = chain.balance(fresh.vault);
    assert.equal(chain.send([disputeIx(fresh.jobId, fresh.wallet.address, otherHash(), vaultHolds + 1n)], [chain.authority]).err, customError("insufficientFunds"));
    assert.equal(escrowOf(fresh.jobId).status, "settled", "nothing changed");
    assert.equal(chain.balance(fresh.vault), vaultHolds);
  });

  for (const outcome of ["upheld", "inconclusive"] as const) {
    test(`${outcome}: the treasury pays the whole charge back into the caller's vault with its bond, and the escrow is reversed`, () => {
      const { wallet, vault, jobId } = settledJob();
      chain.expectOk(chain.send([disputeIx(jobId, wallet.address)], [chain.authority]));
      const [vaultBefore, treasuryBefore, workerBefore] = [chain.balance(vault), chain.balance(chain.treasury), chain.balance(workerAccount)];
      chain.expectOk(chain.send([resolveIx(jobId, wallet.address, outcome)], [chain.authority, chain.treasuryOwner]));
      assert.equal(chain.balance(vault) - vaultBefore, CHARGE + BOND, "the caller has the charge and the bond back");
      assert.equal(treasuryBefore - chain.balance(chain.treasury), CHARGE);
      assert.equal(chain.balance(workerAccount), workerBefore, "the worker's payout is not touched here; a slash answers for it");
      assert.equal(escrowOf(jobId).status, "reversed");
      const d = disputeOf(jobId);
      assert.deepEqual([d.outcome, d.returned, d.resolvedAt], [outcome, CHARGE, chain.now()]);
      assert.equal(chain.send([resolveIx(jobId, wallet.address, "rejected")], [chain.authority]).err, customError("wrongStatus"), "resolved once");
    });
  }

  test("rejected: the bond goes to the treasury and the escrow is settled again", () => {
    const { wallet, vault, jobId } = settledJob();
    chain.expectOk(chain.send([disputeIx(jobId, wallet.address)], [chain.authority]));
    const [vaultBefore, treasuryBefore] = [chain.balance(vault), chain.balance(chain.treasury)];
    chain.expectOk(chain.send([resolveIx(jobId, wallet.address, "rejected")], [chain.authority]));
    assert.equal(chain.balance(vault), vaultBefore);
    assert.equal(chain.balance(chain.treasury) - treasuryBefore, BOND, "the treasury ran the re-executions");
    assert.equal(escrowOf(jobId).status, "settled");
    assert.equal(disputeOf(jobId).outcome, "rejected");
  });

  test("resolve refusals: no treasury signature, another vault, treasury or pool, another job's dispute, an open escrow, a bad outcome", () => {
    const { wallet, jobId } = settledJob();
    const other = settledJob();
    chain.expectOk(chain.send([disputeIx(jobId, wallet.address)], [chain.authority]));
    chain.expectOk(chain.send([disputeIx(other.jobId, other.wallet.address)], [chain.authority]));
    const upheld = resolveIx(jobId, wallet.address, "upheld");
    assert.equal(chain.send([demote(upheld, 5)], [chain.authority]).err, customError("missingSigner"));
    assert.equal(chain.send([substitute(upheld, 6, other.vault)], [chain.authority, chain.treasuryOwner]).err, customError("wrongAddress"));
    assert.equal(chain.send([substitute(upheld, 4, workerAccount)], [chain.authority, chain.treasuryOwner]).err, customError("wrongAddress"));
    assert.equal(chain.send([substitute(upheld, 3, disputeAddress(other.jobId).address)], [chain.authority, chain.treasuryOwner]).err, customError("wrongAddress"));
    assert.equal(chain.send([substitute(upheld, 8, other.vault)], [chain.authority, chain.treasuryOwner]).err, customError("wrongAddress"), "bonds come back from the pool only");
    const rejected = resolveIx(jobId, wallet.address, "rejected");
    assert.equal(chain.send([substitute(rejected, 4, workerAccount)], [chain.authority]).err, customError("wrongAddress"), "a forfeited bond goes to the treasury only");
    assert.equal(chain.send([demote(upheld, 1)], [chain.treasuryOwner]).err, customError("missingSigner"));
    const bad = { ...upheld, data: Uint8Array.of(Op.resolve, 9) };
    assert.equal(chain.send([bad], [chain.authority, chain.treasuryOwner]).err, customError("invalidInstruction"));
    assert.equal(escrowOf(jobId).status, "disputed", "still waiting for its outcome");
  });

  function stakedWorker(amount: bigint): Keypair {
    const staker = generateKeypair();
    const source = chain.tokenAccount(staker.address, chain.stakeMint.address);
    chain.mint(source, chain.stakeMint.address, amount);
    chain.expectOk(chain.send([ix.stake({ worker: staker.address, payer: chain.payer.address, source, amount })], [staker]));
    return staker;
  }
  const slashIx = (w: Address, amount: bigint, destination = chain.tokenAccount(chain.treasuryOwner.address, chain.stakeMint.address)): Instruction =>
    ix.slash({ serviceAuthority: chain.authority.address, worker: w, destination, treasury: chain.treasury, amount });

  test("a slash moves stake to the treasury, active first, and the worker never earns the staked share again", () => {
    const staker = stakedWorker(2n * MIN_ACTIVE_STAKE);
    chain.expectOk(chain.send([ix.requestUnstake({ worker: staker.address, amount: MIN_ACTIVE_STAKE / 2n })], [staker]));
    const treasuryStake = chain.tokenAccount(chain.treasuryOwner.address, chain.stakeMint.address);
    const [pool, before] = [chain.balance(stakePoolAddress().address), chain.balance(treasuryStake)];
    const amount = (3n * MIN_ACTIVE_STAKE) / 2n + 10n; // all the active stake and 10 of the unstaking
    chain.expectOk(chain.send([slashIx(staker.address, amount)], [chain.authority]));
    assert.equal(chain.balance(treasuryStake) - before, amount);
    assert.equal(pool - chain.balance(stakePoolAddress().address), amount);
    const s = decodeStake(chain.data(stakeAddress(staker.address).address)!);
    assert.deepEqual([s.active, s.unstaking, s.slashedTotal, s.slashed, s.lastSlashedAt], [0n, MIN_ACTIVE_STAKE / 2n - 10n, amount, true, chain.now()]);

    const source = chain.tokenAccount(staker.address, chain.stakeMint.address);
    chain.mint(source, chain.stakeMint.address, MIN_ACTIVE_STAKE);
    chain.expectOk(chain.send([ix.stake({ worker: staker.address, payer: chain.payer.address, source, amount: MIN_ACTIVE_STAKE })], [staker]));
    const { wallet } = chain.fundedWallet(CHARGE);
    const jobId = `job_slashed${++jobs}`;
    chain.expectOk(chain.send([ix.lock({ serviceAuthority: chain.authority.address, payer: chain.payer.address, wallet: wallet.address, jobId, tier: 1, amount: CHARGE })], [chain.authority]));
    const account = chain.tokenAccount(staker.address, chain.usdcMint.address);
    const p = proofOf(staker, jobId);
    chain.expectOk(chain.send([p.verify, ix.settle({
      serviceAuthority: chain.authority.address, jobId, wallet: wallet.address, worker: staker.address,
      workerTokenAccount: account, treasury: chain.treasury, charge: CHARGE, proofHash: p.proofHash,
    })], [chain.authority]));
    assert.equal(chain.balance(account), splitPayout(20, false).worker, "75%, though the minimum is staked again");
  });

  test("slash refusals: beyond the stake, zero, another signer, a destination outside the treasury, a substituted pool", () => {
    const staker = stakedWorker(MIN_ACTIVE_STAKE);
    assert.equal(chain.send([slashIx(staker.address, MIN_ACTIVE_STAKE + 1n)], [chain.authority]).err, customError("insufficientFunds"));
    assert.equal(chain.send([slashIx(staker.address, 0n)], [chain.authority]).err, customError("invalidAmount"));
    const impostor = generateKeypair();
    assert.equal(chain.send([substitute(slashIx(staker.address, 1n), 1, impostor.address)], [impostor]).err, customError("wrongAddress"));
    const stakersOwn = chain.tokenAccount(staker.address, chain.stakeMint.address);
    assert.equal(chain.send([slashIx(staker.address, 1n, stakersOwn)], [chain.authority]).err, customError("wrongTokenOwner"));
    assert.equal(chain.send([substitute(slashIx(staker.address, 1n), 3, stakersOwn)], [chain.authority]).err, customError("wrongAddress"));
    assert.equal(decodeStake(chain.data(stakeAddress(staker.address).address)!).active, MIN_ACTIVE_STAKE, "nothing moved");
  });
});

describe("closing escrow records", () => {
  test("a settled or refunded escrow is deleted after its dispute window, its rent to the destination; not before, not while disputed, not by another signer", async () => {
    const chain = await EscrowChain.open();
    const worker = generateKeypair();
    const workerAccount = chain.tokenAccount(worker.address, chain.usdcMint.address);
    const { wallet } = chain.fundedWallet(1_000_000n);
    const lock = (jobId: string) => chain.expectOk(chain.send([ix.lock({ serviceAuthority: chain.authority.address, payer: chain.payer.address, wallet: wallet.address, jobId, tier: 1, amount: 100_000n })], [chain.authority]));
    const close = (jobId: string, signer = chain.authority) => chain.send([ix.closeEscrow({ serviceAuthority: signer.address, jobId, destination: chain.payer.address })], [signer]);
    const settled = "job_close_settled";
    lock(settled);
    const p = proofOf(worker, settled);
    chain.expectOk(chain.send([p.verify, ix.settle({ serviceAuthority: chain.authority.address, jobId: settled, wallet: wallet.address, worker: worker.address, workerTokenAccount: workerAccount, treasury: chain.treasury, charge: 50_000n, proofHash: p.proofHash })], [chain.authority]));
    const refunded = "job_close_refunded";
    lock(refunded);
    chain.expectOk(chain.send([ix.refund({ jobId: refunded, wallet: wallet.address, caller: chain.authority.address })], [chain.authority]));
    const open = "job_close_open";
    lock(open);
    const disputed = "job_close_disputed";
    lock(disputed);
    const q = proofOf(worker, disputed);
    chain.expectOk(chain.send([q.verify, ix.settle({ serviceAuthority: chain.authority.address, jobId: disputed, wallet: wallet.address, worker: worker.address, workerTokenAccount: workerAccount, treasury: chain.treasury, charge: 50_000n, proofHash: q.proofHash })], [chain.authority]));
    chain.expectOk(chain.send([ix.dispute({ serviceAuthority: chain.authority.address, payer: chain.payer.address, wallet: wallet.address, jobId: disputed, callerHash: new Uint8Array(32).fill(9), bond: 0n })], [chain.authority]));

    assert.equal(close(settled).err, customError("windowOpen"), "a caller may still dispute it");
    chain.advance(DEFAULT_RULES.disputeWindowSeconds + 1n);
    assert.equal(close(open).err, customError("wrongStatus"), "a locked escrow holds credits");
    assert.equal(close(disputed).err, customError("wrongStatus"), "a disputed one waits for its outcome");
    const impostor = generateKeypair();
    assert.equal(close(settled, impostor).err, customError("wrongAddress"));
    const rent = chain.svm.getBalance(addressBytes(escrowAddress(settled).address))!;
    const before = chain.svm.getBalance(addressBytes(chain.payer.address))!;
    chain.expectOk(close(settled));
    chain.expectOk(close(refunded));
    assert.equal(chain.data(escrowAddress(settled).address), null, "deleted");
    assert.equal(chain.data(escrowAddress(refunded).address), null);
    assert.ok(chain.svm.getBalance(addressBytes(chain.payer.address))! > before + rent, "both rents came back (less the fees)");
  });
});
