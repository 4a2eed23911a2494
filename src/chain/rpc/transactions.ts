/** A journaled transaction as `getTransaction` returns it: the transaction in the encoding asked for, and its metadata. */
import { TOKEN_PROGRAM } from "../addresses.ts";
import { base58Encode } from "../../core/index.ts";
import { transactionFee, type TokenBalance } from "../tx-meta.ts";
import type { TxRecord } from "../txlog.ts";
import { isWritable, parseTransaction, type ParsedTransaction } from "../wire.ts";
import { outcomeError, uiTokenAmount } from "./encoding.ts";
import { invalidParams } from "./errors.ts";

export interface TransactionConfig {
  encoding?: string;
  maxSupportedTransactionVersion?: number;
}

const TRANSACTION_ENCODINGS = new Set(["json", "jsonParsed", "base64", "base58"]);

interface CompiledCall {
  programIdIndex: number;
  accounts: number[];
  data: string;
  stackHeight: number | null;
}

function callAs(parsed: boolean, keys: string[], call: CompiledCall): unknown {
  if (!parsed) return call;
  // Instructions of programs the server does not parse, in jsonParsed's "partially decoded" form.
  return { programId: keys[call.programIdIndex], accounts: call.accounts.map((i) => keys[i]), data: call.data, stackHeight: call.stackHeight };
}

function message(tx: ParsedTransaction, keys: string[], parsed: boolean): unknown {
  const accountKeys = parsed
    ? keys.map((pubkey, i) => ({ pubkey, signer: i < tx.numSigners, writable: isWritable(tx, i), source: "transaction" }))
    : keys;
  const instructions = tx.instructions.map((ix) =>
    callAs(parsed, keys, { programIdIndex: ix.programIndex, accounts: ix.accountIndexes, data: base58Encode(ix.data), stackHeight: null }),
  );
  const header = {
    numRequiredSignatures: tx.numSigners,
    numReadonlySignedAccounts: tx.numReadonlySigners,
    numReadonlyUnsignedAccounts: tx.numReadonlyUnsigned,
  };
  return { accountKeys, header, instructions, recentBlockhash: base58Encode(tx.blockhash) };
}

function tokenBalances(balances: TokenBalance[]): unknown[] {
  return balances.map((b) => ({
    accountIndex: b.accountIndex,
    mint: b.mint,
    owner: b.owner,
    programId: TOKEN_PROGRAM,
    uiTokenAmount: uiTokenAmount(b.amount, b.decimals),
  }));
}

function meta(record: TxRecord, tx: ParsedTransaction, keys: string[], parsed: boolean): unknown {
  const m = record.meta;
  const err = outcomeError(record);
  return {
    err,
    status: record.ok ? { Ok: null } : { Err: err },
    fee: m ? BigInt(m.fee) : transactionFee(tx),
    // A record journaled without balances (by a version that kept none) has none to report.
    preBalances: (m?.preBalances ?? []).map(BigInt),
    postBalances: (m?.postBalances ?? []).map(BigInt),
    preTokenBalances: tokenBalances(m?.preTokenBalances ?? []),
    postTokenBalances: tokenBalances(m?.postTokenBalances ?? []),
    innerInstructions: (m?.innerInstructions ?? []).map((inner) => ({
      index: inner.index,
      instructions: inner.instructions.map((call) => callAs(parsed, keys, call)),
    })),
    logMessages: record.logs,
    rewards: [],
    loadedAddresses: { writable: [], readonly: [] },
    computeUnitsConsumed: m ? BigInt(m.computeUnits) : 0n,
  };
}

export function checkTransactionEncoding(config: TransactionConfig): void {
  if (config.encoding !== undefined && !TRANSACTION_ENCODINGS.has(config.encoding)) {
    throw invalidParams(`unsupported encoding ${JSON.stringify(config.encoding)} (json, jsonParsed, base64 and base58 are served)`);
  }
}

export function encodeTransaction(record: TxRecord, config: TransactionConfig): unknown {
  const tx = parseTransaction(record.wire);
  const keys = tx.accountKeys.map(base58Encode);
  const encoding = config.encoding ?? "json";
  const parsed = encoding === "jsonParsed";
  const wire = Buffer.from(record.wire);
  const transaction =
    encoding === "base64"
      ? [wire.toString("base64"), "base64"]
      : encoding === "base58"
        ? [base58Encode(record.wire), "base58"]
        : { signatures: tx.signatures.map(base58Encode), message: message(tx, keys, parsed) };
  const result: Record<string, unknown> = {
    slot: record.slot,
    blockTime: record.meta?.blockTime ?? null,
    meta: meta(record, tx, keys, parsed),
    transaction,
  };
  // Clients that name a version they support get the field; others get the legacy shape.
  if (config.maxSupportedTransactionVersion !== undefined) result.version = "legacy";
  return result;
}
