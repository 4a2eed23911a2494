/**
 * What a Solana node reports about an executed transaction beyond its outcome and logs: the fee,
 * every account's lamports and every token account's balance before and after, the instructions
 * programs invoked, compute units and the time. The embedded chain captures it around each
 * execution and journals it with the transaction, so the JSON-RPC server can answer
 * `getTransaction` for any transaction, including ones made before a restart.
 */
import type { LiteSvm as NativeSvm, TransactionMetadata } from "litesvm/dist/internal.js";
import { COMPUTE_BUDGET_PROGRAM, ED25519_PROGRAM, MINT_SIZE, TOKEN_ACCOUNT_SIZE, TOKEN_PROGRAM, addressBytes } from "./addresses.ts";
import { base58Decode, base58Encode } from "../core/index.ts";
import { signatureKey } from "./sigindex.ts";
import { isWritable, type ParsedTransaction } from "./wire.ts";

export const LAMPORTS_PER_SIGNATURE = 5_000n;

export interface TokenBalance {
  accountIndex: number;
  mint: string;
  owner: string;
  /** Base units, as a decimal string (u64). */
  amount: string;
  decimals: number;
}

export interface InnerInstructions {
  /** The top-level instruction that made these calls. */
  index: number;
  instructions: { programIdIndex: number; accounts: number[]; data: string; stackHeight: number }[];
}

/** Journaled with each transaction record; lamport amounts are decimal strings (u64). */
export interface TxMeta {
  /** Unix seconds of the chain's clock when it executed. */
  blockTime: number;
  fee: string;
  computeUnits: string;
  preBalances: string[];
  postBalances: string[];
  preTokenBalances: TokenBalance[];
  postTokenBalances: TokenBalance[];
  innerInstructions: InnerInstructions[];
}

interface Balances {
  lamports: string[];
  tokens: TokenBalance[];
}

const TOKEN_PROGRAM_BYTES = signatureKey(addressBytes(TOKEN_PROGRAM));
const ED25519_PROGRAM_BYTES = signatureKey(addressBytes(ED25519_PROGRAM));
const COMPUTE_BUDGET_PROGRAM_BYTES = signatureKey(addressBytes(COMPUTE_BUDGET_PROGRAM));

/**
 * Compute units a transaction may use when it sets no limit, as the runtime counts them: 200,000
 * per instruction, 3,000 for one of a builtin program (system, compute budget, the loaders...),
 * at most 1.4 million. The priority fee is charged on this limit, not on the units used.
 */
const DEFAULT_UNITS_PER_INSTRUCTION = 200_000n;
const UNITS_PER_BUILTIN_INSTRUCTION = 3_000n;
const MAX_COMPUTE_UNITS = 1_400_000n;
const BUILTIN_PROGRAMS = new Set(
  [
    "11111111111111111111111111111111",
    "ComputeBudget111111111111111111111111111111",
    "Vote111111111111111111111111111111111111111",
    "Stake11111111111111111111111111111111111111",
    "Config1111111111111111111111111111111111111",
    "BPFLoader1111111111111111111111111111111111",
    "BPFLoader2111111111111111111111111111111111",
    "BPFLoaderUpgradeab1e11111111111111111111111",
    "LoaderV411111111111111111111111111111111111",
    "AddressLookupTab1e1111111111111111111111111",
  ].map((address) => signatureKey(base58Decode(address, 32))),
);

/**
 * The fee: 5,000 lamports for each signature (the transaction's own and those its Ed25519
 * instructions verify), plus the priority fee its Compute Budget instructions ask for (unit price
 * in micro-lamports times the unit limit, rounded up).
 */
export function transactionFee(tx: ParsedTransaction): bigint {
  let signatures = BigInt(tx.numSigners);
  let unitPrice = 0n;
  let unitLimit: bigint | undefined;
  let defaultUnits = 0n;
  for (const ix of tx.instructions) {
    const program = tx.accountKeys[ix.programIndex];
    const key = program ? signatureKey(program) : "";
    if (key === ED25519_PROGRAM_BYTES) signatures += BigInt(ix.data[0] ?? 0);
    defaultUnits += BUILTIN_PROGRAMS.has(key) ? UNITS_PER_BUILTIN_INSTRUCTION : DEFAULT_UNITS_PER_INSTRUCTION;
    if (key !== COMPUTE_BUDGET_PROGRAM_BYTES) continue;
    if (ix.data[0] === 2 && ix.data.length >= 5) unitLimit = BigInt(Buffer.from(ix.data).readUInt32LE(1));
    if (ix.data[0] === 3 && ix.data.length >= 9) unitPrice = Buffer.from(ix.data).readBigUInt64LE(1);
  }
  const units = unitLimit ?? (defaultUnits < MAX_COMPUTE_UNITS ? defaultUnits : MAX_COMPUTE_UNITS);
  return signatures * LAMPORTS_PER_SIGNATURE + (unitPrice * units + 999_999n) / 1_000_000n;
}

/** What a reading found in one account: its lamports, and its balance if it is a token account. */
interface Reading {
  lamports: string;
  token?: Omit<TokenBalance, "accountIndex">;
}

/** Accounts whose latest reading is kept: the busy ones (custody, pool, vaults) stay, a job's escrow passes through. */
const MAX_READINGS = 4_096;

/**
 * What the readings look up again and again: programs, mints' decimals (fixed once initialised), the
 * base58 names of mints and owners (a few recur: the service's mint, its custody authority), since
 * base58 encoding is most of a reading's cost, and each account's latest reading.
 *
 * An account's latest reading is what it holds until a transaction writes it, and every
 * transaction's writable accounts are read again after it runs: so a transaction's balances before
 * it runs come from the readings, and only accounts not read lately cost a copy out of LiteSVM.
 * That holds while transactions are the only change; anything else that changes accounts (an
 * airdrop) calls `forgetReadings`.
 */
export class ReadingCache {
  private readonly decimals = new Map<string, number>();
  private readonly names = new Map<string, string>();
  /** Programs' lamports: the embedded chain never redeploys a program. */
  private readonly programs = new Map<string, string>();
  private readonly readings = new Map<string, Reading>();
  constructor(private readonly svm: NativeSvm) {}

  programLamports(key: string): string | undefined {
    return this.programs.get(key);
  }

  noteProgram(key: string, lamports: string): void {
    this.programs.set(key, lamports);
  }

  latest(key: string): Reading | undefined {
    return this.readings.get(key);
  }

  noteReading(key: string, reading: Reading): void {
    // Deleted first, so the Map's order is the order of use and the oldest goes first.
    this.readings.delete(key);
    if (this.readings.size >= MAX_READINGS) this.readings.delete(this.readings.keys().next().value!);
    this.readings.set(key, reading);
  }

  /** Accounts changed outside a transaction: no reading is known to be current. */
  forgetReadings(): void {
    this.readings.clear();
  }

  name(key: Uint8Array): string {
    const k = signatureKey(key);
    let name = this.names.get(k);
    if (name === undefined) {
      name = base58Encode(key);
      if (this.names.size >= 10_000) this.names.delete(this.names.keys().next().value!);
      this.names.set(k, name);
    }
    return name;
  }

  of(mint: Uint8Array): number {
    const key = signatureKey(mint);
    let d = this.decimals.get(key);
    if (d === undefined) {
      const data = this.svm.getAccount(mint)?.data();
      if (!data || data.length !== MINT_SIZE) return 0;
      d = data[44]!;
      this.decimals.set(key, d);
    }
    return d;
  }
}

/**
 * Each account's lamports and each token account's balance. Before execution an account read
 * lately is taken from the cache; after it only the writable accounts are read again (nothing else
 * can have changed). Programs are read once per process: reading an account from LiteSVM copies
 * it, and programs are large.
 */
function readBalances(svm: NativeSvm, tx: ParsedTransaction, cache: ReadingCache, before?: Balances): Balances {
  const lamports: string[] = [];
  const tokens: TokenBalance[] = [];
  tx.accountKeys.forEach((key, accountIndex) => {
    if (before && !isWritable(tx, accountIndex)) {
      lamports.push(before.lamports[accountIndex]!);
      const token = before.tokens.find((t) => t.accountIndex === accountIndex);
      if (token) tokens.push(token);
      return;
    }
    const k = signatureKey(key);
    const programLamports = cache.programLamports(k);
    if (programLamports !== undefined) return void lamports.push(programLamports);
    const reading = (before === undefined ? cache.latest(k) : undefined) ?? readAccount(svm, key, k, cache);
    lamports.push(reading.lamports);
    if (reading.token) tokens.push({ accountIndex, ...reading.token });
  });
  return { lamports, tokens };
}

/** One account as LiteSVM holds it now, noted in the cache (a program as a program). */
function readAccount(svm: NativeSvm, key: Uint8Array, k: string, cache: ReadingCache): Reading {
  const account = svm.getAccount(key);
  const reading: Reading = { lamports: String(account?.lamports() ?? 0n) };
  if (account?.executable()) {
    cache.noteProgram(k, reading.lamports);
    return reading;
  }
  const data = account?.data();
  if (account && data && data.length === TOKEN_ACCOUNT_SIZE && signatureKey(account.owner()) === TOKEN_PROGRAM_BYTES) {
    const mint = data.subarray(0, 32);
    reading.token = {
      mint: cache.name(mint),
      owner: cache.name(data.subarray(32, 64)),
      amount: String(Buffer.from(data.buffer, data.byteOffset, data.byteLength).readBigUInt64LE(64)),
      decimals: cache.of(mint),
    };
  }
  cache.noteReading(k, reading);
  return reading;
}

function innerInstructionsOf(meta: TransactionMetadata): InnerInstructions[] {
  const out: InnerInstructions[] = [];
  meta.innerInstructions().forEach((calls, index) => {
    if (calls.length === 0) return;
    out.push({
      index,
      instructions: calls.map((call) => {
        const ix = call.instruction();
        return { programIdIndex: ix.programIdIndex(), accounts: Array.from(ix.accounts()), data: base58Encode(ix.data()), stackHeight: call.stackHeight() };
      }),
    });
  });
  return out;
}

/**
 * Runs `execute` between two readings of the transaction's accounts and returns its result with
 * the metadata. Program accounts are read too (for their lamports) but their data is never copied.
 */
export function withMeta<R>(
  svm: NativeSvm,
  tx: ParsedTransaction,
  readings: ReadingCache,
  execute: () => R,
  metaOf: (result: R) => TransactionMetadata,
): { result: R; meta: TxMeta } {
  const pre = readBalances(svm, tx, readings);
  const result = execute();
  const post = readBalances(svm, tx, readings, pre);
  const txMeta = metaOf(result);
  return {
    result,
    meta: {
      // The clock the transaction ran under: replaying it after a crash restores this time, so
      // programs that read the clock (the escrow's lock time and refund deadline) decide the same.
      blockTime: Number(svm.getClock().unixTimestamp),
      fee: String(transactionFee(tx)),
      computeUnits: String(txMeta.computeUnitsConsumed()),
      preBalances: pre.lamports,
      postBalances: post.lamports,
      preTokenBalances: pre.tokens,
      postTokenBalances: post.tokens,
      innerInstructions: innerInstructionsOf(txMeta),
    },
  };
}
