/** Credits a wallet receives: a deposit into its balance, and the list of its latest ones. */
import { creditsToBaseUnits } from "../core/index.ts";
import * as ledger from "../ledger/index.ts";
import type { Db } from "../store/index.ts";
import { availableAfter, toCredits } from "./balance.ts";

/** Credit a wallet with funds that arrived on-chain (`reference`: the deposit's signature); returns its credits now available. */
export async function deposit(db: Db, wallet: string, credits: number, reference: string): Promise<number> {
  await ledger.ensureWalletAccounts(db, wallet);
  const result = await ledger.transfer(db, {
    id: `deposit:${reference}`,
    debitAccountId: ledger.FUNDING_ACCOUNT,
    creditAccountId: ledger.walletAccountId(wallet),
    amount: creditsToBaseUnits(credits),
    code: "deposit",
    reference,
  });
  return availableAfter(result, wallet);
}

/** The wallet's latest deposits, newest first: credits added, when, and the deposit's transaction. */
export async function recentDeposits(db: Db, wallet: string, limit: number): Promise<{ credits: number; at: Date; depositTx: string | null }[]> {
  const transfers = await ledger.listTransfers(db, { accountId: ledger.walletAccountId(wallet), code: "deposit", limit, newestFirst: true });
  return transfers.map((t) => ({ credits: toCredits(t.amount), at: t.createdAt, depositTx: t.reference }));
}
