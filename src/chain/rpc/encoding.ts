/**
 * How the JSON-RPC server writes the chain's values the way Solana's nodes do: u64s as bare JSON
 * numbers, account data in the encoding asked for (token accounts and mints also `jsonParsed`),
 * and transaction errors as the runtime's JSON objects.
 */
import { TOKEN_ACCOUNT_SIZE, MINT_SIZE, TOKEN_PROGRAM } from "../addresses.ts";
import type { AccountInfo } from "../backend.ts";
import { base58Encode } from "../../core/index.ts";
import { INVALID_REQUEST, RpcError, invalidParams } from "./errors.ts";
import { MAX_BASE58_BYTES } from "./limits.ts";

/** What Solana reports as every rent-exempt account's rent epoch. */
const RENT_EXEMPT_EPOCH = 18_446_744_073_709_551_615n;
/** A bigint's placeholder as JSON.stringify escapes it (the NUL keeps it apart from real text). */
const BIG = /"\\u0000big:(\d+)"/g;

/** JSON with bigints written as exact numbers (kit parses large numbers back into bigints). */
export function toJson(value: unknown): string {
  return JSON.stringify(value, (_, v: unknown) => (typeof v === "bigint" ? `\u0000big:${v}` : v)).replace(BIG, "$1");
}

function instructionErrorJson(text: string): unknown {
  const custom = /^Custom\((\d+)\)$/.exec(text);
  if (custom) return { Custom: Number(custom[1]) };
  const borsh = /^BorshIoError\((.*)\)$/.exec(text);
  if (borsh) return { BorshIoError: JSON.parse(borsh[1]!) as string };
  return text;
}

/** `InstructionError(0, Custom(2))` (as svm-errors.ts writes it) as RPC's `{"InstructionError":[0,{"Custom":2}]}`. */
export function transactionErrorJson(err: string): unknown {
  const ix = /^InstructionError\((\d+), (.*)\)$/.exec(err);
  if (ix) return { InstructionError: [Number(ix[1]), instructionErrorJson(ix[2]!)] };
  const indexed = /^(\w+) \{ account_index: (\d+) \}$/.exec(err);
  if (indexed) return { [indexed[1]!]: { account_index: Number(indexed[2]) } };
  const numbered = /^(\w+)\((\d+)\)$/.exec(err);
  if (numbered) return { [numbered[1]!]: Number(numbered[2]) };
  return err;
}

/** An outcome's error as RPC writes it: null when it succeeded. */
export function outcomeError(outcome: { ok: boolean; err?: string }): unknown {
  return outcome.ok ? null : transactionErrorJson(outcome.err ?? "unknown error");
}

export interface UiTokenAmount {
  amount: string;
  decimals: number;
  uiAmount: number | null;
  uiAmountString: string;
}

export function uiTokenAmount(amount: bigint | string, decimals: number): UiTokenAmount {
  const digits = String(amount).padStart(decimals + 1, "0");
  const whole = digits.slice(0, digits.length - decimals);
  const fraction = digits.slice(digits.length - decimals).replace(/0+$/, "");
  const text = fraction ? `${whole}.${fraction}` : whole;
  return { amount: String(amount), decimals, uiAmount: Number(text), uiAmountString: text };
}

function view(data: Uint8Array): Buffer {
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
}

function optionalAddress(data: Uint8Array, at: number): string | null {
  return view(data).readUInt32LE(at) === 1 ? base58Encode(data.subarray(at + 4, at + 36)) : null;
}

export function isTokenAccount(account: AccountInfo): boolean {
  return account.owner === TOKEN_PROGRAM && account.data.length === TOKEN_ACCOUNT_SIZE;
}

export function tokenAccountFields(data: Uint8Array): { mint: string; owner: string; amount: bigint } {
  return { mint: base58Encode(data.subarray(0, 32)), owner: base58Encode(data.subarray(32, 64)), amount: view(data).readBigUInt64LE(64) };
}

export function mintDecimals(mint: AccountInfo | null): number | null {
  return mint && mint.owner === TOKEN_PROGRAM && mint.data.length === MINT_SIZE ? mint.data[44]! : null;
}

const TOKEN_STATES = ["uninitialized", "initialized", "frozen"];

/** SPL token accounts and mints as `jsonParsed` shows them; null for anything else. */
function parsedToken(account: AccountInfo, decimalsOf: (mint: string) => number): unknown {
  if (account.owner !== TOKEN_PROGRAM) return null;
  const d = account.data;
  if (d.length === TOKEN_ACCOUNT_SIZE) {
    const { mint, owner, amount } = tokenAccountFields(d);
    const decimals = decimalsOf(mint);
    const info: Record<string, unknown> = {
      isNative: view(d).readUInt32LE(109) === 1,
      mint,
      owner,
      state: TOKEN_STATES[d[108]!] ?? "uninitialized",
      tokenAmount: uiTokenAmount(amount, decimals),
    };
    const delegate = optionalAddress(d, 72);
    if (delegate) Object.assign(info, { delegate, delegatedAmount: uiTokenAmount(view(d).readBigUInt64LE(121), decimals) });
    const closeAuthority = optionalAddress(d, 129);
    if (closeAuthority) info.closeAuthority = closeAuthority;
    return { program: "spl-token", parsed: { info, type: "account" }, space: d.length };
  }
  if (d.length === MINT_SIZE) {
    const info = {
      decimals: d[44]!,
      freezeAuthority: optionalAddress(d, 46),
      isInitialized: d[45] === 1,
      mintAuthority: optionalAddress(d, 0),
      supply: String(view(d).readBigUInt64LE(36)),
    };
    return { program: "spl-token", parsed: { info, type: "mint" }, space: d.length };
  }
  return null;
}

export interface AccountEncoding {
  encoding?: string;
  dataSlice?: { offset: number; length: number };
}

const ENCODINGS = new Set(["base58", "base64", "jsonParsed", "binary"]);

export function checkAccountEncoding(config: AccountEncoding): void {
  if (config.encoding !== undefined && !ENCODINGS.has(config.encoding)) {
    throw invalidParams(`unsupported encoding ${JSON.stringify(config.encoding)} (base58, base64 and jsonParsed are served)`);
  }
}

/** The account's data as `config` asks for it: whole, or its `dataSlice`. */
export function accountBytes(account: AccountInfo, config: AccountEncoding): Uint8Array {
  const slice = config.dataSlice;
  return slice ? account.data.subarray(slice.offset, slice.offset + slice.length) : account.data;
}

/** An account as `getAccountInfo` returns it. */
export function encodeAccount(account: AccountInfo, config: AccountEncoding, decimalsOf: (mint: string) => number): unknown {
  const encoding = config.encoding ?? "binary";
  let data: unknown = encoding === "jsonParsed" ? parsedToken(account, decimalsOf) : null;
  if (data === null) {
    const bytes = accountBytes(account, config);
    if ((encoding === "binary" || encoding === "base58") && bytes.length > MAX_BASE58_BYTES) {
      throw new RpcError(INVALID_REQUEST, `Encoded binary (base 58) data should be less than ${MAX_BASE58_BYTES} bytes, please use Base64 encoding.`);
    }
    const buf = view(bytes);
    // jsonParsed falls back to base64 for accounts it cannot parse, as Solana's nodes do.
    if (encoding === "binary") data = base58Encode(bytes);
    else if (encoding === "base58") data = [base58Encode(bytes), "base58"];
    else data = [buf.toString("base64"), "base64"];
  }
  return {
    data,
    executable: account.executable,
    lamports: account.lamports,
    owner: account.owner,
    rentEpoch: RENT_EXEMPT_EPOCH,
    space: account.data.length,
  };
}
