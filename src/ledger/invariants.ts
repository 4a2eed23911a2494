/**
 * The ledger's invariants, checked from scratch over every account and transfer:
 *
 *   balanced               all debits equal all credits, pending and posted separately
 *   within_credits         no limited account (wallet) has debited more than it was credited
 *   totals_match_transfers each account's four running totals equal the sum of its transfers
 *   resolution_matches     every post or void names a pending transfer on the same two accounts,
 *                          posts at most its amount, and a void releases exactly its amount
 *   references_exist       every account and pending transfer a transfer names exists (the table
 *                          has no foreign keys: ./schema.ts)
 *
 * One statement, so it reads one snapshot and gives no false alarms while transfers commit, in
 * SQL that PostgreSQL and SQLite both read. It scans everything: for tests, audits and an admin command, not for a request path.
 */
import type { Db } from "../store/index.ts";

export type Invariant = "balanced" | "within_credits" | "totals_match_transfers" | "resolution_matches" | "references_exist";

export interface InvariantViolation {
  invariant: Invariant;
  accountId: string | null;
  transferId: string | null;
  detail: string;
}

const CHECK_INVARIANTS = `
WITH legs AS (
  SELECT t.debit_account_id AS account_id,
         CASE WHEN t.kind = 'pending' AND r.id IS NULL THEN t.amount ELSE 0 END AS dp,
         CASE WHEN t.kind IN ('posted', 'post_pending') THEN t.amount ELSE 0 END AS dpo,
         CAST(0 AS bigint) AS cp, CAST(0 AS bigint) AS cpo
  FROM ledger_transfers t LEFT JOIN ledger_transfers r ON r.pending_id = t.id
  UNION ALL
  SELECT t.credit_account_id, 0, 0,
         CASE WHEN t.kind = 'pending' AND r.id IS NULL THEN t.amount ELSE 0 END,
         CASE WHEN t.kind IN ('posted', 'post_pending') THEN t.amount ELSE 0 END
  FROM ledger_transfers t LEFT JOIN ledger_transfers r ON r.pending_id = t.id
),
sums AS (
  SELECT account_id, sum(dp) AS dp, sum(dpo) AS dpo, sum(cp) AS cp, sum(cpo) AS cpo FROM legs GROUP BY account_id
),
expected AS (
  SELECT a.*, coalesce(s.dp, 0) AS e_dp, coalesce(s.dpo, 0) AS e_dpo, coalesce(s.cp, 0) AS e_cp, coalesce(s.cpo, 0) AS e_cpo
  FROM ledger_accounts a LEFT JOIN sums s ON s.account_id = a.id
),
totals AS (
  SELECT coalesce(sum(debits_pending), 0) AS dp, coalesce(sum(credits_pending), 0) AS cp,
         coalesce(sum(debits_posted), 0) AS dpo, coalesce(sum(credits_posted), 0) AS cpo
  FROM ledger_accounts
)
SELECT 'balanced' AS invariant, NULL AS account_id, NULL AS transfer_id,
       format('pending debits %s, pending credits %s', dp, cp) AS detail
FROM totals WHERE dp <> cp
UNION ALL
SELECT 'balanced', NULL, NULL, format('posted debits %s, posted credits %s', dpo, cpo)
FROM totals WHERE dpo <> cpo
UNION ALL
SELECT 'within_credits', id, NULL,
       format('debits pending %s + posted %s exceed credits posted %s', debits_pending, debits_posted, credits_posted)
FROM ledger_accounts
WHERE debits_must_not_exceed_credits AND debits_pending + debits_posted > credits_posted
UNION ALL
SELECT 'totals_match_transfers', id, NULL,
       format('debits pending/posted %s/%s, credits pending/posted %s/%s; transfers give %s/%s, %s/%s',
              debits_pending, debits_posted, credits_pending, credits_posted, e_dp, e_dpo, e_cp, e_cpo)
FROM expected
WHERE debits_pending <> e_dp OR debits_posted <> e_dpo OR credits_pending <> e_cp OR credits_posted <> e_cpo
UNION ALL
SELECT 'resolution_matches', NULL, r.id,
       format('%s of %s (%s) for %s does not match the pending transfer', r.kind, r.pending_id, p.kind, r.amount)
FROM ledger_transfers r JOIN ledger_transfers p ON p.id = r.pending_id
WHERE p.kind <> 'pending'
   OR p.debit_account_id <> r.debit_account_id OR p.credit_account_id <> r.credit_account_id
   OR (r.kind = 'post_pending' AND r.amount > p.amount)
   OR (r.kind = 'void_pending' AND r.amount <> p.amount)
UNION ALL
SELECT 'references_exist', NULL, t.id, format('names account %s, which does not exist', t.debit_account_id)
FROM ledger_transfers t
WHERE NOT EXISTS (SELECT 1 FROM ledger_accounts a WHERE a.id = t.debit_account_id)
UNION ALL
SELECT 'references_exist', NULL, t.id, format('names account %s, which does not exist', t.credit_account_id)
FROM ledger_transfers t
WHERE NOT EXISTS (SELECT 1 FROM ledger_accounts a WHERE a.id = t.credit_account_id)
UNION ALL
SELECT 'references_exist', NULL, r.id, format('resolves %s, which does not exist', r.pending_id)
FROM ledger_transfers r
WHERE r.pending_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM ledger_transfers p WHERE p.id = r.pending_id)`;

/** Every violation found; an empty list means the ledger is healthy. */
export async function checkInvariants(db: Db): Promise<InvariantViolation[]> {
  const rows = await db.query<{ invariant: Invariant; account_id: string | null; transfer_id: string | null; detail: string }>(
    CHECK_INVARIANTS,
  );
  return rows.map((r) => ({ invariant: r.invariant, accountId: r.account_id, transferId: r.transfer_id, detail: r.detail }));
}
