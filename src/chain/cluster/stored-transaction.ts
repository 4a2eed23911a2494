/**
 * A cluster's `getTransaction` answer (base64 encoding) as the chain layer's StoredTransaction:
 * the same outcome, logs, bytes and metadata the embedded chain journals, so code reading a
 * transaction back does not depend on where it ran.
 */
import type { StoredTransaction } from "../backend.ts";
import { describeRpcTransactionError } from "../svm-errors.ts";
import type { TxMeta } from "../tx-meta.ts";

interface RpcTokenBalance {
  accountIndex: number;
  mint: string;
  owner?: string;
  uiTokenAmount: { amount: string; decimals: number };
}

/** The fields read here, as kit returns them (u64s as bigints). */
export interface RpcTransactionResult {
  slot: bigint;
  blockTime: bigint | null;
  transaction: [string, "base64"];
  meta: {
    err: unknown;
    fee: bigint;
    computeUnitsConsumed?: bigint;
    preBalances: bigint[];
    postBalances: bigint[];
    preTokenBalances?: RpcTokenBalance[];
    postTokenBalances?: RpcTokenBalance[];
    innerInstructions?: { index: number; instructions: { programIdIndex: number; accounts: number[]; data: string; stackHeight?: number | null }[] }[] | null;
    logMessages?: string[] | null;
  } | null;
}

function tokenBalances(balances: RpcTokenBalance[] | undefined): TxMeta["preTokenBalances"] {
  return (balances ?? []).map((b) => ({
    accountIndex: b.accountIndex,
    mint: b.mint,
    owner: b.owner ?? "",
    amount: b.uiTokenAmount.amount,
    decimals: b.uiTokenAmount.decimals,
  }));
}

function metaOf(found: RpcTransactionResult): TxMeta | undefined {
  const m = found.meta;
  if (!m) return undefined;
  return {
    blockTime: Number(found.blockTime ?? 0n),
    fee: String(m.fee),
    computeUnits: String(m.computeUnitsConsumed ?? 0n),
    preBalances: m.preBalances.map(String),
    postBalances: m.postBalances.map(String),
    preTokenBalances: tokenBalances(m.preTokenBalances),
    postTokenBalances: tokenBalances(m.postTokenBalances),
    innerInstructions: (m.innerInstructions ?? []).map((inner) => ({
      index: inner.index,
      instructions: inner.instructions.map((call) => ({ ...call, stackHeight: call.stackHeight ?? 0 })),
    })),
  };
}

export function storedTransaction(signature: string, found: RpcTransactionResult): StoredTransaction {
  const err = found.meta?.err ?? null;
  const meta = metaOf(found);
  return {
    signature,
    slot: found.slot,
    ok: err === null,
    ...(err === null ? {} : { err: describeRpcTransactionError(err) }),
    logs: found.meta?.logMessages ?? [],
    wire: Buffer.from(found.transaction[0], "base64"),
    ...(meta ? { meta } : {}),
  };
}
