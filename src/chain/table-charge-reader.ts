/**
 * What the chain alone says about one job of an escrow table, read over Solana JSON-RPC: the
 * program's config, the table (while it exists), every transaction that touched the table, and
 * among them the job's lock (the lock_batch entry naming its id, whose position gives its slot),
 * the settlement whose worker-signed message names its slot, or the refund of its slot. The
 * job's receipt (its leaf and the audit path to the settlement's root) comes with the job, not
 * from the chain; `svc verify` checks both against each other (verify/table-checks.ts).
 */
import type { Address } from "@solana/kit";
import { parseSettlementMessage, type SettlementEntry } from "../core/index.ts";
import { addressBytes } from "./addresses.ts";
import type { ChainTransactionFacts, ChargeReader } from "./charge-reader.ts";
import { decodeTable, escrowPoolAddress, vaultAddress, type EscrowConfig, type EscrowTable, type TableLockEntry } from "./escrow-program/index.ts";

/** What the service keeps with a job of a table so that anyone can check its charge. */
export interface TableReceipt {
  /** The escrow table's address. */
  table: Address;
  slot: number;
  /** The job's leaf: its position among the settlement's leaves, and the tree's size. */
  leafIndex: number;
  treeSize: number;
  /** Sibling hashes from the leaf up to the root. */
  path: Uint8Array[];
  promptTokens: number;
  completionTokens: number;
  /** `sha256:<hex>` of the output. */
  proofHash: string;
  escrowTx?: string;
  settlementTx?: string;
}

/** A worker-signed settlement message found in a transaction: who signed it and what it says. */
export interface SignedSettlement {
  worker: string;
  signature: Uint8Array;
  bytes: Uint8Array;
  root: Uint8Array;
  entries: SettlementEntry[];
}

export interface TableChargeFacts {
  jobId: string;
  config: EscrowConfig;
  tableAddress: Address;
  /** The table as it stands; null once it was closed (or was never created). */
  table: EscrowTable | null;
  escrowPool: Address;
  lock: ChainTransactionFacts | null;
  /** The job's entry in its lock: its slot, amount, tier and id, with the wallet and the lock's instruction index. */
  lockEntry: (TableLockEntry & { wallet: Address; vault: Address; instruction: number }) | null;
  /** Each slot's lock amount, from every lock of the table: a settlement's transfers add up over all its slots. */
  lockedBySlot: Map<number, bigint>;
  settlement: ChainTransactionFacts | null;
  /** The settlement message of the table in that transaction. */
  signed: SignedSettlement | null;
  refund: ChainTransactionFacts | null;
}

/** The settlement message of `table` a transaction's precompile verified, if it carries one. */
export function settlementIn(tx: ChainTransactionFacts, table: Address): SignedSettlement | null {
  const tableBytes = Buffer.from(addressBytes(table));
  for (const proof of tx.proofs) {
    const parsed = parseSettlementMessage(proof.bytes);
    if (parsed && tableBytes.equals(parsed.table)) return { worker: proof.publicKey, signature: proof.signature, bytes: proof.bytes, root: parsed.root, entries: parsed.entries };
  }
  return null;
}

/** The table's transactions sorted into locks (every slot's amount, the job's own entry), its slot's settlement and refund. */
async function tableTransactions(reader: ChargeReader, jobId: string, receipt: TableReceipt) {
  const found = { lock: null as ChainTransactionFacts | null, settlement: null as ChainTransactionFacts | null, refund: null as ChainTransactionFacts | null };
  const lockedBySlot = new Map<number, bigint>();
  const given = [receipt.escrowTx, receipt.settlementTx].filter((s): s is string => s !== undefined);
  const signatures = [...new Set([...given, ...(await reader.signaturesFor(receipt.table))])];
  for (const signature of signatures) {
    const tx = await reader.transaction(signature);
    if (!tx?.ok) continue;
    for (const ix of tx.instructions) {
      if (ix.program !== "escrow" || ix.account !== receipt.table) continue;
      if (ix.kind === "lockBatch") for (const e of ix.entries ?? []) lockedBySlot.set(e.slot, e.amount);
      if (ix.kind === "lockBatch" && ix.entries?.some((e) => e.jobId === jobId)) found.lock ??= tx;
      if (ix.kind === "refundSlots" && ix.slots?.includes(receipt.slot)) found.refund ??= tx;
      if (ix.kind === "settleBatch" && settlementIn(tx, receipt.table)?.entries.some((e) => e.slot === receipt.slot)) found.settlement ??= tx;
    }
  }
  if (receipt.settlementTx !== undefined) found.settlement = await reader.transaction(receipt.settlementTx);
  if (receipt.escrowTx !== undefined) found.lock = await reader.transaction(receipt.escrowTx);
  return { ...found, lockedBySlot };
}

/** Everything the chain holds about the charge of a job kept in an escrow table. */
export async function readTableCharge(reader: ChargeReader, jobId: string, receipt: TableReceipt): Promise<TableChargeFacts> {
  const config = await reader.config();
  const account = await reader.accountData(receipt.table);
  const table = account?.owner === reader.program && account.data.length > 0 ? decodeTable(account.data) : null;
  const { lock, settlement, refund, lockedBySlot } = await tableTransactions(reader, jobId, receipt);
  const at = lock?.instructions.findIndex((i) => i.program === "escrow" && i.kind === "lockBatch" && i.account === receipt.table && i.entries?.some((e) => e.jobId === jobId)) ?? -1;
  const ix = at >= 0 ? lock!.instructions[at]! : undefined;
  const entry = ix?.entries?.find((e) => e.jobId === jobId);
  const lockEntry = entry && ix?.owner ? { ...entry, wallet: ix.owner, vault: vaultAddress(ix.owner, reader.program).address, instruction: at } : null;
  return {
    jobId,
    config,
    tableAddress: receipt.table,
    table,
    escrowPool: escrowPoolAddress(reader.program).address,
    lock,
    lockEntry,
    lockedBySlot,
    settlement,
    signed: settlement ? settlementIn(settlement, receipt.table) : null,
    refund,
  };
}
