/**
 * The ledger's running totals summed over each kind of account: what every wallet can still spend,
 * what escrow holds, what workers and the treasury were paid, what came in and went out. One
 * statement over the accounts (one row per wallet, escrow and worker), never over the transfers:
 * cheap enough to read at each metrics scrape.
 */
import type { Db } from "../store/index.ts";
import type { AccountCode } from "./types.ts";

/** The four running totals of the accounts of one code, summed. Amounts are USDC base units. */
export interface CodeTotals {
  debitsPending: bigint;
  debitsPosted: bigint;
  creditsPending: bigint;
  creditsPosted: bigint;
}

const NONE: CodeTotals = { debitsPending: 0n, debitsPosted: 0n, creditsPending: 0n, creditsPosted: 0n };

/** Every account code's summed totals; a code with no account yet sums to zeros. */
export async function ledgerTotals(db: Db): Promise<Record<AccountCode, CodeTotals>> {
  const rows = await db.query<{ code: AccountCode; dp: string; dpo: string; cp: string; cpo: string }>(
    `SELECT code, CAST(sum(debits_pending) AS text) AS dp, CAST(sum(debits_posted) AS text) AS dpo,
            CAST(sum(credits_pending) AS text) AS cp, CAST(sum(credits_posted) AS text) AS cpo
       FROM ledger_accounts GROUP BY code`,
  );
  const totals: Record<AccountCode, CodeTotals> = { wallet: NONE, escrow: NONE, worker: NONE, treasury: NONE, funding: NONE };
  for (const r of rows) totals[r.code] = { debitsPending: BigInt(r.dp), debitsPosted: BigInt(r.dpo), creditsPending: BigInt(r.cp), creditsPosted: BigInt(r.cpo) };
  return totals;
}
