/**
 * The instructions on the per-request path, built as kit `Instruction` values. kit's generated
 * builders encode addresses inside instruction data through base58 and cost 30-320 µs each; these
 * write the same bytes directly (test/chain/instructions.test.ts checks them against kit's).
 */
import { AccountRole, type Address, type Instruction } from "@solana/kit";
import {
  ASSOCIATED_TOKEN_PROGRAM,
  COMPUTE_BUDGET_PROGRAM,
  ED25519_PROGRAM,
  MEMO_PROGRAM,
  SYSTEM_PROGRAM,
  TOKEN_PROGRAM,
  addressBytes,
} from "./addresses.ts";

const { READONLY, WRITABLE, READONLY_SIGNER, WRITABLE_SIGNER } = AccountRole;

function u64(value: bigint): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, value, true);
  return out;
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** System `CreateAccountWithSeed` (index 3); `base` signs, `payer` funds the rent. */
export function createAccountWithSeed(args: {
  payer: Address;
  newAccount: Address;
  base: Address;
  seed: string;
  lamports: bigint;
  space: number;
  owner: Address;
}): Instruction {
  const seed = new TextEncoder().encode(args.seed);
  const data = concat([
    new Uint8Array([3, 0, 0, 0]),
    addressBytes(args.base),
    u64(BigInt(seed.length)),
    seed,
    u64(args.lamports),
    u64(BigInt(args.space)),
    addressBytes(args.owner),
  ]);
  return {
    programAddress: SYSTEM_PROGRAM,
    accounts: [
      { address: args.payer, role: WRITABLE_SIGNER },
      { address: args.newAccount, role: WRITABLE },
      { address: args.base, role: READONLY_SIGNER },
    ],
    data,
  };
}

/** Token `InitializeAccount3` (18): needs no rent sysvar account. */
export function initializeTokenAccount(args: { account: Address; mint: Address; owner: Address }): Instruction {
  return {
    programAddress: TOKEN_PROGRAM,
    accounts: [
      { address: args.account, role: WRITABLE },
      { address: args.mint, role: READONLY },
    ],
    data: concat([new Uint8Array([18]), addressBytes(args.owner)]),
  };
}

/** System `Transfer` (2) of lamports; `from` signs. */
export function systemTransfer(args: { from: Address; to: Address; lamports: bigint }): Instruction {
  const data = new Uint8Array(12);
  data[0] = 2;
  data.set(u64(args.lamports), 4);
  return {
    programAddress: SYSTEM_PROGRAM,
    accounts: [
      { address: args.from, role: WRITABLE_SIGNER },
      { address: args.to, role: WRITABLE },
    ],
    data,
  };
}

/** Token `Transfer` (3). */
export function tokenTransfer(args: { from: Address; to: Address; authority: Address; amount: bigint }): Instruction {
  return {
    programAddress: TOKEN_PROGRAM,
    accounts: [
      { address: args.from, role: WRITABLE },
      { address: args.to, role: WRITABLE },
      { address: args.authority, role: READONLY_SIGNER },
    ],
    data: concat([new Uint8Array([3]), u64(args.amount)]),
  };
}

/** Token `MintTo` (7). */
export function mintTo(args: { mint: Address; to: Address; authority: Address; amount: bigint }): Instruction {
  return {
    programAddress: TOKEN_PROGRAM,
    accounts: [
      { address: args.mint, role: WRITABLE },
      { address: args.to, role: WRITABLE },
      { address: args.authority, role: READONLY_SIGNER },
    ],
    data: concat([new Uint8Array([7]), u64(args.amount)]),
  };
}

/** Token `CloseAccount` (9): the account must hold no tokens; its rent goes to `destination`. */
export function closeTokenAccount(args: { account: Address; destination: Address; authority: Address }): Instruction {
  return {
    programAddress: TOKEN_PROGRAM,
    accounts: [
      { address: args.account, role: WRITABLE },
      { address: args.destination, role: WRITABLE },
      { address: args.authority, role: READONLY_SIGNER },
    ],
    data: new Uint8Array([9]),
  };
}

/** Associated-token `CreateIdempotent` (1): succeeds whether or not the account exists. */
export function createAssociatedTokenIdempotent(args: {
  payer: Address;
  ata: Address;
  owner: Address;
  mint: Address;
}): Instruction {
  return {
    programAddress: ASSOCIATED_TOKEN_PROGRAM,
    accounts: [
      { address: args.payer, role: WRITABLE_SIGNER },
      { address: args.ata, role: WRITABLE },
      { address: args.owner, role: READONLY },
      { address: args.mint, role: READONLY },
      { address: SYSTEM_PROGRAM, role: READONLY },
      { address: TOKEN_PROGRAM, role: READONLY },
    ],
    data: new Uint8Array([1]),
  };
}

export function memo(text: string): Instruction {
  return { programAddress: MEMO_PROGRAM, accounts: [], data: new TextEncoder().encode(text) };
}

/** Bytes before the public key in an Ed25519 precompile instruction carrying one signature. */
export const ED25519_HEADER_SIZE = 16;
const SELF = 0xffff; // "this instruction" as the index of the instruction holding the bytes

/**
 * Ed25519 precompile check of one signature; the transaction fails unless `signature` is
 * `publicKey`'s signature over `message`. All three are carried in this instruction's own data.
 */
export function ed25519Verify(args: { publicKey: Uint8Array; signature: Uint8Array; message: Uint8Array }): Instruction {
  if (args.publicKey.length !== 32) throw new TypeError("an Ed25519 public key is 32 bytes");
  if (args.signature.length !== 64) throw new TypeError("an Ed25519 signature is 64 bytes");
  const pkAt = ED25519_HEADER_SIZE;
  const sigAt = pkAt + 32;
  const msgAt = sigAt + 64;
  const data = new Uint8Array(msgAt + args.message.length);
  const view = new DataView(data.buffer);
  data[0] = 1; // one signature; data[1] is padding
  const fields = [sigAt, SELF, pkAt, SELF, msgAt, args.message.length, SELF];
  fields.forEach((v, i) => view.setUint16(2 + 2 * i, v, true));
  data.set(args.publicKey, pkAt);
  data.set(args.signature, sigAt);
  data.set(args.message, msgAt);
  return { programAddress: ED25519_PROGRAM, accounts: [], data };
}

/**
 * Compute Budget `SetComputeUnitPrice` (index 3): the priority fee, in micro-lamports per compute
 * unit, that a cluster's leaders weigh when blocks are full.
 */
export function setComputeUnitPrice(microLamports: bigint): Instruction {
  return { programAddress: COMPUTE_BUDGET_PROGRAM, accounts: [], data: concat([Uint8Array.of(3), u64(microLamports)]) };
}

/** `instructions` offering a priority fee (none at 0); last, so the instruction indexes a program checks (the Ed25519 proof first) stay. */
export function withPriorityFee(instructions: readonly Instruction[], microLamports: bigint | undefined): Instruction[] {
  return microLamports !== undefined && microLamports > 0n ? [...instructions, setComputeUnitPrice(microLamports)] : [...instructions];
}
