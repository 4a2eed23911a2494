/**
 * `svc worker stake` and `svc worker unstake` as real processes against the chain's JSON-RPC
 * server: the worker signs and pays for its own stake transactions, and sees its stake, the
 * cooldown and a slash.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, test } from "node:test";
import type { Address } from "@solana/kit";
import { openChain, startChainRpc, type Chain, type ChainRpcServer } from "../../src/chain/index.ts";
import { loadOrCreateKeypair } from "../../src/core/keys.ts";
import { MIN_ACTIVE_STAKE } from "../../src/core/payout.ts";
import { NATIVE_BASE_UNITS } from "../../src/core/units.ts";
import { tempDir } from "../support/service.ts";
import { startSvc } from "./svc-process.ts";

let chain: Chain;
let server: ChainRpcServer;
const dir = await tempDir("svc-stake-");
const keypair = join(dir.path, "worker.json");

before(async () => {
  chain = await openChain({ slotMs: 100 });
  server = await startChainRpc({ chain, port: 0, faucet: true });
});
after(async () => {
  await server.close();
  await chain.close();
  await dir.remove();
});

async function svc(...args: string[]): Promise<{ code: number | null; out: string }> {
  const run = startSvc(["worker", ...args, "--keypair", keypair, "--rpc", server.url]);
  const { code } = await run.exited();
  return { code, out: run.stdout() + run.stderr() };
}

test("stake, see it, unstake part: the worker signs and pays; the cooldown is shown; a slash is shown", async () => {
  const worker = await loadOrCreateKeypair(dir.path, "worker");
  await chain.backend.requestAirdrop(worker.address as Address, 1_000_000_000n);
  await chain.grantNative({ to: worker.address, amount: 1_500n * NATIVE_BASE_UNITS });

  const staked = await svc("stake", "1000");
  assert.equal(staked.code, 0, staked.out);
  assert.match(staked.out, /^Staked 1000: \w{80,90}$/m);
  assert.match(staked.out, /active stake: {3}1000 \(the staked share needs 1000; earned\)/);
  assert.equal(await chain.stakeOf(worker.address), MIN_ACTIVE_STAKE);

  const unstaking = await svc("unstake", "250.5");
  assert.equal(unstaking.code, 0, unstaking.out);
  assert.match(unstaking.out, /active stake: {3}749\.5 .*not earned/);
  assert.match(unstaking.out, /unstaking: {6}250\.5, withdrawable from 20\d\d-/);
  const early = await svc("unstake", "--withdraw");
  assert.equal(early.code, 1, "the cooldown has not passed");
  assert.match(early.out, /the chain refused the transaction: .*#16.*\(tooEarly\)/);

  const prepared = await chain.prepareSlash({ worker: worker.address, amount: 10n * NATIVE_BASE_UNITS });
  await chain.send(prepared.wire);
  const shown = await svc("stake");
  assert.equal(shown.code, 0, shown.out);
  assert.match(shown.out, /SLASHED: {8}10 taken for fraudulent proofs/);
});

test("bad input is refused before anything is sent", async () => {
  for (const args of [["stake", "-5"], ["stake", "1.0000000001"], ["unstake"], ["stake", "0"]]) {
    const run = await svc(...args);
    assert.equal(run.code, 2, `${args.join(" ")}: ${run.out}`);
  }
});
