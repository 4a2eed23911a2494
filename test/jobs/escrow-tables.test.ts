/**
 * EscrowTables on the embedded chain with the real program: locks prepared at once for one wallet
 * (admission groups and lanes run side by side) take each slot once, fill a table and go on in the
 * next, and land in the order their slots were taken; a lock discarded as the latest of its table
 * gives its slots back.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { openChain, type Chain } from "../../src/chain/index.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import { newId } from "../../src/core/ids.ts";
import { EscrowTables, MIN_TABLE_CAPACITY, type TableLock } from "../../src/jobs/escrow-tables.ts";
import type { Db } from "../../src/store/index.ts";
import { migratedTestDb, tempDir } from "../support/service.ts";

const dir = await tempDir("svc-escrow-tables-");
let chain: Chain;
let db: Db;
const wallet = generateKeypair().address;
before(async () => {
  chain = await openChain({ dataDir: dir.path });
  db = await migratedTestDb();
  await chain.send((await chain.prepareDeposit({ wallet, credits: 1_000 })).wire);
});
after(async () => {
  await chain.close();
  await db.close();
  await dir.remove();
});

const jobs = (n: number) => Array.from({ length: n }, () => ({ jobId: newId("job"), tier: "lite" as const, wallet, credits: 2 }));

test("locks prepared side by side take each slot once, across two tables, and all land in turn", async () => {
  const tables = new EscrowTables(chain, db, async () => undefined);
  const prepared = (await Promise.all([jobs(3), jobs(3), jobs(3), jobs(3)].map((some) => tables.prepareLocks(db, some)))).flat();
  const places = prepared.map((lock) => `${lock.params.tableId}:${lock.params.tableSlot}`);
  assert.equal(new Set(places).size, 12, "no slot taken twice");
  const byTable = new Map<number, TableLock[]>();
  for (const lock of prepared) byTable.set(lock.params.tableId, [...(byTable.get(lock.params.tableId) ?? []), lock]);
  assert.equal(byTable.size, 2);
  const [first, second] = [...byTable.values()];
  assert.equal(first!.length, MIN_TABLE_CAPACITY, "the first table filled");
  const sent = await Promise.all(prepared.map((lock) => tables.sendInTurn(lock, async () => ({ action: lock, ...(await chain.send(lock.wire)) }))));
  assert.equal(sent.length, 12);
  for (const [tableId, locks] of byTable) {
    const record = await chain.tableRecord(wallet, BigInt(tableId));
    assert.equal(record!.slots.length, locks.length, `table ${tableId} holds its locks`);
  }
  assert.equal(second!.length, 12 - MIN_TABLE_CAPACITY);
});

test("a discarded latest lock gives its slots back: the next lock takes them", async () => {
  const tables = new EscrowTables(chain, db, async () => undefined);
  const kept = await tables.prepareLocks(db, jobs(2));
  const dropped = await tables.prepareLocks(db, jobs(3));
  tables.discard(dropped);
  const next = await tables.prepareLocks(db, jobs(1));
  assert.deepEqual(next.map((lock: TableLock) => lock.params.tableSlot), [2]);
  for (const lock of [...kept, ...next]) await tables.sendInTurn(lock, async () => ({ action: lock, ...(await chain.send(lock.wire)) }));
  assert.equal((await chain.tableRecord(wallet, BigInt(kept[0]!.params.tableId)))!.slots.length, 3);
});
