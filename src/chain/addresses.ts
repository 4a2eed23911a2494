/** Program addresses and the address derivations the service relies on. */
import { createHash } from "node:crypto";
import type { Address } from "@solana/kit";
import { base58Decode, base58Encode } from "../core/index.ts";
import { isOnCurve } from "./curve.ts";

export const SYSTEM_PROGRAM = "11111111111111111111111111111111" as Address;
export const TOKEN_PROGRAM = "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA" as Address;
export const ASSOCIATED_TOKEN_PROGRAM = "ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL" as Address;
/** The memo program LiteSVM loads; @solana-program/memo defaults to a newer one it does not. */
export const MEMO_PROGRAM = "MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr" as Address;
export const ED25519_PROGRAM = "Ed25519SigVerify111111111111111111111111111" as Address;
export const COMPUTE_BUDGET_PROGRAM = "ComputeBudget111111111111111111111111111111" as Address;

/** Size of an SPL token account; its balance is the u64 at byte 64. */
export const TOKEN_ACCOUNT_SIZE = 165;
export const MINT_SIZE = 82;

/** Accepts a base58 address or its 32 bytes; throws on anything else. */
export function toAddress(value: string | Uint8Array): Address {
  if (typeof value === "string") {
    base58Decode(value, 32);
    return value as Address;
  }
  if (value.length !== 32) throw new TypeError(`an address is 32 bytes, got ${value.length}`);
  return base58Encode(value) as Address;
}

export function addressBytes(address: string): Uint8Array {
  return base58Decode(address, 32);
}

/** The system program's `create_with_seed`: sha256(base || seed || owner). Seeds are at most 32 bytes. */
export function addressWithSeed(base: Address, seed: string, owner: Address): Address {
  if (Buffer.byteLength(seed) > 32) throw new RangeError(`seed longer than 32 bytes: ${seed}`);
  const digest = createHash("sha256")
    .update(addressBytes(base))
    .update(seed, "utf8")
    .update(addressBytes(owner))
    .digest();
  return base58Encode(digest) as Address;
}

/** A wallet's credit-account seed: 32 hex characters (128 bits) of sha256 of its address bytes. */
export function creditSeed(wallet: Address): string {
  return createHash("sha256").update(addressBytes(wallet)).digest("hex").slice(0, 32);
}

/** A worker's stake-account seed: like creditSeed, over a domain-separated input. */
export function stakeSeed(worker: Address): string {
  return createHash("sha256").update("svc:stake:").update(addressBytes(worker)).digest("hex").slice(0, 32);
}

const PDA_MARKER = Buffer.from("ProgramDerivedAddress");

export interface ProgramAddress {
  address: Address;
  bump: number;
}

/** `find_program_address`: the first bump from 255 down whose hash is not a curve point, with that bump. */
export function findProgramAddressAndBump(seeds: readonly Uint8Array[], program: Address): ProgramAddress {
  const programBytes = addressBytes(program);
  for (let bump = 255; bump >= 0; bump--) {
    const hash = createHash("sha256");
    for (const seed of seeds) hash.update(seed);
    const candidate = hash.update(Uint8Array.of(bump)).update(programBytes).update(PDA_MARKER).digest();
    if (!isOnCurve(candidate)) return { address: base58Encode(candidate) as Address, bump };
  }
  throw new Error("no viable program address bump");
}

export function findProgramAddress(seeds: readonly Uint8Array[], program: Address): Address {
  return findProgramAddressAndBump(seeds, program).address;
}

/**
 * Associated token accounts of one mint. Finding one hashes and tests curve points until one is
 * off the curve (kit's async version took ~6 ms), so each owner's is derived once per process.
 */
export class AssociatedTokenAddresses {
  private readonly cache = new Map<string, Address>();
  private readonly mintBytes: Uint8Array;
  private readonly tokenProgramBytes = addressBytes(TOKEN_PROGRAM);

  constructor(readonly mint: Address) {
    this.mintBytes = addressBytes(mint);
  }

  of(owner: Address): Address {
    let ata = this.cache.get(owner);
    if (ata === undefined) {
      ata = findProgramAddress([addressBytes(owner), this.tokenProgramBytes, this.mintBytes], ASSOCIATED_TOKEN_PROGRAM);
      if (this.cache.size >= 100_000) this.cache.delete(this.cache.keys().next().value!);
      this.cache.set(owner, ata);
    }
    return ata;
  }
}
