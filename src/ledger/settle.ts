/**
 * A job's money over the account layout of ./accounts.ts:
 *
 *   reserve  pending   wallet:<a> -> escrow:<a>   the job's worst-case cost, refused if not covered
 *   charge   post      wallet:<a> -> escrow:<a>   the actual charge (the rest is released)
 *   pay out  posted    escrow:<a> -> worker:<w>   the worker's share
 *            posted    escrow:<a> -> treasury     the protocol's share
 *   (a job that produced nothing: voidPending on the reservation instead)
 *
 * `settle` charges and pays out in one step. A caller may also charge first (resolveAll with no
 * payouts) and pay out later (payOutAll), as the chain does: the charge then waits in
 * escrow:<a>, as the credits wait in the job's escrow account on-chain, until the settlement
 * transaction pays the worker; if that transaction is refused, `returnCharge` gives it back.
 * Either way escrow:<a> ends each job where it started. Escrow is per wallet, not one shared account, because on PostgreSQL a transaction holds
 * its accounts' row locks until it commits: one escrow row for the whole system would make every
 * reservation in the service wait for the previous one's commit. The treasury is shared, so
 * settlements queue on its row for the length of a commit; settle last in a caller's transaction.
 */
import type { Db } from "../store/index.ts";
import { escrowAccountId, walletAccountId } from "./accounts.ts";
import { inCallersTransaction, record, type Movement, type NewTransfer } from "./apply.ts";
import { resolvePending, type Payout, type Resolved } from "./pending.ts";
import { plannedTransfer, requireId, transfer, type TransferInput } from "./transfers.ts";
import type { Account, TransferResult } from "./types.ts";

export interface ReserveInput {
  id: string;
  /** The wallet address; its wallet and escrow accounts must exist (ensureWalletAccounts). */
  wallet: string;
  amount: bigint;
  reference?: string;
}

/** One job's worst-case cost, held from its wallet (see the table above). */
export async function reserve(db: Db, input: ReserveInput): Promise<TransferResult> {
  return transfer(db, reservation(input));
}

/**
 * Several reservations as one operation: one statement however many there are, so jobs admitted
 * together cost about what one does. All or nothing, with the caller's transaction when `db` is
 * one (the error leaves it to be rolled back): when a wallet cannot cover its share of the whole
 * batch, ExceedsCreditsError names its account; the caller then reserves one by one to learn
 * which fit. Returns every account touched, as the batch left them (ids are new: a reservation
 * already recorded is a bug, not a retry).
 */
export async function reserveAll(db: Db, inputs: readonly ReserveInput[]): Promise<Account[]> {
  const movements: Movement[] = inputs.map((input) => ({ transfer: reservedTransfer(input), pendingAmount: 0n }));
  return inCallersTransaction(
    db,
    "reservation",
    inputs.map((i) => i.id),
    async (tx) => (await record(tx, movements)).accounts,
  );
}

/** The pending transfer `reserve` records for `input`: what a resolution's `reserved` names. */
export function reservedTransfer(input: ReserveInput): NewTransfer {
  return plannedTransfer(reservation(input));
}

function reservation(input: ReserveInput): TransferInput {
  return {
    id: input.id,
    debitAccountId: walletAccountId(input.wallet),
    creditAccountId: escrowAccountId(input.wallet),
    amount: input.amount,
    pending: true,
    code: "reserve",
    ...(input.reference !== undefined ? { reference: input.reference } : {}),
  };
}

export interface SettleInput {
  /** Id of the post; the payouts are recorded as `<id>:1`, `<id>:2`, ... in `payouts` order. */
  id: string;
  reservationId: string;
  /** The amount charged, at most the reservation; the rest returns to the wallet. */
  charge: bigint;
  /** Where the charge goes, adding up to it exactly, e.g. from core/payout.ts `splitPayout`. */
  payouts: readonly Payout[];
}

/** Posts the charge and pays it out in one atomic step (inside `db` if it is a transaction). */
export async function settle(db: Db, input: SettleInput): Promise<Resolved> {
  return resolvePending(db, {
    id: input.id,
    pendingId: input.reservationId,
    post: true,
    amount: input.charge,
    code: "charge",
    payouts: input.payouts,
  });
}

export interface PayOutInput {
  /** The charge's id; the payouts are recorded as `<id>:1`, `<id>:2`, ... in `payouts` order (zero shares skipped). */
  id: string;
  /** The wallet whose escrow account holds the charge. */
  wallet: string;
  payouts: readonly Payout[];
  reference?: string;
}

/**
 * Pays out charges already posted to their wallets' escrow accounts, as one operation. All or
 * nothing, with the caller's transaction when `db` is one; ids are new (a payout already
 * recorded is a bug, not a retry). Returns every account touched, as the batch left them.
 */
export async function payOutAll(db: Db, inputs: readonly PayOutInput[]): Promise<Account[]> {
  const movements: Movement[] = inputs.flatMap((input) => {
    requireId(input.id);
    return input.payouts
      .map((p, i) => ({ p, i }))
      .filter(({ p }) => p.amount !== 0n)
      .map(({ p, i }) => ({
        transfer: plannedTransfer({
          id: `${input.id}:${i + 1}`,
          debitAccountId: escrowAccountId(input.wallet),
          creditAccountId: p.accountId,
          amount: p.amount,
          code: p.code,
          ...(input.reference !== undefined ? { reference: input.reference } : {}),
        }),
        pendingAmount: 0n,
      }));
  });
  if (movements.length === 0) return [];
  return inCallersTransaction(
    db,
    "payout",
    inputs.map((i) => i.id),
    async (tx) => (await record(tx, movements)).accounts,
  );
}

/** Gives a posted charge that will not be paid out back to its wallet (a retry with the same id applies nothing). */
export async function returnCharge(db: Db, input: { id: string; wallet: string; amount: bigint; reference?: string }): Promise<TransferResult> {
  return transfer(db, {
    id: input.id,
    debitAccountId: escrowAccountId(input.wallet),
    creditAccountId: walletAccountId(input.wallet),
    amount: input.amount,
    code: "charge_returned",
    ...(input.reference !== undefined ? { reference: input.reference } : {}),
  });
}
