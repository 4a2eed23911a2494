/**
 * The one place balances change: record new transfers and move the account totals with them.
 *
 * An operation is one statement, in its own transaction (a savepoint inside a caller's, or for the
 * batch operations of the job service's group commits the caller's transaction itself:
 * inCallersTransaction). On PGlite every statement, savepoint and release is an exchange with a
 * fixed cost, and on PostgreSQL a round trip, which is why an operation's work is a single
 * statement.
 * The statement has two parts:
 *
 * 1. INSERT the transfers (in a WITH clause). A transfer id or a pending transfer's resolution
 *    that already exists fails the statement on a unique index; the operation then rolls back and
 *    reports what exists. The indexes make this hold under concurrency: a second insert of the
 *    same id waits for the first transaction and then fails. (A plain insert, not ON CONFLICT DO
 *    NOTHING: on PGlite the speculative insertion that clause needs cost about as much as the
 *    insert itself.)
 * 2. One UPDATE of every account involved, adding the operation's changes, WHERE a limited account
 *    stays within its credits, RETURNING the accounts it changed with their new totals (handed to
 *    the caller, who then needs no read of a balance it just changed). An account missing from
 *    what it returns was refused by the limit check, or does not exist: the operation throws
 *    ExceedsCreditsError or AccountNotFoundError and rolls back, the transfers with it. This is
 *    where a transfer's accounts are checked to exist: the table has no foreign keys
 *    (./schema.ts says why).
 *
 * Why a conditional UPDATE and not SELECT ... FOR UPDATE then a check in code: the check and the
 * write are one statement, and on PostgreSQL a concurrent UPDATE of the same row waits for the
 * holder to commit and then re-evaluates the WHERE against the committed row, so two transfers
 * racing for a wallet's last credits are serialized on its row and the second sees the first's
 * debit (on PGlite transactions are serialized anyway). The statement also locks its rows through
 * a sub-select ordered by id, so every operation takes row locks in one global order (no
 * deadlocks between operations, however many accounts each touches), in the operation's one
 * statement, so a shared row such as the treasury stays locked only for that statement and the commit.
 * The CHECK constraints in ./schema.ts back this up: a bug here fails the statement instead of
 * overdrawing. Limits are checked on each account's total change, which is exact for the
 * operations of this module: none debits and credits the same limited account.
 */
import { addValues, isAnyOf, isTransaction, sqlState, unpadded, type Db } from "../store/index.ts";
import { AccountNotFoundError, ExceedsCreditsError } from "./errors.ts";
import { ACCOUNT_COLUMNS, accountColumns, toAccount, type AccountRow } from "./rows.ts";
import type { Account, Transfer } from "./types.ts";

/** A transfer as written: the stored fields less what the database sets or derives. */
export type NewTransfer = Omit<Transfer, "createdAt" | "pendingState">;

/** A transfer to record; for a post or void, with the amount its pending transfer reserved. */
export interface Movement {
  transfer: NewTransfer;
  pendingAmount: bigint;
}

/** Thrown inside an operation's transaction to undo it: its transfer (or resolution) already exists. */
export class AlreadyRecorded extends Error {}

/**
 * Runs `body` atomically (a savepoint when `db` is a transaction). If it throws AlreadyRecorded,
 * the work is rolled back and `whenRecorded` answers instead, reading what the earlier attempt left.
 */
export async function runOperation<T>(db: Db, body: (tx: Db) => Promise<T>, whenRecorded: () => Promise<T>): Promise<T> {
  try {
    return await db.transaction(body);
  } catch (err) {
    if (err instanceof AlreadyRecorded) return whenRecorded();
    throw err;
  }
}

/** What an operation recorded, and every account it touched as the operation left it (by id). */
export interface Recorded {
  transfers: Transfer[];
  accounts: Account[];
}

/**
 * Records `movements` and applies them to the accounts, in one statement, inside a transaction
 * (runOperation's, or the caller's: see inCallersTransaction). Throws AlreadyRecorded unless every
 * transfer was new.
 */
export async function record(tx: Db, movements: readonly Movement[]): Promise<Recorded> {
  return (await recordIfReserved(tx, movements, []))!;
}

/**
 * `record` for resolutions whose pending transfers the caller knows as they were made
 * (`reserved`): the same statement checks that each exists, pending, with exactly those fields,
 * where the caller would otherwise read them first (one exchange less). Undefined, with nothing
 * written, when one does not match: the caller then reads them. That each is still unresolved is
 * the unique index's to say, as for any resolution.
 */
export async function recordIfReserved(tx: Db, movements: readonly Movement[], reserved: readonly NewTransfer[]): Promise<Recorded | undefined> {
  let updated: (AccountRow & { recorded_at: Date })[];
  const byAccount = changes(movements);
  try {
    updated = await recordAndApply(tx, movements, byAccount, reserved);
  } catch (err) {
    if (sqlState(err) === UNIQUE_VIOLATION) throw new AlreadyRecorded();
    throw err;
  }
  // The check failed: the statement inserted and updated nothing.
  if (reserved.length > 0 && updated.length === 0) return undefined;
  if (updated.length !== byAccount.size) {
    return refuse(tx, byAccount, [...byAccount.keys()].sort(byCodeUnits).filter((id) => !updated.some((u) => u.id === id)));
  }
  // The transfers' created_at is now(), the transaction's time, as is what the UPDATE returns.
  const recordedAt = updated[0]!.recorded_at;
  return {
    transfers: movements.map(({ transfer }) => ({ ...transfer, createdAt: recordedAt, pendingState: transfer.kind === "pending" ? "pending" : null })),
    accounts: updated.map(toAccount).sort((a, b) => byCodeUnits(a.id, b.id)),
  };
}

/**
 * Runs a batch operation (reserveAll, resolveAll, payOutAll) in the caller's transaction when
 * `db` is one, without a savepoint of its own: those callers (group commits) let any error undo
 * their whole transaction and then do each item alone, so a savepoint would only cost two more
 * round trips per operation. Given the database itself, in a transaction of its own. A batch's
 * ids are new: one already recorded (`what` among `ids`) is a bug, not a retry.
 */
export function inCallersTransaction<T>(db: Db, what: string, ids: readonly string[], body: (tx: Db) => Promise<T>): Promise<T> {
  const run = async (tx: Db) => {
    try {
      return await body(tx);
    } catch (err) {
      if (err instanceof AlreadyRecorded) throw new Error(`a ${what} among ${ids.join(", ")} was already recorded`);
      throw err;
    }
  };
  return isTransaction(db) ? run(db) : db.transaction(run);
}

/**
 * The accounts `movements` name, as they stand: what a retried operation reports, since it
 * changed nothing itself.
 */
export async function accountsNow(db: Db, movements: readonly Movement[]): Promise<Account[]> {
  const rows = await db.query<AccountRow>(`SELECT ${accountColumns()} FROM ledger_accounts WHERE ${isAnyOf(db, "id", "$1::text[]")}`, [accountIds(movements)]);
  return rows.map(toAccount).sort((a, b) => byCodeUnits(a.id, b.id));
}

function accountIds(movements: readonly Movement[]): string[] {
  return [...new Set(movements.flatMap((m) => [m.transfer.debitAccountId, m.transfer.creditAccountId]))].sort(byCodeUnits);
}

/** Matches ORDER BY ... COLLATE "C" for the ASCII ids the system uses. */
function byCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

const UNIQUE_VIOLATION = "23505";
const TRANSFER_TYPES = ["text", "text", "text", "text", "bigint", "text", "text", "text"] as const;
const CHANGE_TYPES = ["text", "bigint", "bigint", "bigint", "bigint"] as const;
const RESERVED_TYPES = ["text", "text", "text", "bigint", "text", "text"] as const;

interface Change {
  debitsPending: bigint;
  debitsPosted: bigint;
  creditsPending: bigint;
  creditsPosted: bigint;
}

/** What the movements add to each account's four totals. */
function changes(movements: readonly Movement[]): Map<string, Change> {
  const byAccount = new Map<string, Change>();
  const of = (id: string) => {
    let c = byAccount.get(id);
    if (!c) byAccount.set(id, (c = { debitsPending: 0n, debitsPosted: 0n, creditsPending: 0n, creditsPosted: 0n }));
    return c;
  };
  for (const { transfer: t, pendingAmount } of movements) {
    const debit = of(t.debitAccountId);
    const credit = of(t.creditAccountId);
    switch (t.kind) {
      case "posted":
        debit.debitsPosted += t.amount;
        credit.creditsPosted += t.amount;
        break;
      case "pending":
        debit.debitsPending += t.amount;
        credit.creditsPending += t.amount;
        break;
      case "post_pending":
        debit.debitsPending -= pendingAmount;
        credit.creditsPending -= pendingAmount;
        debit.debitsPosted += t.amount;
        credit.creditsPosted += t.amount;
        break;
      case "void_pending":
        debit.debitsPending -= pendingAmount;
        credit.creditsPending -= pendingAmount;
        break;
    }
  }
  return byAccount;
}

/**
 * The transfers inserted and the accounts updated in one statement (one round trip). Both parts
 * run or fail together: a transfer id or resolution that exists fails the whole statement on its
 * unique index. An account the limit check refused, or that does not exist, is missing from what
 * it returns (record then throws, and the transaction rolls back).
 *
 * The insert runs first, as when they were two statements: the UPDATE's WHERE counts its rows, a
 * condition the planner evaluates once before anything else. Unreferenced, it would run after the
 * UPDATE, and of two concurrent resolutions of one pending transfer the second would then fail on
 * the accounts' CHECK (its release applied twice) instead of on the unique index that says the
 * transfer was resolved already.
 */
async function recordAndApply(
  tx: Db,
  movements: readonly Movement[],
  byAccount: Map<string, Change>,
  reserved: readonly NewTransfer[],
): Promise<(AccountRow & { recorded_at: Date })[]> {
  if (tx.kind === "sqlite") return recordAndApplyOnSqlite(tx, movements, byAccount, reserved);
  const params: unknown[] = [];
  const transfers = addValues(params, TRANSFER_TYPES, movements.map(({ transfer: t }) => [t.id, t.kind, t.debitAccountId, t.creditAccountId, t.amount, t.pendingId, t.code, t.reference]));
  const check = reservedCheck(params, reserved);
  const ids = [...byAccount.keys()].sort(byCodeUnits);
  const changes = addValues(params, CHANGE_TYPES, ids.map((id) => {
    const c = byAccount.get(id)!;
    return [id, c.debitsPending, c.debitsPosted, c.creditsPending, c.creditsPosted];
  }));
  params.push(ids);
  return tx.query(
    `WITH ${check.step}inserted AS (
       INSERT INTO ledger_transfers (id, kind, debit_account_id, credit_account_id, amount, pending_id, code, reference)
       ${unpadded(transfers, check.holds)} RETURNING id
     )
     UPDATE ledger_accounts a
     SET debits_pending = a.debits_pending + c.dp, debits_posted = a.debits_posted + c.dpo,
         credits_pending = a.credits_pending + c.cp, credits_posted = a.credits_posted + c.cpo
     FROM (VALUES ${changes}) AS c (id, dp, dpo, cp, cpo),
          (SELECT id FROM ledger_accounts WHERE id = ANY($${params.length}::text[])
           ORDER BY id COLLATE "C" FOR NO KEY UPDATE) AS locked
     WHERE (SELECT count(*) FROM inserted) > 0 AND a.id = c.id AND locked.id = c.id
       AND (NOT a.debits_must_not_exceed_credits
            OR a.debits_pending + c.dp + a.debits_posted + c.dpo <= a.credits_posted + c.cpo)
     RETURNING ${accountColumns("a")}, now() AS recorded_at`,
    params,
  );
}

/**
 * recordAndApply on SQLite, as separate statements in the operation's transaction: there a
 * statement costs microseconds and no round trip, and one connection writes at a time, so the
 * accounts need no locks. The check of `reserved` comes first and, failing, writes nothing.
 */
async function recordAndApplyOnSqlite(
  tx: Db,
  movements: readonly Movement[],
  byAccount: Map<string, Change>,
  reserved: readonly NewTransfer[],
): Promise<(AccountRow & { recorded_at: Date })[]> {
  if (reserved.length > 0) {
    const [{ matched }] = (await tx.query<{ matched: bigint }>(
      `SELECT count(*) AS matched FROM ledger_transfers p JOIN json_each($1) AS r
         ON p.id = r.value ->> 0 AND p.kind = 'pending' AND p.debit_account_id = r.value ->> 1 AND p.credit_account_id = r.value ->> 2
        AND p.amount = r.value ->> 3 AND p.code = r.value ->> 4 AND p.reference IS NOT DISTINCT FROM r.value ->> 5`,
      [reserved.map((t) => [t.id, t.debitAccountId, t.creditAccountId, t.amount, t.code, t.reference])],
    )) as [{ matched: bigint }];
    if (matched !== BigInt(reserved.length)) return [];
  }
  await tx.query(
    `INSERT INTO ledger_transfers (id, kind, debit_account_id, credit_account_id, amount, pending_id, code, reference)
     SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5, value ->> 6, value ->> 7 FROM json_each($1)`,
    [movements.map(({ transfer: t }) => [t.id, t.kind, t.debitAccountId, t.creditAccountId, t.amount, t.pendingId, t.code, t.reference])],
  );
  const ids = [...byAccount.keys()].sort(byCodeUnits);
  const updated = await tx.query<AccountRow & { recorded_at: string }>(
    `UPDATE ledger_accounts AS a
     SET debits_pending = a.debits_pending + c.dp, debits_posted = a.debits_posted + c.dpo,
         credits_pending = a.credits_pending + c.cp, credits_posted = a.credits_posted + c.cpo
     FROM (SELECT value ->> 0 AS id, value ->> 1 AS dp, value ->> 2 AS dpo, value ->> 3 AS cp, value ->> 4 AS cpo FROM json_each($1)) AS c
     WHERE a.id = c.id
       AND (NOT a.debits_must_not_exceed_credits
            OR a.debits_pending + c.dp + a.debits_posted + c.dpo <= a.credits_posted + c.cpo)
     RETURNING ${ACCOUNT_COLUMNS}, now() AS recorded_at`,
    [ids.map((id) => {
      const c = byAccount.get(id)!;
      return [id, c.debitsPending, c.debitsPosted, c.creditsPending, c.creditsPosted];
    })],
  );
  // An expression's value has no declared type to be read by: now() comes back as its text.
  return updated.map((row) => ({ ...row, recorded_at: new Date(row.recorded_at) }));
}

/**
 * The step counting the `reserved` pending transfers that exist as given, and the condition on
 * which the insert goes ahead (all of them do); no step when there are none to check. Adds its
 * parameters to `params`.
 */
function reservedCheck(params: unknown[], reserved: readonly NewTransfer[]): { step: string; holds: string } {
  if (reserved.length === 0) return { step: "", holds: "true" };
  const list = addValues(params, RESERVED_TYPES, reserved.map((t) => [t.id, t.debitAccountId, t.creditAccountId, t.amount, t.code, t.reference]));
  const step = `reserved AS (
       SELECT count(*) AS matched FROM ledger_transfers p
         JOIN (VALUES ${list}) AS r (id, debit, credit, amount, code, reference)
           ON p.id = r.id AND p.kind = 'pending' AND p.debit_account_id = r.debit AND p.credit_account_id = r.credit
          AND p.amount = r.amount AND p.code = r.code AND p.reference IS NOT DISTINCT FROM r.reference
     ), `;
  // The count as a parameter, not in the text: one text (and plan) whatever the group's size.
  params.push(reserved.length);
  return { step, holds: `(SELECT matched FROM reserved) = $${params.length}::bigint` };
}

/** Explains why the UPDATE left `refused` accounts alone, with the figures as they now stand. */
async function refuse(tx: Db, byAccount: Map<string, Change>, refused: string[]): Promise<never> {
  const rows = await tx.query<{ id: string; debits_pending: bigint; debits_posted: bigint; credits_posted: bigint }>(
    `SELECT id, debits_pending, debits_posted, credits_posted FROM ledger_accounts WHERE ${isAnyOf(tx, "id", "$1::text[]")} ORDER BY id`,
    [refused],
  );
  const missing = refused.find((id) => !rows.some((r) => r.id === id));
  if (missing !== undefined) throw new AccountNotFoundError(missing);
  const row = rows[0]!;
  const change = byAccount.get(row.id)!;
  const available = row.credits_posted - row.debits_posted - row.debits_pending;
  throw new ExceedsCreditsError(row.id, change.debitsPending + change.debitsPosted, available);
}
