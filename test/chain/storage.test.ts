/** The on-disk formats: log records, torn and corrupt frames, checkpoints past LiteSVM's 4 MiB snapshot limit. */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { readCheckpoint, writeCheckpoint, type AccountSnapshot } from "../../src/chain/checkpoint.ts";
import { TxLog, encodeRecord, type LogRecord } from "../../src/chain/txlog.ts";

function tempDir(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), "svc-chain-storage-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const records: LogRecord[] = [
  { kind: "tx", slot: 7n, ok: true, logs: ["Program log: a", "Program log: ünïcode"], wire: randomBytes(600) },
  { kind: "tx", slot: 8n, ok: false, err: "InstructionError(0, Custom(2))", logs: [], wire: randomBytes(900) },
  { kind: "airdrop", slot: 9n, address: randomBytes(32), lamports: 10n ** 12n },
];

test("log records read back as written, in order, after a reopen", async (t) => {
  const path = join(tempDir(t), "txlog");
  const log = TxLog.open(path);
  const offsets = records.map((r) => log.append(encodeRecord(r)));
  await log.durable();
  log.close();

  const reopened = TxLog.open(path);
  t.after(() => reopened.close());
  const normalize = (r: LogRecord) => (r.kind === "tx" ? { ...r, wire: Buffer.from(r.wire) } : { ...r, address: Buffer.from(r.address) });
  assert.deepEqual([...reopened.scan(0)].map((e) => [e.offset, normalize(e.record)]), records.map((r, i) => [offsets[i], normalize(r)]));
  assert.deepEqual(normalize(reopened.read(offsets[1]!)), normalize(records[1]!));
});

test("scanning stops at a torn or corrupted frame and reports where the good records end", (t) => {
  const path = join(tempDir(t), "txlog");
  const log = TxLog.open(path);
  for (const r of records) log.append(encodeRecord(r));
  const good = log.size;
  log.close();

  appendFileSync(path, encodeRecord(records[0]!).subarray(0, 50)); // a write cut short
  const torn = TxLog.open(path);
  const end = { offset: 0 };
  assert.equal([...torn.scan(0, end)].length, 3);
  assert.equal(end.offset, good);
  torn.truncate(end.offset);
  torn.close();

  const bytes = readFileSync(path);
  bytes[bytes.length - 5]! ^= 0xff; // a flipped bit inside the last record
  writeFileSync(path, bytes);
  const corrupt = TxLog.open(path);
  t.after(() => corrupt.close());
  assert.equal([...corrupt.scan(0)].length, 2, "the record failing its CRC is not replayed");
});

test("a checkpoint holds 50,000 accounts (beyond LiteSVM's snapshot limit) and detects corruption", async (t) => {
  const path = join(tempDir(t), "checkpoint");
  const accounts: AccountSnapshot[] = Array.from({ length: 50_000 }, (_, i) => ({
    address: randomBytes(32),
    lamports: BigInt(i) * 1_000n,
    owner: randomBytes(32),
    executable: false,
    rentEpoch: 2n ** 64n - 1n,
    data: randomBytes(165),
  }));
  await writeCheckpoint(path, { slot: 123n, logOffset: 4567, indexLength: 72 * 9, accounts });
  const cp = readCheckpoint(path);
  assert.ok(cp);
  assert.equal(cp.slot, 123n);
  assert.equal(cp.logOffset, 4567);
  assert.equal(cp.indexLength, 648);
  assert.equal(cp.accounts.length, 50_000);
  assert.deepEqual(Buffer.from(cp.accounts[49_999]!.data), Buffer.from(accounts[49_999]!.data));
  assert.equal(cp.accounts[123]!.lamports, 123_000n);

  const bytes = readFileSync(path);
  bytes[1000]! ^= 1;
  writeFileSync(path, bytes);
  assert.throws(() => readCheckpoint(path), /corrupt/);
  assert.equal(readCheckpoint(join(path, "..", "missing")), null);
});
