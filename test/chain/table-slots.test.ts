/**
 * A table slot's dispute and resolution through the service's Chain, on the embedded chain: one
 * settled slot of a locked table disputed with a bond, read back with its table in one read of
 * several tables, then upheld, the treasury paying the slot's charge and the bond back to the vault.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { openChain, type Chain, type TableSettlementJob } from "../../src/chain/index.ts";
import { addressBytes } from "../../src/chain/addresses.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import { newId } from "../../src/core/ids.ts";
import { outputHash } from "../../src/core/proof.ts";
import { settlementMessageOf } from "../../src/core/settlement-proof.ts";
import { creditsToBaseUnits } from "../../src/core/units.ts";

let chain: Chain;
before(async () => {
  chain = await openChain();
});
after(() => chain.close());

test("a settled table slot is disputed, read with other tables, and upheld back into the vault", async () => {
  const wallet = generateKeypair().address;
  await chain.deposit({ wallet, credits: 100 });
  const locked = Array.from({ length: 3 }, () => ({ jobId: newId("job"), tier: "lite" as const, credits: 5 }));
  await chain.send((await chain.prepareTableLock({ wallet, tableId: 1n, capacity: 8, firstSlot: 0, jobs: locked })).wire);
  // The worker signs its settlement of slot 1, as tables.test.ts does.
  const worker = generateKeypair();
  const jobs: TableSettlementJob[] = [{ jobId: locked[1]!.jobId, slot: 1, creditsCharged: 3, proofHash: outputHash("the worker's output"), promptTokens: 4, completionTokens: 2 }];
  const leaves = jobs.map((job) => ({ ...job, outputHash: Buffer.from(job.proofHash.slice(7), "hex"), charge: creditsToBaseUnits(job.creditsCharged) }));
  const signature = worker.sign(settlementMessageOf(addressBytes(chain.tableAddressFor(wallet, 1n)), leaves));
  await chain.send((await chain.prepareTableSettlement({ wallet, tableId: 1n, worker: worker.address, signature, jobs })).wire);

  const vault = await chain.creditBalance(wallet);
  const bond = creditsToBaseUnits(1);
  await chain.send((await chain.prepareSlotDispute({ wallet, tableId: 1n, slot: 1, callerHash: outputHash("what the caller got"), bond })).wire);
  assert.equal(await chain.creditBalance(wallet), vault - bond);
  const [disputed, missing] = await chain.tableRecords([{ wallet, tableId: 1n }, { wallet, tableId: 2n }]);
  assert.deepEqual(disputed!.slots.map((s) => [s.status, s.amount]), [["locked", creditsToBaseUnits(5)], ["disputed", creditsToBaseUnits(3)], ["locked", creditsToBaseUnits(5)]]);
  assert.equal(disputed!.open, 3, "the disputed slot keeps its table open with the locked ones");
  assert.equal(missing, null);

  await chain.grantUsdc({ to: chain.treasuryOwner, amount: creditsToBaseUnits(10) }); // the treasury pays the charge back
  const treasury = await chain.tokenBalance(chain.treasuryAddress);
  await chain.send((await chain.prepareSlotResolve({ wallet, tableId: 1n, slot: 1, outcome: "upheld" })).wire);
  assert.equal(await chain.creditBalance(wallet), vault + creditsToBaseUnits(3), "the charge and the bond back");
  assert.equal(await chain.tokenBalance(chain.treasuryAddress), treasury - creditsToBaseUnits(3));
  const resolved = (await chain.tableRecord(wallet, 1n))!;
  assert.deepEqual(resolved.slots.map((s) => s.status), ["locked", "reversed", "locked"]);
  assert.equal(resolved.open, 2);
});
