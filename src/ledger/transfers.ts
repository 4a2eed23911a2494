/** Single transfers between two accounts, and reading transfers back. */
import { isAnyOf, type Db } from "../store/index.ts";
import { accountsNow, record, runOperation, type NewTransfer } from "./apply.ts";
import { InvalidTransferError, TransferIdConflictError } from "./errors.ts";
import { SELECT_TRANSFERS, toTransfer, type TransferRow } from "./rows.ts";
import type { Transfer, TransferCode, TransferKind, TransferResult } from "./types.ts";

export interface TransferInput {
  /** Chosen by the caller and unique forever: a retry with the same id applies nothing twice. */
  id: string;
  debitAccountId: string;
  creditAccountId: string;
  amount: bigint;
  /** Reserve instead of move: resolve it later with postPending or voidPending. */
  pending?: boolean;
  code: TransferCode;
  reference?: string;
}

/**
 * Moves (or, with `pending`, reserves) `amount` from one account to another. Throws
 * ExceedsCreditsError when the debit account is limited and cannot cover it.
 */
export async function transfer(db: Db, input: TransferInput): Promise<TransferResult> {
  const wanted = plannedTransfer(input);
  return runOperation<TransferResult>(
    db,
    async (tx) => {
      const { transfers, accounts } = await record(tx, [{ transfer: wanted, pendingAmount: 0n }]);
      return { status: "created", transfer: transfers[0]!, accounts };
    },
    async () => ({ status: "exists", transfer: await existingMatch(db, wanted), accounts: await accountsNow(db, [{ transfer: wanted, pendingAmount: 0n }]) }),
  );
}

/** The transfer `input` asks for, checked: what `transfer` records. */
export function plannedTransfer(input: TransferInput): NewTransfer {
  requireId(input.id);
  requireAmount(input.amount, false);
  if (input.debitAccountId === input.creditAccountId) throw new InvalidTransferError("debit and credit account are the same");
  return {
    id: input.id,
    kind: input.pending ? "pending" : "posted",
    debitAccountId: input.debitAccountId,
    creditAccountId: input.creditAccountId,
    amount: input.amount,
    pendingId: null,
    code: input.code,
    reference: input.reference ?? null,
  };
}

export async function getTransfer(db: Db, id: string): Promise<Transfer | null> {
  const [row] = await db.query<TransferRow>(`${SELECT_TRANSFERS} WHERE t.id = $1`, [id]);
  return row ? toTransfer(row) : null;
}

/** The transfers with these ids that exist, by id. */
export async function getTransfers(db: Db, ids: readonly string[]): Promise<Map<string, Transfer>> {
  const rows = await db.query<TransferRow>(`${SELECT_TRANSFERS} WHERE ${isAnyOf(db, "t.id", "$1::text[]")}`, [[...ids]]);
  return new Map(rows.map((row) => [row.id, toTransfer(row)]));
}

export interface TransferFilter {
  /** Transfers debiting or crediting this account. */
  accountId?: string;
  reference?: string;
  kind?: TransferKind;
  /** Why the money moved, e.g. "deposit". */
  code?: TransferCode;
  limit?: number;
  /** Newest first instead (with `limit`: the latest ones). */
  newestFirst?: boolean;
}

/** Matching transfers, oldest first unless asked otherwise. */
export async function listTransfers(db: Db, filter: TransferFilter = {}): Promise<Transfer[]> {
  const where: string[] = [];
  const params: unknown[] = [];
  if (filter.accountId !== undefined) {
    params.push(filter.accountId);
    where.push(`(t.debit_account_id = $${params.length} OR t.credit_account_id = $${params.length})`);
  }
  if (filter.reference !== undefined) {
    params.push(filter.reference);
    where.push(`t.reference = $${params.length}`);
  }
  if (filter.kind !== undefined) {
    params.push(filter.kind);
    where.push(`t.kind = $${params.length}`);
  }
  if (filter.code !== undefined) {
    params.push(filter.code);
    where.push(`t.code = $${params.length}`);
  }
  let sql = SELECT_TRANSFERS + (where.length > 0 ? ` WHERE ${where.join(" AND ")}` : "") + (filter.newestFirst ? " ORDER BY t.seq DESC" : " ORDER BY t.seq");
  if (filter.limit !== undefined) {
    params.push(filter.limit);
    sql += ` LIMIT $${params.length}`;
  }
  const rows = await db.query<TransferRow>(sql, params);
  return rows.map(toTransfer);
}

/** The recorded transfer with `wanted.id`, which must be the same transfer. */
export async function existingMatch(db: Db, wanted: NewTransfer): Promise<Transfer> {
  const found = await getTransfer(db, wanted.id);
  if (!found || !sameTransfer(found, wanted)) throw new TransferIdConflictError(wanted.id);
  return found;
}

function sameTransfer(a: Transfer, b: NewTransfer): boolean {
  return (
    a.kind === b.kind &&
    a.debitAccountId === b.debitAccountId &&
    a.creditAccountId === b.creditAccountId &&
    a.amount === b.amount &&
    a.pendingId === b.pendingId &&
    a.code === b.code &&
    a.reference === b.reference
  );
}

export function requireId(id: string): void {
  if (typeof id !== "string" || id.length === 0) throw new InvalidTransferError("a transfer needs an id");
}

export function requireAmount(amount: bigint, zeroAllowed: boolean): void {
  if (typeof amount !== "bigint") throw new InvalidTransferError("amounts are bigint base units");
  if (amount < 0n || (amount === 0n && !zeroAllowed)) throw new InvalidTransferError(`invalid amount ${amount}`);
}
