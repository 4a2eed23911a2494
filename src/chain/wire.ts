/**
 * Legacy transaction wire format: compile kit instructions into a signed transaction, and parse
 * one back. kit's compile+encode+sign path costs ~2.5 ms per transaction (base58 for every
 * address, WebCrypto signing); this one works on bytes and signs with node:crypto.
 */
import type { Address, Instruction } from "@solana/kit";
import { addressBytes } from "./addresses.ts";
import { BoundedMap, type Signer, base58Encode } from "../core/index.ts";

/** The largest transaction a cluster accepts (IPv6 MTU minus headers). */
export const MAX_TRANSACTION_SIZE = 1232;

const SIGNER = 2;
const WRITABLE = 1;

class ByteWriter {
  private buf = new Uint8Array(MAX_TRANSACTION_SIZE);
  length = 0;
  bytes(b: ArrayLike<number>): void {
    if (this.length + b.length > this.buf.length) {
      throw new RangeError(`transaction larger than ${MAX_TRANSACTION_SIZE} bytes`);
    }
    this.buf.set(b, this.length);
    this.length += b.length;
  }
  byte(b: number): void {
    if (this.length >= this.buf.length) throw new RangeError(`transaction larger than ${MAX_TRANSACTION_SIZE} bytes`);
    this.buf[this.length++] = b;
  }
  /** Solana's compact-u16 length prefix, byte by byte (a set() from a plain array is V8's slow path). */
  compactU16(n: number): void {
    do {
      const low = n & 0x7f;
      n >>= 7;
      this.byte(n > 0 ? low | 0x80 : low);
    } while (n > 0);
  }
  result(): Uint8Array {
    return this.buf.slice(0, this.length);
  }
}

export interface SignedTransaction {
  /** base58 of the first (fee payer's) signature: the transaction's id on-chain. */
  signature: string;
  wire: Uint8Array;
}

/**
 * Compiles a legacy message (fee payer first; then signers, writable before read-only; then the
 * rest, writable first) and signs it with `signers`, which must be exactly the signing accounts.
 */
export function buildTransaction(
  feePayer: Signer,
  instructions: readonly Instruction[],
  blockhash: Uint8Array,
  signers: readonly Signer[],
): SignedTransaction {
  const { message, signedBy } = compileMessage(feePayer, instructions, blockhash, signers);
  return assemble(message, signedBy.map((s) => s.sign(message)));
}

/** The message to sign, and who signs it in the order of its signature slots. */
function compileMessage(
  feePayer: Signer,
  instructions: readonly Instruction[],
  blockhash: Uint8Array,
  signers: readonly Signer[],
): { message: Uint8Array; signedBy: Signer[] } {
  const roles = new Map<Address, number>([[feePayer.address, SIGNER | WRITABLE]]);
  for (const ix of instructions) {
    for (const meta of ix.accounts ?? []) {
      if (!("role" in meta) || "lookupTableAddress" in meta) throw new TypeError("lookup-table accounts are not supported");
      roles.set(meta.address, (roles.get(meta.address) ?? 0) | meta.role);
    }
    if (!roles.has(ix.programAddress)) roles.set(ix.programAddress, 0);
  }
  const groups: Address[][] = [[], [], [], []]; // writable signer, signer, writable, read-only
  for (const [address, role] of roles) {
    groups[role & SIGNER ? (role & WRITABLE ? 0 : 1) : role & WRITABLE ? 2 : 3]!.push(address);
  }
  const keys = groups.flat();
  const index = new Map(keys.map((k, i) => [k, i]));
  const numSigners = groups[0]!.length + groups[1]!.length;

  const bySigner = new Map(signers.map((s) => [s.address, s]));
  const signedBy = keys.slice(0, numSigners).map((k) => {
    const s = k === feePayer.address ? feePayer : bySigner.get(k);
    if (!s) throw new Error(`missing signer for ${k}`);
    return s;
  });
  for (const s of signers) {
    if ((index.get(s.address) ?? numSigners) >= numSigners) throw new Error(`${s.address} signs but no instruction needs it`);
  }

  const msg = new ByteWriter();
  msg.byte(numSigners);
  msg.byte(groups[1]!.length);
  msg.byte(groups[3]!.length);
  msg.compactU16(keys.length);
  for (const k of keys) msg.bytes(keyBytes(k));
  if (blockhash.length !== 32) throw new TypeError("a blockhash is 32 bytes");
  msg.bytes(blockhash);
  msg.compactU16(instructions.length);
  for (const ix of instructions) {
    msg.byte(index.get(ix.programAddress)!);
    const accounts = ix.accounts ?? [];
    msg.compactU16(accounts.length);
    for (const meta of accounts) msg.byte(index.get(meta.address)!);
    const data = ix.data ?? new Uint8Array(0);
    msg.compactU16(data.length);
    msg.bytes(data);
  }
  return { message: msg.result(), signedBy };
}

/**
 * The bytes of addresses compiled recently. A job's two transactions name the same programs, fee
 * payer, treasury and wallet accounts as the last job's, and decoding base58 is quadratic in its
 * length: decoding every key of every message would be a large part of compiling one. Only
 * copied from, never handed out.
 */
const recentKeys = new BoundedMap<Uint8Array>(1024);

function keyBytes(address: Address): Uint8Array {
  let bytes = recentKeys.get(address);
  if (bytes === undefined) recentKeys.set(address, (bytes = addressBytes(address)));
  return bytes;
}

function assemble(message: Uint8Array, signatures: readonly Uint8Array[]): SignedTransaction {
  const wire = new ByteWriter();
  wire.compactU16(signatures.length);
  for (const sig of signatures) wire.bytes(sig);
  wire.bytes(message);
  return { signature: base58Encode(signatures[0]!), wire: wire.result() };
}

export interface ParsedInstruction {
  programIndex: number;
  accountIndexes: number[];
  data: Uint8Array;
}

export interface ParsedTransaction {
  signatures: Uint8Array[];
  version: "legacy" | number;
  numSigners: number;
  numReadonlySigners: number;
  numReadonlyUnsigned: number;
  /** Static account keys; for v0 transactions, lookup-table accounts are not resolved. */
  accountKeys: Uint8Array[];
  blockhash: Uint8Array;
  instructions: ParsedInstruction[];
}

class ByteReader {
  at = 0;
  constructor(private readonly buf: Uint8Array) {}
  byte(): number {
    if (this.at >= this.buf.length) throw new RangeError("truncated transaction");
    return this.buf[this.at++]!;
  }
  take(n: number): Uint8Array {
    if (this.at + n > this.buf.length) throw new RangeError("truncated transaction");
    const out = this.buf.subarray(this.at, this.at + n);
    this.at += n;
    return out;
  }
  compactU16(): number {
    let value = 0;
    for (let shift = 0; shift < 21; shift += 7) {
      const b = this.byte();
      value |= (b & 0x7f) << shift;
      if ((b & 0x80) === 0) return value;
    }
    throw new RangeError("bad compact-u16");
  }
}

export function parseTransaction(wire: Uint8Array): ParsedTransaction {
  const r = new ByteReader(wire);
  const signatures = Array.from({ length: r.compactU16() }, () => r.take(64));
  let version: "legacy" | number = "legacy";
  let first = r.byte();
  if (first & 0x80) {
    version = first & 0x7f;
    first = r.byte();
  }
  const numReadonlySigners = r.byte();
  const numReadonlyUnsigned = r.byte();
  const accountKeys = Array.from({ length: r.compactU16() }, () => r.take(32));
  const blockhash = r.take(32);
  const instructions = Array.from({ length: r.compactU16() }, () => ({
    programIndex: r.byte(),
    accountIndexes: Array.from(r.take(r.compactU16())),
    data: r.take(r.compactU16()),
  }));
  return {
    signatures,
    version,
    numSigners: first,
    numReadonlySigners,
    numReadonlyUnsigned,
    accountKeys,
    blockhash,
    instructions,
  };
}

/** Whether account `i` of a parsed message may be written (by the legacy header rules). */
export function isWritable(tx: ParsedTransaction, i: number): boolean {
  return i < tx.numSigners
    ? i < tx.numSigners - tx.numReadonlySigners
    : i < tx.accountKeys.length - tx.numReadonlyUnsigned;
}
