/**
 * How jobs move credits, through the ledger's own recipe (src/ledger/settle.ts): a job reserves
 * its lock as a pending transfer from the wallet to the wallet's escrow account; recording its
 * settlement transaction posts the charge (chargeAll), and the settlement's confirmation pays it
 * out to the worker and the treasury (payOutAll); a job that charges nothing voids the
 * reservation, and a charge whose settlement the chain refused goes back (refund). Transfer ids
 * derive from the job id, so a step repeated after a crash is recognised by the ledger instead of
 * applied twice.
 */
import { baseUnitsToCredits, creditsToBaseUnits, splitPayout } from "../core/index.ts";
import type { CreditLowSides } from "../accounts/index.ts";
import type { CreditLowFacts } from "../events/index.ts";
import * as ledger from "../ledger/index.ts";
import type { CombinedStatement, Db } from "../store/index.ts";
import { availableAfter, availableCredits, checkCreditLow, toCredits } from "../wallets/index.ts";
import type { JobRecord } from "./job-record.ts";

// A job's credits come from its wallet's balance, which the wallets part keeps.
export { availableCredits, checkCreditLow, toCredits };

export const workerAccount = ledger.workerAccountId;

const reservationId = (jobId: string) => `reserve:${jobId}`;
const chargeId = (jobId: string) => `charge:${jobId}`;

/**
 * Lock a job's credits. Throws ledger.ExceedsCreditsError when the wallet cannot cover them, and
 * ledger.AccountNotFoundError for a wallet that never received a deposit (its accounts exist from
 * its first one). Returns the wallet's credits available after the lock.
 */
export async function reserve(db: Db, wallet: string, jobId: string, credits: number): Promise<number> {
  const result = await ledger.reserve(db, reservation({ wallet, jobId, credits }));
  return availableAfter(result, wallet);
}

/** A job's lock as the ledger reserves it: charging names it so (ledger.Resolution `reserved`). */
function reservation(lock: { wallet: string; jobId: string; credits: number }): ledger.ReserveInput {
  return { id: reservationId(lock.jobId), wallet: lock.wallet, amount: creditsToBaseUnits(lock.credits), reference: lock.jobId };
}

/**
 * Lock several jobs' credits as one ledger operation (ledger.reserveAll): all of them, or none
 * with the error `reserve` would throw for the wallet that cannot cover its share. Returns each
 * job's credits available after its own lock, as if the locks were taken one by one in order.
 */
export async function reserveAll(db: Db, locks: readonly { wallet: string; jobId: string; credits: number }[]): Promise<number[]> {
  const accounts = await ledger.reserveAll(db, locks.map(reservation));
  return availableAfterEach(accounts, locks.map((lock) => ({ wallet: lock.wallet, change: -lock.credits })));
}

/** Whether `error` is the ledger refusing a reservation: the wallet cannot cover it, or has no accounts yet. */
export function isRefusal(error: unknown): boolean {
  return error instanceof ledger.ExceedsCreditsError || error instanceof ledger.AccountNotFoundError;
}

/**
 * Charge several jobs whose settlement transactions are being recorded, as one ledger operation
 * (ledger.resolveAll, one statement): each reservation is posted for the job's charge, the rest of
 * its lock goes back to the wallet, and the charge waits in the wallet's escrow account until the
 * settlement confirms (payOutAll) or is refused (refund). All or none, with an error after which the caller
 * charges them one by one. Returns each job's credits available after its own charge, as if they
 * were charged one by one in order.
 */
export async function chargeAll(db: Db, jobs: readonly JobRecord[]): Promise<number[]> {
  // Each reservation as admission made it: the ledger checks it in the statement that charges.
  const reserved = (job: JobRecord) => ledger.reservedTransfer(reservation({ wallet: job.wallet, jobId: job.id, credits: job.creditsLocked }));
  const accounts = await ledger.resolveAll(db, jobs.map((job) => ({ ...resolution(job), payouts: [], reserved: reserved(job) })));
  // A charge gives back the part of the lock it did not use.
  return availableAfterEach(accounts, jobs.map((job) => ({ wallet: job.wallet, change: job.creditsLocked - chargedOf(job) })));
}

/**
 * Pay the worker and the treasury their shares of jobs whose settlements confirmed, as the
 * program paid them: preparePayOuts, then payOuts.
 */
export async function payOutAll(db: Db, jobs: readonly JobRecord[]): Promise<void> {
  await payOuts(db, (await preparePayOuts(db, jobs)).charged);
}

/** What paying out needs before it touches a shared account: the charges to pay, and the wallets' credits. */
export interface PayOutsPrepared {
  /** The jobs whose charges wait in their wallets' escrow accounts, for payOuts. */
  charged: JobRecord[];
  /** Each wallet's credits available, by address: paying out a charge does not change them. */
  available: Map<string, number>;
}

/**
 * The part of paying out that touches no shared account: each worker's account made sure of, and
 * a job whose reservation is still pending (recorded before charges were posted with the
 * settlement's record) charged and paid out at once. The workers' and the wallets' accounts are
 * read in one statement. The jobs in `postedAtRecord` had their charges posted by their
 * settlements' records, as every job recorded by this version's drivers has: their reservations
 * are not read again.
 */
export async function preparePayOuts(db: Db, jobs: readonly JobRecord[], postedAtRecord: ReadonlySet<string> = new Set()): Promise<PayOutsPrepared> {
  const workers = [...new Set(jobs.flatMap((job) => (job.workerAddress === null ? [] : [job.workerAddress])))];
  const wallets = [...new Set(jobs.map((job) => job.wallet))];
  const accounts = await ledger.getAccounts(db, [...workers.map(ledger.workerAccountId), ...wallets.map(ledger.walletAccountId)]);
  for (const address of workers) await ledger.ensureWorkerAccount(db, address, accounts.get(ledger.workerAccountId(address)) ?? null);
  const unknown = jobs.filter((job) => !postedAtRecord.has(job.id));
  const reservations = unknown.length > 0 ? await ledger.getTransfers(db, unknown.map((job) => reservationId(job.id))) : new Map<string, ledger.Transfer>();
  const unposted = unknown.filter((job) => reservations.get(reservationId(job.id))?.pendingState === "pending");
  // Posting a charge gives the rest of its lock back: those wallets' accounts as the posts left them.
  if (unposted.length > 0) for (const account of await ledger.resolveAll(db, unposted.map(resolution))) accounts.set(account.id, account);
  return {
    charged: jobs.filter((job) => !unposted.includes(job) && chargedOf(job) > 0),
    available: new Map(wallets.map((wallet) => [wallet, toCredits(accounts.get(ledger.walletAccountId(wallet))?.available ?? 0n)])),
  };
}

/**
 * The charges of `charged` (preparePayOuts) paid from escrow to the workers and the treasury, in
 * one ledger operation. It locks the treasury's row, which every settlement of every gateway
 * node shares, until the caller's transaction ends: the last statement before its commit.
 */
export async function payOuts(db: Db, charged: readonly JobRecord[]): Promise<void> {
  await ledger.payOutAll(db, charged.map((job) => ({ id: chargeId(job.id), wallet: job.wallet, payouts: resolution(job).payouts, reference: job.id })));
}

/**
 * Each of a batch's changes' wallet balance right after it, as if applied one by one in order:
 * walking back from what the whole batch left, before a change the balance was `change` less.
 */
function availableAfterEach(accounts: ledger.Account[], changes: readonly { wallet: string; change: number }[]): number[] {
  const available = new Map(changes.map(({ wallet }) => [wallet, availableAfter({ accounts }, wallet)]));
  const after: number[] = [];
  for (let i = changes.length - 1; i >= 0; i--) {
    const { wallet, change } = changes[i]!;
    after[i] = available.get(wallet)!;
    available.set(wallet, after[i]! - change);
  }
  return after;
}

/** What `settle` records for the job: the charge and its payouts, or for a job that charges nothing, the reservation voided. */
function resolution(job: JobRecord): ledger.Resolution {
  if (chargedOf(job) === 0) return { id: `release:${job.id}`, pendingId: reservationId(job.id), post: false, payouts: [] };
  const { worker, treasury } = splitPayout(job.creditsCharged, job.workerStaked);
  return {
    id: chargeId(job.id),
    pendingId: reservationId(job.id),
    post: true,
    amount: creditsToBaseUnits(job.creditsCharged),
    code: "charge",
    payouts: [
      { accountId: ledger.workerAccountId(job.workerAddress!), amount: worker, code: "worker_payout" },
      { accountId: ledger.TREASURY_ACCOUNT, amount: treasury, code: "protocol_fee" },
    ],
  };
}

function chargedOf(job: JobRecord): number {
  return job.workerAddress === null ? 0 : job.creditsCharged;
}

/**
 * Return what a job holds to its wallet: its whole reservation, or, when its charge was posted
 * and its settlement then refused, that charge. Returns the wallet's credits available after.
 */
export async function refund(db: Db, job: Pick<JobRecord, "id" | "wallet">): Promise<number> {
  try {
    return availableAfter(await ledger.voidPending(db, { id: `release:${job.id}`, pendingId: reservationId(job.id) }), job.wallet);
  } catch (error) {
    if (!(error instanceof ledger.PendingTransferResolvedError) || error.state !== "posted") throw error;
  }
  const charge = await ledger.getTransfer(db, chargeId(job.id));
  if (!charge) throw new Error(`job ${job.id}'s reservation was posted with no charge`);
  const result = await ledger.returnCharge(db, { id: `return:${job.id}`, wallet: job.wallet, amount: charge.amount, reference: job.id });
  return availableAfter(result, job.wallet);
}

const bondId = (jobId: string) => `dispute_bond:${jobId}`;

/**
 * Holds a dispute's bond from the wallet's credits, pending towards the treasury, as the program
 * holds it in its pool; ledger.ExceedsCreditsError when the wallet cannot cover it. Run it last in
 * the dispute's transaction (it locks the wallet's account).
 */
export async function holdDisputeBond(tx: Db, wallet: string, jobId: string, credits: number): Promise<void> {
  const held = await ledger.transfer(tx, {
    id: bondId(jobId),
    debitAccountId: ledger.walletAccountId(wallet),
    creditAccountId: ledger.TREASURY_ACCOUNT,
    amount: creditsToBaseUnits(credits),
    pending: true,
    code: "dispute_bond",
    reference: jobId,
  });
  await checkCreditLow(tx, wallet, availableAfter(held, wallet), true);
}

/**
 * Ends a dispute's bond as its outcome does on-chain: forfeited, posted to the treasury; otherwise
 * released to the wallet. A dispute that holds no bond has nothing to end.
 */
export async function endDisputeBond(tx: Db, job: Pick<JobRecord, "id" | "wallet">, forfeited: boolean): Promise<void> {
  if (!(await ledger.getTransfer(tx, bondId(job.id)))) return;
  const end = { id: `${bondId(job.id)}:${forfeited ? "forfeited" : "returned"}`, pendingId: bondId(job.id) };
  if (forfeited) return void (await ledger.postPending(tx, end));
  await checkCreditLow(tx, job.wallet, availableAfter(await ledger.voidPending(tx, end), job.wallet), false);
}

/**
 * The credit.low rule as checkCreditLow applies it, for a run of changes in order, over the
 * wallets' flags the caller locked (accounts.lockCreditLowSides): for each change, the event's
 * facts when it fires, for the caller to write after that change's own event. The flags it flips
 * are written as a step of the caller's `statement`.
 */
export function creditLowCrossings(statement: CombinedStatement, sides: CreditLowSides, changes: readonly CreditLowChange[]): (CreditLowFacts | undefined)[] {
  const answers = sides.answer(changes.map((c) => ({ wallet: c.wallet, availableCredits: c.creditsRemaining })));
  sides.addWrite(statement);
  return changes.map(({ wallet, creditsRemaining, fell }, i) => {
    const answer = answers[i];
    return answer?.below && fell ? { wallet, creditsRemaining, thresholdCredits: answer.thresholdCredits } : undefined;
  });
}

export interface CreditLowChange {
  wallet: string;
  creditsRemaining: number;
  /** The change lowered the balance (a reservation, a withdrawal): only such a change fires the event. */
  fell: boolean;
}

/** Every job's reservation as the ledger holds it, by job id: the credits locked and whether it is pending, posted or voided. */
export async function jobReservations(db: Db): Promise<Map<string, { credits: number; state: ledger.PendingState }>> {
  const transfers = await ledger.listTransfers(db, { code: "reserve", kind: "pending" });
  return new Map(transfers.map((t) => [t.reference ?? t.id, { credits: toCredits(t.amount), state: t.pendingState ?? "pending" }]));
}

/** Every job's charge in credits, by job id: posted and not given back. */
export async function jobCharges(db: Db): Promise<Map<string, number>> {
  const charges = new Map<string, number>();
  for (const t of await ledger.listTransfers(db, { code: "charge" })) charges.set(t.pendingId?.replace(/^reserve:/, "") ?? t.id, toCredits(t.amount));
  for (const t of await ledger.listTransfers(db, { code: "charge_returned" })) {
    const jobId = t.reference ?? t.id;
    const left = (charges.get(jobId) ?? 0) - toCredits(t.amount);
    if (left === 0) charges.delete(jobId);
    else charges.set(jobId, left);
  }
  return charges;
}
