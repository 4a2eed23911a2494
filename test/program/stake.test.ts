/**
 * Worker stakes: staking into the program's pool, the 85% share it earns at settlement, and the
 * two-step unstake whose cooldown outlasts the dispute and arbitration windows.
 */
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import type { Address } from "@solana/kit";
import { generateKeypair, type Keypair } from "../../src/core/keys.ts";
import { MIN_ACTIVE_STAKE, splitPayout } from "../../src/core/payout.ts";
import {
  DEFAULT_RULES,
  decodeEscrow,
  decodeStake,
  escrowAddress,
  escrowInstructions as ix,
  stakeAddress,
  stakePoolAddress,
} from "../../src/chain/escrow-program/index.ts";
import { EscrowChain, customError, proofOf, substitute } from "./harness.ts";

describe("worker stakes", () => {
  let chain: EscrowChain;
  before(async () => {
    chain = await EscrowChain.open();
  });

  function stakedWorker(amount: bigint): { worker: Keypair; source: Address } {
    const worker = generateKeypair();
    const source = chain.tokenAccount(worker.address, chain.stakeMint.address);
    chain.mint(source, chain.stakeMint.address, amount);
    chain.expectOk(chain.send([ix.stake({ worker: worker.address, payer: chain.payer.address, source, amount })], [worker]));
    return { worker, source };
  }

  /** Locks and settles one job for `worker`, returning what the worker was paid. */
  function settleFor(worker: Keypair, charge: bigint): bigint {
    const { wallet } = chain.fundedWallet(charge);
    const jobId = `job_stake_${worker.address.slice(0, 10)}_${chain.now()}`;
    chain.expectOk(chain.send([ix.lock({ serviceAuthority: chain.authority.address, payer: chain.payer.address, wallet: wallet.address, jobId, tier: 1, amount: charge })], [chain.authority]));
    const account = chain.tokenAccount(worker.address, chain.usdcMint.address);
    const before = chain.balance(account);
    const p = proofOf(worker, jobId);
    chain.expectOk(chain.send([p.verify, ix.settle({
      serviceAuthority: chain.authority.address, jobId, wallet: wallet.address, worker: worker.address,
      workerTokenAccount: account, treasury: chain.treasury, charge, proofHash: p.proofHash,
    })], [chain.authority]));
    assert.equal(decodeEscrow(chain.data(escrowAddress(jobId).address)!).charge, charge);
    chain.advance(1n);
    return chain.balance(account) - before;
  }

  test("a stake moves tokens into the pool and counts at settlement: 85% at the minimum, 75% below it", () => {
    const pool = chain.balance(stakePoolAddress().address);
    const { worker, source } = stakedWorker(MIN_ACTIVE_STAKE);
    assert.equal(chain.balance(source), 0n);
    assert.equal(chain.balance(stakePoolAddress().address), pool + MIN_ACTIVE_STAKE);
    const record = decodeStake(chain.data(stakeAddress(worker.address).address)!);
    assert.deepEqual([record.worker, record.active, record.unstaking], [worker.address, MIN_ACTIVE_STAKE, 0n]);
    assert.equal(settleFor(worker, 330_000n), splitPayout(33, true).worker);

    const small = stakedWorker(MIN_ACTIVE_STAKE - 1n).worker;
    assert.equal(settleFor(small, 330_000n), splitPayout(33, false).worker);
    assert.equal(settleFor(generateKeypair(), 330_000n), splitPayout(33, false).worker, "no stake account at all");
  });

  test("unstaking: the request stops the stake counting at once; the tokens leave only after the cooldown", () => {
    const { worker, source } = stakedWorker(MIN_ACTIVE_STAKE * 2n);
    const record = stakeAddress(worker.address).address;
    chain.expectOk(chain.send([ix.requestUnstake({ worker: worker.address, amount: MIN_ACTIVE_STAKE + 1n })], [worker]));
    assert.equal(settleFor(worker, 100_000n), splitPayout(10, false).worker, "below the minimum once requested");
    const withdraw = ix.withdrawStake({ worker: worker.address, destination: source });
    assert.equal(chain.send([withdraw], [worker]).err, customError("tooEarly"));
    assert.ok(DEFAULT_RULES.unstakeCooldownSeconds > 60n + 72n * 3600n);
    chain.advance(DEFAULT_RULES.unstakeCooldownSeconds - 10n);
    assert.equal(chain.send([withdraw], [worker]).err, customError("tooEarly"), "just before the cooldown ends");
    chain.advance(10n);
    chain.expectOk(chain.send([withdraw], [worker]));
    assert.equal(chain.balance(source), MIN_ACTIVE_STAKE + 1n);
    const after = decodeStake(chain.data(record)!);
    assert.deepEqual([after.active, after.unstaking], [MIN_ACTIVE_STAKE - 1n, 0n]);
    assert.equal(chain.send([withdraw], [worker]).err, customError("invalidAmount"), "nothing left to withdraw");
  });

  test("refusals: beyond the stake, another worker's record or account, wrong mint, substituted pool", () => {
    const { worker, source } = stakedWorker(1_000n);
    const thief = generateKeypair();
    const thiefSource = chain.tokenAccount(thief.address, chain.stakeMint.address);
    chain.mint(thiefSource, chain.stakeMint.address, 10n);
    const cases: [string, ReturnType<typeof chain.send>, string][] = [
      ["unstake beyond the stake", chain.send([ix.requestUnstake({ worker: worker.address, amount: 1_001n })], [worker]), customError("insufficientFunds")],
      ["unstake zero", chain.send([ix.requestUnstake({ worker: worker.address, amount: 0n })], [worker]), customError("invalidAmount")],
      ["unstake another worker's stake", chain.send([substitute(ix.requestUnstake({ worker: thief.address, amount: 1n }), 2, stakeAddress(worker.address).address)], [thief]), customError("wrongAddress")],
      ["withdraw another worker's stake", chain.send([substitute(ix.withdrawStake({ worker: thief.address, destination: thiefSource }), 2, stakeAddress(worker.address).address)], [thief]), customError("wrongAddress")],
      ["stake from another mint", chain.send([ix.stake({ worker: worker.address, payer: chain.payer.address, source: chain.tokenAccount(worker.address, chain.usdcMint.address), amount: 1n })], [worker]), customError("wrongMint")],
      ["stake from someone else's account", chain.send([ix.stake({ worker: worker.address, payer: chain.payer.address, source: thiefSource, amount: 1n })], [worker]), customError("wrongTokenOwner")],
      ["stake into a substituted pool", chain.send([substitute(ix.stake({ worker: thief.address, payer: chain.payer.address, source: thiefSource, amount: 1n }), 5, source)], [thief]), customError("wrongAddress")],
      ["stake beyond the balance", chain.send([ix.stake({ worker: thief.address, payer: chain.payer.address, source: thiefSource, amount: 11n })], [thief]), customError("insufficientFunds")],
      ["stake into another worker's record", chain.send([substitute(ix.stake({ worker: thief.address, payer: chain.payer.address, source: thiefSource, amount: 1n }), 3, stakeAddress(worker.address).address)], [thief]), customError("wrongAddress")],
    ];
    for (const [name, sent, err] of cases) assert.equal(sent.err, err, name);
    assert.equal(decodeStake(chain.data(stakeAddress(worker.address).address)!).active, 1_000n);
    assert.equal(chain.balance(thiefSource), 10n);
  });
});
