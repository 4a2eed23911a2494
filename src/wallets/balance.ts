/** A wallet's balance: the credits it can spend, and the credit.low rule that watches them. */
import { recordCreditLowSide } from "../accounts/index.ts";
import { baseUnitsToCredits } from "../core/index.ts";
import { emitCreditLow } from "../events/index.ts";
import * as ledger from "../ledger/index.ts";
import type { Db } from "../store/index.ts";

export function toCredits(units: bigint): number {
  return baseUnitsToCredits(units);
}

/** Credits the wallet can spend now: its balance less what running jobs hold in escrow. */
export async function availableCredits(db: Db, wallet: string): Promise<number> {
  const account = await ledger.getAccount(db, ledger.walletAccountId(wallet));
  return account ? toCredits(account.available) : 0;
}

/**
 * The wallet's available credits as a ledger operation left them: every operation returns the
 * accounts it changed, so a balance just changed is never read again.
 */
export function availableAfter(result: { accounts: ledger.Account[] }, wallet: string): number {
  const account = result.accounts.find((a) => a.id === ledger.walletAccountId(wallet));
  if (!account) throw new Error(`a ledger operation on wallet ${wallet} did not report its account`);
  return toCredits(account.available);
}

/**
 * The credit.low rule (spec "Events"), called in the transaction of every change of a wallet's
 * available credits, after that change's own event. It fires when the balance goes from at or
 * above the wallet's threshold to below it, once; a later change that leaves it at or above the
 * threshold re-arms it. Only a change that lowered the balance (`fell`: a reservation, a
 * withdrawal) can fire it: a deposit that leaves a new wallet below the threshold has not crossed.
 */
export async function checkCreditLow(tx: Db, wallet: string, creditsRemaining: number, fell: boolean): Promise<void> {
  const side = await recordCreditLowSide(tx, wallet, creditsRemaining);
  if (side?.below && fell) await emitCreditLow(tx, { wallet, creditsRemaining, thresholdCredits: side.thresholdCredits });
}
