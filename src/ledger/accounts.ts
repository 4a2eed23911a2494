/**
 * Ledger accounts and the ids the system gives them. Per-user accounts are `<code>:<address>`;
 * the shared ones (`funding`, `treasury`) are created by the ledger's migration.
 */
import { isAnyOf, type Db } from "../store/index.ts";
import { AccountConflictError } from "./errors.ts";
import { ACCOUNT_COLUMNS, toAccount, type AccountRow } from "./rows.ts";
import type { Account, AccountCode } from "./types.ts";

/** Where deposits come from and withdrawals go: the outside world. Its balance runs negative. */
export const FUNDING_ACCOUNT = "funding";
/** The protocol's share of every charge. */
export const TREASURY_ACCOUNT = "treasury";

export function walletAccountId(address: string): string {
  return `wallet:${address}`;
}

/** A wallet's reservations sit here between reserve and settle (see ./settle.ts). */
export function escrowAccountId(address: string): string {
  return `escrow:${address}`;
}

export function workerAccountId(address: string): string {
  return `worker:${address}`;
}

export interface EnsureAccountInput {
  id: string;
  code: AccountCode;
  /** Default: true for wallets, which must never spend more than was deposited. */
  debitsMustNotExceedCredits?: boolean;
}

/**
 * Creates the account unless it exists; an existing one must have the same code and flag. Read
 * first: the account exists almost every time (a worker's, at each of its settlements), and a
 * read is one statement where an insert that finds a conflict is two. A caller that read it
 * already (null: not found) passes it as `known`.
 */
export async function ensureAccount(db: Db, input: EnsureAccountInput, known?: Account | null): Promise<Account> {
  const limited = input.debitsMustNotExceedCredits ?? input.code === "wallet";
  const found = known !== undefined ? known : await getAccount(db, input.id);
  const account = found ?? (await insertAccount(db, input.id, input.code, limited)) ?? (await getAccount(db, input.id));
  if (!account || account.code !== input.code || account.debitsMustNotExceedCredits !== limited) {
    throw new AccountConflictError(input.id);
  }
  return account;
}

/** The new account, or undefined when a concurrent caller created it first. */
async function insertAccount(db: Db, id: string, code: AccountCode, limited: boolean): Promise<Account | undefined> {
  const [inserted] = await db.query<AccountRow>(
    `INSERT INTO ledger_accounts (id, code, debits_must_not_exceed_credits) VALUES ($1, $2, $3)
     ON CONFLICT (id) DO NOTHING RETURNING ${ACCOUNT_COLUMNS}`,
    [id, code, limited],
  );
  return inserted ? toAccount(inserted) : undefined;
}

/** A wallet's own account and its escrow account, both needed before it can reserve. */
export async function ensureWalletAccounts(db: Db, address: string): Promise<{ wallet: Account; escrow: Account }> {
  return db.transaction(async (tx) => ({
    wallet: await ensureAccount(tx, { id: walletAccountId(address), code: "wallet" }),
    escrow: await ensureAccount(tx, { id: escrowAccountId(address), code: "escrow" }),
  }));
}

export async function ensureWorkerAccount(db: Db, address: string, known?: Account | null): Promise<Account> {
  return ensureAccount(db, { id: workerAccountId(address), code: "worker" }, known);
}

export async function getAccount(db: Db, id: string): Promise<Account | null> {
  const [row] = await db.query<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM ledger_accounts WHERE id = $1`, [id]);
  return row ? toAccount(row) : null;
}

/** The accounts with these ids that exist, by id. */
export async function getAccounts(db: Db, ids: readonly string[]): Promise<Map<string, Account>> {
  const rows = await db.query<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM ledger_accounts WHERE ${isAnyOf(db, "id", "$1::text[]")}`, [[...ids]]);
  return new Map(rows.map((row) => [row.id, toAccount(row)]));
}

/** Every wallet the ledger has an account for, by address. */
export async function walletAddresses(db: Db): Promise<string[]> {
  const rows = await db.query<{ id: string }>(`SELECT id FROM ledger_accounts WHERE code = 'wallet' ORDER BY id`);
  return rows.map((r) => r.id.slice("wallet:".length));
}
