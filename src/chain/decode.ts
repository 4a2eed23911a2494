/**
 * Reads a transaction's instructions back from its wire bytes as plain facts (who moved how much
 * to whom, what the memo says, which signature the precompile checked), so callers can audit what
 * a signature did without knowing instruction layouts.
 */
import type { Address } from "@solana/kit";
import {
  ASSOCIATED_TOKEN_PROGRAM,
  ED25519_PROGRAM,
  MEMO_PROGRAM,
  SYSTEM_PROGRAM,
  TOKEN_PROGRAM,
} from "./addresses.ts";
import { base58Decode, base58Encode } from "../core/index.ts";
import { ESCROW_PROGRAM, Op, decodeEscrowInstruction, type TableLockEntry } from "./escrow-program/index.ts";
import { ED25519_HEADER_SIZE } from "./instructions.ts";
import type { TxMeta } from "./tx-meta.ts";
import type { ParsedTransaction } from "./wire.ts";

export type ProgramName = "system" | "token" | "associatedToken" | "memo" | "ed25519" | "escrow";

export type InstructionKind =
  | "transfer"
  | "mintTo"
  | "closeAccount"
  | "createAccount"
  | "initializeAccount"
  | "initializeMint"
  | "createAssociatedTokenAccount"
  | "memo"
  | "ed25519"
  | "openVault"
  | "withdraw"
  | "lock"
  | "settle"
  | "refund"
  | "stake"
  | "closeEscrow"
  | "lockBatch"
  | "settleBatch"
  | "refundSlots"
  | "unknown";

export interface DecodedInstruction {
  /** A known program's name, else its address. */
  program: ProgramName | Address;
  kind: InstructionKind;
  /** transfer: source; closeAccount: the closed account. */
  from?: Address;
  /** transfer, mintTo: destination; closeAccount: who receives the rent. */
  to?: Address;
  /** Token base units for token instructions, lamports for system ones. */
  amount?: bigint;
  authority?: Address;
  /** createAccount, initializeAccount, initializeMint, createAssociatedTokenAccount: the account. */
  account?: Address;
  owner?: Address;
  mint?: Address;
  seed?: string;
  memo?: string;
  /** ed25519: the key whose signature was verified, and the message it signed (UTF-8). */
  publicKey?: Address;
  message?: string;
  /** ed25519: the message's bytes as signed (a settlement message is binary). */
  messageBytes?: Uint8Array;
  /** lockBatch: its jobs, each with its slot of the table (`account`), amount, tier byte and id; refundSlots: the slots. */
  entries?: TableLockEntry[];
  slots?: number[];
  /** lock: the job and its tier byte; settle: the proof hash as `sha256:<hex>` (the worker is `publicKey`). */
  jobId?: string;
  tier?: number;
  proofHash?: string;
  /** Made by a program the transaction called, not by the transaction itself. */
  inner?: true;
  /**
   * inner: the index of the transaction's own instruction whose run made this call. A transaction
   * can carry several jobs' locks, so a job's transfer is told apart by the instruction that made it.
   */
  outer?: number;
}

const PROGRAMS = new Map<string, ProgramName>([
  [SYSTEM_PROGRAM, "system"],
  [TOKEN_PROGRAM, "token"],
  [ASSOCIATED_TOKEN_PROGRAM, "associatedToken"],
  [MEMO_PROGRAM, "memo"],
  [ED25519_PROGRAM, "ed25519"],
]);

const utf8 = new TextDecoder("utf-8", { fatal: false });

function view(data: Uint8Array): DataView {
  return new DataView(data.buffer, data.byteOffset, data.byteLength);
}

function addr(bytes: Uint8Array): Address {
  return base58Encode(bytes) as Address;
}

type Decoder = (data: Uint8Array, accounts: Address[]) => Omit<DecodedInstruction, "program">;

const decodeSystem: Decoder = (data, [a0, a1, a2]) => {
  if (data.length < 4) return { kind: "unknown" };
  const v = view(data);
  switch (v.getUint32(0, true)) {
    case 0:
      return { kind: "createAccount", from: a0, account: a1, amount: v.getBigUint64(4, true), owner: addr(data.subarray(20, 52)) };
    case 2:
      return { kind: "transfer", from: a0, to: a1, amount: v.getBigUint64(4, true) };
    case 3: {
      const seedLen = Number(v.getBigUint64(36, true));
      const at = 44 + seedLen;
      return {
        kind: "createAccount",
        from: a0,
        account: a1,
        authority: a2 ?? a0,
        seed: utf8.decode(data.subarray(44, at)),
        amount: v.getBigUint64(at, true),
        owner: addr(data.subarray(at + 16, at + 48)),
      };
    }
    default:
      return { kind: "unknown" };
  }
};

const decodeToken: Decoder = (data, [a0, a1, a2, a3]) => {
  const v = view(data);
  switch (data[0]) {
    case 3:
      return { kind: "transfer", from: a0, to: a1, authority: a2, amount: v.getBigUint64(1, true) };
    case 12:
      return { kind: "transfer", from: a0, mint: a1, to: a2, authority: a3, amount: v.getBigUint64(1, true) };
    case 7:
    case 14:
      return { kind: "mintTo", mint: a0, to: a1, authority: a2, amount: v.getBigUint64(1, true) };
    case 9:
      return { kind: "closeAccount", from: a0, to: a1, authority: a2 };
    case 1:
      return { kind: "initializeAccount", account: a0, mint: a1, owner: a2 };
    case 16:
    case 18:
      return { kind: "initializeAccount", account: a0, mint: a1, owner: addr(data.subarray(1, 33)) };
    case 0:
    case 20:
      return { kind: "initializeMint", account: a0, mint: a0, authority: addr(data.subarray(2, 34)) };
    default:
      return { kind: "unknown" };
  }
};

const decodeAssociatedToken: Decoder = (data, [payer, ata, owner, mint]) =>
  data.length === 0 || data[0] === 0 || data[0] === 1
    ? { kind: "createAssociatedTokenAccount", from: payer, account: ata, owner, mint }
    : { kind: "unknown" };

const decodeMemo: Decoder = (data) => ({ kind: "memo", memo: utf8.decode(data) });

/** Only signatures whose bytes live in this same instruction (index 0xFFFF) are decoded. */
const decodeEd25519: Decoder = (data) => {
  if (data.length < ED25519_HEADER_SIZE || data[0] !== 1) return { kind: "ed25519" };
  const v = view(data);
  const [pkAt, pkIx, msgAt, msgLen, msgIx] = [6, 8, 10, 12, 14].map((o) => v.getUint16(o, true)) as [number, number, number, number, number];
  if (pkIx !== 0xffff || msgIx !== 0xffff) return { kind: "ed25519" };
  return {
    kind: "ed25519",
    publicKey: addr(data.subarray(pkAt, pkAt + 32)),
    message: utf8.decode(data.subarray(msgAt, msgAt + msgLen)),
    messageBytes: data.slice(msgAt, msgAt + msgLen),
  };
};

/** The escrow program's money instructions, with the accounts their builders put in each place. */
const decodeEscrow: Decoder = (data, accounts) => {
  const d = decodeEscrowInstruction(data);
  switch (d.op) {
    case "lock":
      return { kind: "lock", account: accounts[3], from: accounts[4], to: accounts[5], amount: d.amount, owner: d.wallet, jobId: d.jobId, tier: d.tier };
    case "settle":
      return { kind: "settle", account: accounts[2], amount: d.charge, publicKey: d.worker, proofHash: `sha256:${Buffer.from(d.proofHash).toString("hex")}` };
    case "refund":
      return { kind: "refund", account: accounts[1], to: accounts[3], authority: accounts[6] };
    case "withdraw":
      return { kind: "withdraw", from: accounts[2], to: accounts[3], authority: accounts[1], amount: d.amount };
    case "lockBatch":
      return { kind: "lockBatch", account: accounts[3], from: accounts[4], to: accounts[5], owner: d.wallet, entries: d.entries, amount: d.entries.reduce((n, e) => n + e.amount, 0n) };
    case "settleBatch":
      return { kind: "settleBatch", account: accounts[2], publicKey: d.worker, to: accounts[4] };
    case "refundSlots":
      return { kind: "refundSlots", account: accounts[1], to: accounts[3], slots: d.slots, authority: accounts[6] };
    default:
      if (d.code === Op.openVault) return { kind: "openVault", account: accounts[2] };
      if (d.code === Op.closeEscrow) return { kind: "closeEscrow", account: accounts[2], to: accounts[3] };
      if (d.code === Op.stake) return { kind: "stake", authority: accounts[1], account: accounts[3], amount: new DataView(data.buffer, data.byteOffset).getBigUint64(1, true) };
      return { kind: "unknown" };
  }
};

const DECODERS: Record<ProgramName, Decoder> = {
  system: decodeSystem,
  token: decodeToken,
  associatedToken: decodeAssociatedToken,
  memo: decodeMemo,
  ed25519: decodeEd25519,
  escrow: decodeEscrow,
};

/** `escrowProgram`: where the escrow program lives on this chain (ESCROW_PROGRAM on the embedded one). */
function decodeOne(keys: Address[], programIndex: number, accountIndexes: readonly number[], data: Uint8Array, escrowProgram: Address): DecodedInstruction {
  const programAddress = keys[programIndex]!;
  const name = programAddress === escrowProgram ? "escrow" : PROGRAMS.get(programAddress);
  const accounts = accountIndexes.map((i) => keys[i]!);
  if (!name) return { program: programAddress, kind: "unknown" };
  try {
    const fields = DECODERS[name](data, accounts);
    for (const k of Object.keys(fields) as (keyof typeof fields)[]) if (fields[k] === undefined) delete fields[k];
    return { program: name, ...fields };
  } catch {
    return { program: name, kind: "unknown" };
  }
}

export function decodeInstructions(tx: ParsedTransaction, escrowProgram: Address = ESCROW_PROGRAM): DecodedInstruction[] {
  const keys = tx.accountKeys.map(addr);
  return tx.instructions.map((ix) => decodeOne(keys, ix.programIndex, ix.accountIndexes, ix.data, escrowProgram));
}

/**
 * The calls programs made while the transaction ran (the escrow program's token transfers), in
 * order, each with the index of the transaction's instruction that made it (`outer`).
 */
export function decodeInnerInstructions(tx: ParsedTransaction, meta: TxMeta | undefined, escrowProgram: Address = ESCROW_PROGRAM): DecodedInstruction[] {
  const keys = tx.accountKeys.map(addr);
  return (meta?.innerInstructions ?? []).flatMap((group) =>
    group.instructions.map((call) => ({ ...decodeOne(keys, call.programIdIndex, call.accounts, base58Decode(call.data), escrowProgram), inner: true as const, outer: group.index })),
  );
}
