/** Workers' stakes in the native token, on the real embedded chain. */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { openChain, type Chain } from "../../src/chain/chain.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import { MIN_ACTIVE_STAKE } from "../../src/core/payout.ts";
import { NATIVE_BASE_UNITS } from "../../src/core/units.ts";
import { stakePoolAddress } from "../../src/chain/escrow-program/index.ts";

let chain: Chain;
before(async () => {
  chain = await openChain();
});
after(() => chain.close());

test("a worker that stakes the minimum counts as staked; the tokens sit in the escrow program's stake pool", async () => {
  const worker = generateKeypair();
  assert.equal(await chain.isStaked(worker.address), false);
  await chain.grantNative({ to: worker.address, amount: 1_500n * NATIVE_BASE_UNITS });
  await chain.stake({ worker, amount: 600n * NATIVE_BASE_UNITS });
  assert.equal(await chain.isStaked(worker.address), false, "600 is below the minimum");
  const topUp = await chain.stake({ worker, amount: 400n * NATIVE_BASE_UNITS });
  assert.equal(await chain.stakeOf(worker.address), MIN_ACTIVE_STAKE);
  assert.equal(await chain.isStaked(worker.address), true);
  assert.equal(await chain.tokenBalance(chain.nativeTokenAccount(worker.address)), 500n * NATIVE_BASE_UNITS);

  const tx = await chain.readTransaction(topUp.signature);
  const staked = tx.instructions.find((i) => i.kind === "stake");
  assert.deepEqual([staked?.account, staked?.amount], [chain.stakeAccountAddress(worker.address), 400n * NATIVE_BASE_UNITS]);
  const moved = tx.innerInstructions.find((i) => i.kind === "transfer");
  assert.deepEqual([moved?.from, moved?.to, moved?.amount], [chain.nativeTokenAccount(worker.address), stakePoolAddress().address, 400n * NATIVE_BASE_UNITS]);
});

test("staking more than the worker holds fails on-chain and moves nothing", async () => {
  const worker = generateKeypair();
  await chain.grantNative({ to: worker.address, amount: 10n * NATIVE_BASE_UNITS });
  await assert.rejects(chain.stake({ worker, amount: 11n * NATIVE_BASE_UNITS }), (e: unknown) => chain.isRejection(e));
  assert.equal(await chain.stakeOf(worker.address), 0n);
});
