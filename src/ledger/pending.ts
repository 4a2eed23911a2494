/**
 * Resolving a pending transfer: post some or all of it, or void it. Either way the whole reserved
 * amount leaves the pending totals in the same step, so an unposted remainder is released at once.
 * A pending transfer is resolved once: the unique index on `pending_id` turns a second post or
 * void (even a concurrent one) into PendingTransferResolvedError.
 */
import type { Db } from "../store/index.ts";
import { accountsNow, AlreadyRecorded, inCallersTransaction, record, recordIfReserved, runOperation, type Movement, type NewTransfer, type Recorded } from "./apply.ts";
import {
  ExceedsPendingAmountError,
  InvalidTransferError,
  PendingTransferNotFoundError,
  PendingTransferResolvedError,
  TransferIdConflictError,
} from "./errors.ts";
import { existingMatch, getTransfer, getTransfers, requireAmount, requireId } from "./transfers.ts";
import type { Account, Transfer, TransferCode, TransferResult } from "./types.ts";

export interface PostPendingInput {
  id: string;
  pendingId: string;
  /** Default: the whole pending amount. */
  amount?: bigint;
  /** Default: the pending transfer's code. */
  code?: TransferCode;
}

export interface VoidPendingInput {
  id: string;
  pendingId: string;
  code?: TransferCode;
}

export async function postPending(db: Db, input: PostPendingInput): Promise<TransferResult> {
  const { status, transfer, accounts } = await resolvePending(db, { ...input, post: true, payouts: [] });
  return { status, transfer, accounts };
}

export async function voidPending(db: Db, input: VoidPendingInput): Promise<TransferResult> {
  const { status, transfer, accounts } = await resolvePending(db, { ...input, post: false, payouts: [] });
  return { status, transfer, accounts };
}

/** A share of a posted amount passed on from the pending transfer's credit account. */
export interface Payout {
  accountId: string;
  amount: bigint;
  code: TransferCode;
}

export interface Resolution {
  id: string;
  pendingId: string;
  post: boolean;
  amount?: bigint;
  code?: TransferCode;
  /** Must add up to the posted amount; recorded as `<id>:1`, `<id>:2`, ... (zero shares skipped). */
  payouts: readonly Payout[];
  /**
   * The pending transfer as it was made, when the caller knows it (resolveAll checks it in the
   * statement that records the resolution instead of reading it first). Resolutions without it
   * read their pending transfers.
   */
  reserved?: NewTransfer;
}

export interface Resolved {
  status: "created" | "exists";
  transfer: Transfer;
  payouts: Transfer[];
  /** As in TransferResult: every account touched, as the resolution left it (a retry: as it stands). */
  accounts: Account[];
}

/** Posts (with payouts, see ./settle.ts) or voids a pending transfer, atomically. */
export async function resolvePending(db: Db, req: Resolution): Promise<Resolved> {
  requireResolution(req);
  let planned: NewTransfer[] = [];
  return runOperation<Resolved>(
    db,
    async (tx) => {
      const pending = await getTransfer(tx, req.pendingId);
      planned = plannedTransfers(req, pending);
      if (pending!.pendingState !== "pending") throw new AlreadyRecorded();
      const { transfers, accounts } = await record(tx, movementsOf(planned, pending!));
      const [transfer, ...payouts] = transfers;
      return { status: "created", transfer: transfer!, payouts, accounts };
    },
    // A retry of a resolution that went through, or another id resolved the pending transfer first.
    async () => {
      if (!(await getTransfer(db, req.id))) {
        const state = (await getTransfer(db, req.pendingId))?.pendingState;
        if (state === "posted" || state === "voided") throw new PendingTransferResolvedError(req.pendingId, state);
        // Still pending: one of the payout ids was taken by an unrelated transfer.
        for (const t of planned.slice(1)) if (await getTransfer(db, t.id)) throw new TransferIdConflictError(t.id);
        throw new Error(`resolution ${req.id} of ${req.pendingId} was refused for no recorded reason`);
      }
      const existing: Transfer[] = [];
      for (const t of planned) existing.push(await existingMatch(db, t));
      const [transfer, ...payouts] = existing;
      const accounts = await accountsNow(db, planned.map((t) => ({ transfer: t, pendingAmount: 0n })));
      return { status: "exists", transfer: transfer!, payouts, accounts };
    },
  );
}

/**
 * Several resolutions as one operation: one read of their pending transfers and one statement
 * recording all of them, or, when every resolution names its pending transfer as it was made
 * (`reserved`), that one statement alone, checking them. All or nothing, with the caller's
 * transaction when `db` is one: where resolvePending would refuse one, or find it resolved
 * already (a retry), the error says which; the caller then resolves them one by one, each with
 * resolvePending's own answer. Returns every account touched, as the batch left them.
 */
export async function resolveAll(db: Db, reqs: readonly Resolution[]): Promise<Account[]> {
  reqs.forEach(requireResolution);
  return inCallersTransaction<Account[]>(
    db,
    "resolution",
    reqs.map((r) => r.id),
    async (tx) => {
      const recorded = await recordAsReserved(tx, reqs);
      if (recorded) return recorded.accounts;
      const pendings = await getTransfers(tx, reqs.map((req) => req.pendingId));
      const movements = reqs.flatMap((req) => {
        const pending = pendings.get(req.pendingId);
        const planned = plannedTransfers(req, pending);
        if (pending!.pendingState !== "pending") throw new PendingTransferResolvedError(req.pendingId, pending!.pendingState ?? "posted");
        return movementsOf(planned, pending!);
      });
      return (await record(tx, movements)).accounts;
    },
  );
}

/**
 * resolveAll in one statement, when every resolution names its pending transfer as it was made:
 * undefined, with nothing written, when one does not name it so or does not plan against it (the
 * read that follows then says what is wrong, if anything).
 */
async function recordAsReserved(tx: Db, reqs: readonly Resolution[]): Promise<Recorded | undefined> {
  const reserved = reqs.flatMap((req) => (req.reserved ? [req.reserved] : []));
  if (reserved.length !== reqs.length) return undefined;
  let movements: Movement[];
  try {
    movements = reqs.flatMap((req) => movementsOf(plannedTransfers(req, req.reserved), req.reserved!));
  } catch {
    return undefined;
  }
  return recordIfReserved(tx, movements, reserved);
}

function requireResolution(req: Resolution): void {
  requireId(req.id);
  if (req.reserved !== undefined && req.reserved.id !== req.pendingId) throw new InvalidTransferError(`the pending transfer given is ${req.reserved.id}, not ${req.pendingId}`);
  if (req.amount !== undefined) requireAmount(req.amount, true);
}

/** The resolution's transfers (the post or void first, then the payouts), checked against its pending transfer. */
function plannedTransfers(req: Resolution, pending: NewTransfer | null | undefined): NewTransfer[] {
  if (!pending || pending.kind !== "pending") throw new PendingTransferNotFoundError(req.pendingId);
  const amount = req.post ? (req.amount ?? pending.amount) : pending.amount;
  if (amount > pending.amount) throw new ExceedsPendingAmountError(req.pendingId, pending.amount, amount);
  const primary: NewTransfer = {
    id: req.id,
    kind: req.post ? "post_pending" : "void_pending",
    debitAccountId: pending.debitAccountId,
    creditAccountId: pending.creditAccountId,
    amount,
    pendingId: pending.id,
    code: req.code ?? pending.code,
    reference: pending.reference,
  };
  return [primary, ...payoutTransfers(req, pending, amount)];
}

/** The whole reserved amount leaves the pending totals with the first transfer, the post or void. */
function movementsOf(planned: readonly NewTransfer[], pending: NewTransfer): Movement[] {
  return planned.map((transfer, i) => ({ transfer, pendingAmount: i === 0 ? pending.amount : 0n }));
}

function payoutTransfers(req: Resolution, pending: NewTransfer, posted: bigint): NewTransfer[] {
  if (req.payouts.length === 0) return [];
  if (!req.post) throw new InvalidTransferError("a void has nothing to pay out");
  let total = 0n;
  const transfers: NewTransfer[] = [];
  req.payouts.forEach((p, i) => {
    requireAmount(p.amount, true);
    if (p.accountId === pending.creditAccountId) throw new InvalidTransferError("a payout back to the holding account");
    total += p.amount;
    if (p.amount === 0n) return;
    transfers.push({
      id: `${req.id}:${i + 1}`,
      kind: "posted",
      debitAccountId: pending.creditAccountId,
      creditAccountId: p.accountId,
      amount: p.amount,
      pendingId: null,
      code: p.code,
      reference: pending.reference,
    });
  });
  if (total !== posted) throw new InvalidTransferError(`payouts add up to ${total}, ${posted} posted`);
  return transfers;
}
