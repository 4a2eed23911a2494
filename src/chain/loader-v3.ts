/**
 * The BPF upgradeable loader (loader-v3): the instructions `svc chain init` deploys the escrow
 * program with, and the account states it reads back to resume.
 *
 * Encoded here rather than taken from npm: `@solana-program/loader-v3` (0.3.0, its only release)
 * declares the peer `@solana/kit ^6`, and this repository pins kit 8.4.0, so installing it breaks
 * `npm ci` with ERESOLVE. The loader's instructions and states are bincode: a u32 little-endian
 * variant tag, then the fields in order (u32 and u64 little-endian, `Vec<u8>` as a u64 length and
 * the bytes, `Option<Pubkey>` as one byte 0/1 and the key when 1).
 */
import { AccountRole, type Address, type Instruction } from "@solana/kit";
import { base58Encode } from "../core/index.ts";
import { SYSTEM_PROGRAM } from "./addresses.ts";
import { UPGRADEABLE_LOADER, programDataAddress } from "./escrow-program/index.ts";

const { READONLY, WRITABLE, READONLY_SIGNER, WRITABLE_SIGNER } = AccountRole;

export const RENT_SYSVAR = "SysvarRent111111111111111111111111111111111" as Address;
export const CLOCK_SYSVAR = "SysvarC1ock11111111111111111111111111111111" as Address;

/** `Buffer { authority: Option<Pubkey> }`, before the bytes being written. */
export const BUFFER_METADATA_SIZE = 37;
/** `Program { programdata_address }`: the whole program account. */
export const PROGRAM_ACCOUNT_SIZE = 36;
/** `ProgramData { slot, upgrade_authority: Option<Pubkey> }`, before the deployed ELF. */
export const PROGRAMDATA_METADATA_SIZE = 45;

const Tag = { initializeBuffer: 0, write: 1, deployWithMaxDataLen: 2 } as const;

function data(tag: number, size: number): { bytes: Uint8Array; view: DataView } {
  const bytes = new Uint8Array(4 + size);
  const view = new DataView(bytes.buffer);
  view.setUint32(0, tag, true);
  return { bytes, view };
}

/** Makes a buffer account (created by the system program, owned by the loader, sized for the ELF) ready to be written by `authority`. */
export function initializeBuffer(a: { buffer: Address; authority: Address }): Instruction {
  return {
    programAddress: UPGRADEABLE_LOADER,
    accounts: [
      { address: a.buffer, role: WRITABLE },
      { address: a.authority, role: READONLY },
    ],
    data: data(Tag.initializeBuffer, 0).bytes,
  };
}

/** Writes `bytes` at `offset` of the buffer's ELF (after its metadata); the buffer's authority signs. */
export function write(a: { buffer: Address; authority: Address; offset: number; bytes: Uint8Array }): Instruction {
  const { bytes, view } = data(Tag.write, 4 + 8 + a.bytes.length);
  view.setUint32(4, a.offset, true);
  view.setBigUint64(8, BigInt(a.bytes.length), true);
  bytes.set(a.bytes, 16);
  return {
    programAddress: UPGRADEABLE_LOADER,
    accounts: [
      { address: a.buffer, role: WRITABLE },
      { address: a.authority, role: READONLY_SIGNER },
    ],
    data: bytes,
  };
}

/**
 * Deploys the buffer's ELF at `program` (an account the system program created in the same
 * transaction, owned by the loader, `PROGRAM_ACCOUNT_SIZE` bytes) with room for `maxDataLen`
 * bytes of later upgrades. `authority`, the buffer's, becomes the upgrade authority and signs.
 * The buffer's rent goes back to the payer, which pays the program data's.
 */
export function deployWithMaxDataLen(a: { payer: Address; program: Address; buffer: Address; authority: Address; maxDataLen: number }): Instruction {
  const { bytes, view } = data(Tag.deployWithMaxDataLen, 8);
  view.setBigUint64(4, BigInt(a.maxDataLen), true);
  return {
    programAddress: UPGRADEABLE_LOADER,
    accounts: [
      { address: a.payer, role: WRITABLE_SIGNER },
      { address: programDataAddress(a.program).address, role: WRITABLE },
      { address: a.program, role: WRITABLE },
      { address: a.buffer, role: WRITABLE },
      { address: RENT_SYSVAR, role: READONLY },
      { address: CLOCK_SYSVAR, role: READONLY },
      { address: SYSTEM_PROGRAM, role: READONLY },
      { address: a.authority, role: READONLY_SIGNER },
    ],
    data: bytes,
  };
}

export type LoaderState =
  | { kind: "uninitialized" }
  | { kind: "buffer"; authority: Address | null; bytes: Uint8Array }
  | { kind: "program"; programData: Address }
  | { kind: "programData"; slot: bigint; authority: Address | null; bytes: Uint8Array }
  /** Not a loader account, or too short for its tag. */
  | { kind: "other" };

function optionalKey(data: Uint8Array, at: number): Address | null {
  return data[at] === 1 ? (base58Encode(data.subarray(at + 1, at + 33)) as Address) : null;
}

/** An upgradeable-loader account's state from its data (`bytes`: the buffer's or the program data's ELF part). */
export function decodeLoaderState(data: Uint8Array): LoaderState {
  if (data.length < 4) return { kind: "other" };
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const tag = view.getUint32(0, true);
  if (tag === 0) return { kind: "uninitialized" };
  if (tag === 1 && data.length >= BUFFER_METADATA_SIZE) {
    return { kind: "buffer", authority: optionalKey(data, 4), bytes: data.subarray(BUFFER_METADATA_SIZE) };
  }
  if (tag === 2 && data.length >= PROGRAM_ACCOUNT_SIZE) return { kind: "program", programData: base58Encode(data.subarray(4, 36)) as Address };
  if (tag === 3 && data.length >= PROGRAMDATA_METADATA_SIZE) {
    return { kind: "programData", slot: view.getBigUint64(4, true), authority: optionalKey(data, 12), bytes: data.subarray(PROGRAMDATA_METADATA_SIZE) };
  }
  return { kind: "other" };
}

