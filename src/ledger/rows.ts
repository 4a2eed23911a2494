/** Reading ledger rows into the ledger's types. */
import type { Account, AccountCode, PendingState, Transfer, TransferCode, TransferKind } from "./types.ts";

export interface AccountRow {
  id: string;
  code: string;
  debits_must_not_exceed_credits: boolean;
  debits_pending: bigint;
  debits_posted: bigint;
  credits_pending: bigint;
  credits_posted: bigint;
  created_at: Date;
}

export interface TransferRow {
  id: string;
  kind: string;
  debit_account_id: string;
  credit_account_id: string;
  amount: bigint;
  pending_id: string | null;
  code: string;
  reference: string | null;
  created_at: Date;
  pending_state: string | null;
}

export const ACCOUNT_COLUMNS = `id, code, debits_must_not_exceed_credits, debits_pending, debits_posted,
  credits_pending, credits_posted, created_at`;

/** ACCOUNT_COLUMNS, qualified by a table alias where a statement joins others that share names. */
export function accountColumns(alias?: string): string {
  if (alias === undefined) return ACCOUNT_COLUMNS;
  return ACCOUNT_COLUMNS.split(",").map((column) => `${alias}.${column.trim()}`).join(", ");
}

/**
 * Transfers with the derived state of pending ones; filter on `t.` columns, order by `t.seq`.
 *
 * The state is a sub-select per pending row on the resolve-once index, not a join: as a join, the
 * plan PostgreSQL keeps for the prepared statement hashes the whole table to find a handful of
 * resolutions, a sequential scan that grows with the ledger, where the sub-select reads one index
 * entry per pending row.
 */
export const SELECT_TRANSFERS = `
SELECT t.id, t.kind, t.debit_account_id, t.credit_account_id, t.amount, t.pending_id, t.code,
       t.reference, t.created_at,
       CASE WHEN t.kind <> 'pending' THEN NULL
            ELSE coalesce((SELECT CASE r.kind WHEN 'post_pending' THEN 'posted' ELSE 'voided' END
                             FROM ledger_transfers r WHERE r.pending_id = t.id), 'pending') END AS pending_state
FROM ledger_transfers t`;

export function toAccount(row: AccountRow): Account {
  return {
    id: row.id,
    code: row.code as AccountCode,
    debitsMustNotExceedCredits: row.debits_must_not_exceed_credits,
    debitsPending: row.debits_pending,
    debitsPosted: row.debits_posted,
    creditsPending: row.credits_pending,
    creditsPosted: row.credits_posted,
    available: row.credits_posted - row.debits_posted - row.debits_pending,
    balance: row.credits_posted - row.debits_posted,
    createdAt: row.created_at,
  };
}

export function toTransfer(row: TransferRow): Transfer {
  return {
    id: row.id,
    kind: row.kind as TransferKind,
    debitAccountId: row.debit_account_id,
    creditAccountId: row.credit_account_id,
    amount: row.amount,
    pendingId: row.pending_id,
    code: row.code as TransferCode,
    reference: row.reference,
    createdAt: row.created_at,
    pendingState: row.pending_state as PendingState | null,
  };
}
