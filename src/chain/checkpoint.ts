/**
 * A checkpoint of the embedded chain: every account the service's transactions have touched, and
 * how far into the log and the signature index that state reaches. The account list is the
 * portable form (LiteSVM's own snapshots stop working past ~4 MiB). Replaced atomically.
 *
 * Layout: "SVCCHK01", u64 slot, u64 log offset, u64 index length, u32 account count, per account
 * (32-byte address, u64 lamports, 32-byte owner, u8 executable, u64 rent epoch, u32 data length,
 * data), then the
 * SHA-256 of everything before it.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { replaceFileDurablyAsync } from "./durable-file.ts";

export interface AccountSnapshot {
  address: Uint8Array;
  lamports: bigint;
  owner: Uint8Array;
  executable: boolean;
  rentEpoch: bigint;
  data: Uint8Array;
}

export interface Checkpoint {
  slot: bigint;
  logOffset: number;
  indexLength: number;
  accounts: AccountSnapshot[];
}

const MAGIC = Buffer.from("SVCCHK01", "latin1");
const HEADER = 8 + 8 + 8 + 8 + 4;
const ACCOUNT_FIXED = 32 + 8 + 32 + 1 + 8 + 4;

function encode(cp: Checkpoint): Buffer {
  const size = HEADER + cp.accounts.reduce((n, a) => n + ACCOUNT_FIXED + a.data.length, 0) + 32;
  const buf = Buffer.alloc(size);
  MAGIC.copy(buf, 0);
  let at = buf.writeBigUInt64LE(cp.slot, 8);
  at = buf.writeBigUInt64LE(BigInt(cp.logOffset), at);
  at = buf.writeBigUInt64LE(BigInt(cp.indexLength), at);
  at = buf.writeUInt32LE(cp.accounts.length, at);
  for (const a of cp.accounts) {
    buf.set(a.address, at);
    at = buf.writeBigUInt64LE(a.lamports, at + 32);
    buf.set(a.owner, at);
    at = buf.writeUInt8(a.executable ? 1 : 0, at + 32);
    at = buf.writeBigUInt64LE(a.rentEpoch, at);
    at = buf.writeUInt32LE(a.data.length, at);
    buf.set(a.data, at);
    at += a.data.length;
  }
  createHash("sha256").update(buf.subarray(0, at)).digest().copy(buf, at);
  return buf;
}

function decode(buf: Buffer, path: string): Checkpoint {
  const body = buf.subarray(0, buf.length - 32);
  if (buf.length < HEADER + 32 || !buf.subarray(0, 8).equals(MAGIC)) throw new Error(`${path} is not a chain checkpoint`);
  if (!createHash("sha256").update(body).digest().equals(buf.subarray(buf.length - 32))) {
    throw new Error(`${path} is corrupt (checksum mismatch)`);
  }
  const slot = buf.readBigUInt64LE(8);
  const logOffset = Number(buf.readBigUInt64LE(16));
  const indexLength = Number(buf.readBigUInt64LE(24));
  const count = buf.readUInt32LE(32);
  const accounts: AccountSnapshot[] = [];
  let at = HEADER;
  for (let i = 0; i < count; i++) {
    const address = new Uint8Array(buf.subarray(at, at + 32));
    const lamports = buf.readBigUInt64LE(at + 32);
    const owner = new Uint8Array(buf.subarray(at + 40, at + 72));
    const executable = buf.readUInt8(at + 72) === 1;
    const rentEpoch = buf.readBigUInt64LE(at + 73);
    const len = buf.readUInt32LE(at + 81);
    const data = new Uint8Array(buf.subarray(at + ACCOUNT_FIXED, at + ACCOUNT_FIXED + len));
    accounts.push({ address, lamports, owner, executable, rentEpoch, data });
    at += ACCOUNT_FIXED + len;
  }
  return { slot, logOffset, indexLength, accounts };
}

export function readCheckpoint(path: string): Checkpoint | null {
  let buf: Buffer;
  try {
    buf = readFileSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
  return decode(buf, path);
}

/** Written whole or not at all (durable-file.ts), so a crash mid-write keeps the previous checkpoint. */
export async function writeCheckpoint(path: string, cp: Checkpoint): Promise<void> {
  await replaceFileDurablyAsync(path, encode(cp));
}
