/**
 * Escrow tables through the service's Chain: many jobs of a wallet locked in one transaction,
 * one worker's jobs settled under its one signature of their settlement message, slots refunded,
 * each read back from the chain (the table's slots, the token transfers the program made). On the
 * embedded chain and on a cluster over RPC, as the other chain tests.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  MAX_TABLE_LOCKS_PER_TRANSACTION,
  MAX_TABLE_SETTLEMENTS_PER_TRANSACTION,
  openChain,
  type Chain,
  type TableSettlementJob,
} from "../../src/chain/index.ts";
import { addressBytes } from "../../src/chain/addresses.ts";
import { generateKeypair, type Keypair } from "../../src/core/keys.ts";
import { newId } from "../../src/core/ids.ts";
import { outputHash } from "../../src/core/proof.ts";
import { settlementMessageOf } from "../../src/core/settlement-proof.ts";
import { creditsToBaseUnits } from "../../src/core/units.ts";
import { splitPayout } from "../../src/core/payout.ts";
import { startChainServer } from "../support/chain-server.ts";

const CHAINS: [string, () => Promise<{ chain: Chain; close(): Promise<void> }>][] = [
  // A priority fee's instruction takes room: the most jobs a transaction holds are counted with one.
  ["the embedded chain, with a priority fee", async () => {
    const chain = await openChain({ priorityFeeMicroLamports: 1n });
    return { chain, close: () => chain.close() };
  }],
  ["a cluster over RPC", async () => {
    const server = await startChainServer();
    const chain = await openChain({ chainUrl: server.url, keysDir: server.keysDir });
    return { chain, close: async () => (await chain.close(), await server.close()) };
  }],
];

/** The worker's signature over the settlement of `jobs` of the wallet's table. */
function signed(chain: Chain, worker: Keypair, wallet: string, tableId: bigint, jobs: TableSettlementJob[]): Uint8Array {
  const table = addressBytes(chain.tableAddressFor(wallet, tableId));
  const leaves = jobs.map((job) => ({ ...job, outputHash: Buffer.from(job.proofHash.slice(7), "hex"), charge: creditsToBaseUnits(job.creditsCharged) }));
  return worker.sign(settlementMessageOf(table, leaves));
}

for (const [name, open] of CHAINS) describe(`escrow tables on ${name}`, () => {
  let chain: Chain;
  let close: () => Promise<void>;
  before(async () => {
    ({ chain, close } = await open());
  });
  after(() => close());

  async function lockedTable(count: number, credits = 5) {
    const wallet = generateKeypair().address;
    await chain.deposit({ wallet, credits: 1_000 });
    const jobs = Array.from({ length: count }, () => ({ jobId: newId("job"), tier: "lite" as const, credits }));
    const prepared = await chain.prepareTableLock({ wallet, tableId: 1n, capacity: 128, firstSlot: 0, jobs });
    await chain.send(prepared.wire);
    return { wallet, jobs, table: prepared.tableAddress };
  }

  test(`${MAX_TABLE_LOCKS_PER_TRANSACTION} jobs lock in one transaction into one table's slots`, async () => {
    const { wallet, table } = await lockedTable(MAX_TABLE_LOCKS_PER_TRANSACTION);
    assert.equal(await chain.creditBalance(wallet), creditsToBaseUnits(1_000 - 5 * MAX_TABLE_LOCKS_PER_TRANSACTION));
    const record = (await chain.tableRecord(wallet, 1n))!;
    assert.equal(table, chain.tableAddressFor(wallet, 1n));
    assert.equal(record.slots.length, MAX_TABLE_LOCKS_PER_TRANSACTION);
    assert.ok(record.slots.every((slot) => slot.status === "locked" && slot.amount === creditsToBaseUnits(5)));
    await assert.rejects(chain.prepareTableLock({ wallet, tableId: 1n, capacity: 128, firstSlot: MAX_TABLE_LOCKS_PER_TRANSACTION, jobs: Array.from({ length: MAX_TABLE_LOCKS_PER_TRANSACTION + 1 }, () => ({ jobId: newId("job"), tier: "lite" as const, credits: 1 })) }), RangeError);
  });

  test(`${MAX_TABLE_SETTLEMENTS_PER_TRANSACTION} of one worker's jobs settle under its one signature, each paid its own split`, async () => {
    const first = await lockedTable(MAX_TABLE_LOCKS_PER_TRANSACTION);
    const more = Array.from({ length: MAX_TABLE_SETTLEMENTS_PER_TRANSACTION - MAX_TABLE_LOCKS_PER_TRANSACTION }, () => ({ jobId: newId("job"), tier: "lite" as const, credits: 5 }));
    await chain.send((await chain.prepareTableLock({ wallet: first.wallet, tableId: 1n, capacity: 128, firstSlot: first.jobs.length, jobs: more })).wire);
    const worker = generateKeypair();
    const jobs = [...first.jobs, ...more].map((job, slot): TableSettlementJob => ({ jobId: job.jobId, slot, creditsCharged: 1 + (slot % 5), proofHash: outputHash(`output ${slot}`), promptTokens: 10, completionTokens: slot }));
    const vault = await chain.creditBalance(first.wallet);
    const settlement = await chain.prepareTableSettlement({ wallet: first.wallet, tableId: 1n, worker: worker.address, signature: signed(chain, worker, first.wallet, 1n, jobs), jobs });
    assert.ok(settlement.wire.length <= 1232);
    await chain.send(settlement.wire);
    const charged = jobs.reduce((n, job) => n + job.creditsCharged, 0);
    assert.equal(await chain.creditBalance(first.wallet), vault + creditsToBaseUnits(5 * jobs.length - charged));
    const workerPaid = jobs.reduce((n, job) => n + splitPayout(job.creditsCharged, false).worker, 0n);
    assert.equal(await chain.tokenBalance(chain.workerTokenAccount(worker.address)), workerPaid);
    const record = (await chain.tableRecord(first.wallet, 1n))!;
    assert.deepEqual(record.slots.map((s) => [s.status, s.amount]), jobs.map((job) => ["settled", creditsToBaseUnits(job.creditsCharged)]));
    const tx = await chain.readTransaction(settlement.signature);
    assert.equal(tx.innerInstructions.filter((i) => i.kind === "transfer").length, 3, "three transfers for all of them");
  });

  test("a signature over other outputs or charges is refused before anything is sent", async () => {
    const { wallet, jobs: locked } = await lockedTable(2);
    const worker = generateKeypair();
    const jobs = locked.map((job, slot): TableSettlementJob => ({ jobId: job.jobId, slot, creditsCharged: 2, proofHash: outputHash(`output ${slot}`), promptTokens: 1, completionTokens: 1 }));
    const otherOutput = signed(chain, worker, wallet, 1n, [{ ...jobs[0]!, proofHash: outputHash("something else") }, jobs[1]!]);
    await assert.rejects(chain.prepareTableSettlement({ wallet, tableId: 1n, worker: worker.address, signature: otherOutput, jobs }), /does not cover/);
    const otherCharge = signed(chain, worker, wallet, 1n, [{ ...jobs[0]!, creditsCharged: 1 }, jobs[1]!]);
    await assert.rejects(chain.prepareTableSettlement({ wallet, tableId: 1n, worker: worker.address, signature: otherCharge, jobs }), /does not cover/);
    const byAnother = signed(chain, generateKeypair(), wallet, 1n, jobs);
    await assert.rejects(chain.prepareTableSettlement({ wallet, tableId: 1n, worker: worker.address, signature: byAnother, jobs }), /does not cover/);
  });

  test("the authority refunds some slots while the table's others settle", async () => {
    const { wallet, jobs: locked } = await lockedTable(3);
    const vault = await chain.creditBalance(wallet);
    await chain.send((await chain.prepareSlotRefunds({ wallet, tableId: 1n, slots: [0, 2] })).wire);
    assert.equal(await chain.creditBalance(wallet), vault + creditsToBaseUnits(10));
    const worker = generateKeypair();
    const jobs: TableSettlementJob[] = [{ jobId: locked[1]!.jobId, slot: 1, creditsCharged: 4, proofHash: outputHash("x"), promptTokens: 1, completionTokens: 1 }];
    await chain.send((await chain.prepareTableSettlement({ wallet, tableId: 1n, worker: worker.address, signature: signed(chain, worker, wallet, 1n, jobs), jobs })).wire);
    const record = (await chain.tableRecord(wallet, 1n))!;
    assert.deepEqual(record.slots.map((s) => s.status), ["refunded", "settled", "refunded"]);
    assert.equal(record.open, 0);
    await assert.rejects(chain.send((await chain.prepareSlotRefunds({ wallet, tableId: 1n, slots: [1] })).wire), (e: unknown) => chain.isRejection(e));
  });
});
