/**
 * The ledger's tables. The rules that must hold whatever code runs are stated here, so the
 * database refuses a broken write even if a bug slips past the checks in ./transfers.ts:
 * totals never negative, a limited account never overdrawn, transfers never changed or removed,
 * a pending transfer resolved (posted or voided) at most once. That a transfer's accounts exist
 * is checked by ./apply.ts and by the invariants instead (migration 002 says why).
 */
import type { Migration } from "../store/index.ts";

export const LEDGER_MIGRATIONS: readonly Migration[] = [
  {
    id: "ledger/001_accounts_and_transfers",
    sql: `
CREATE TABLE ledger_accounts (
  id text PRIMARY KEY,
  code text NOT NULL,
  debits_must_not_exceed_credits boolean NOT NULL DEFAULT false,
  debits_pending bigint NOT NULL DEFAULT 0 CHECK (debits_pending >= 0),
  debits_posted bigint NOT NULL DEFAULT 0 CHECK (debits_posted >= 0),
  credits_pending bigint NOT NULL DEFAULT 0 CHECK (credits_pending >= 0),
  credits_posted bigint NOT NULL DEFAULT 0 CHECK (credits_posted >= 0),
  created_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT ledger_accounts_debits_within_credits
    CHECK (NOT debits_must_not_exceed_credits OR debits_pending + debits_posted <= credits_posted)
);

CREATE TABLE ledger_transfers (
  seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  id text PRIMARY KEY,
  kind text NOT NULL CHECK (kind IN ('posted', 'pending', 'post_pending', 'void_pending')),
  debit_account_id text NOT NULL REFERENCES ledger_accounts (id),
  credit_account_id text NOT NULL REFERENCES ledger_accounts (id),
  amount bigint NOT NULL CHECK (amount >= 0),
  pending_id text REFERENCES ledger_transfers (id),
  code text NOT NULL,
  reference text,
  created_at timestamptz NOT NULL DEFAULT now(),
  CHECK (debit_account_id <> credit_account_id),
  CHECK ((kind IN ('post_pending', 'void_pending')) = (pending_id IS NOT NULL)),
  CHECK (kind IN ('post_pending', 'void_pending') OR amount > 0)
);

-- The state of a pending transfer is derived: it is resolved exactly when a transfer names it.
CREATE UNIQUE INDEX ledger_transfers_resolve_once ON ledger_transfers (pending_id) WHERE pending_id IS NOT NULL;
CREATE INDEX ledger_transfers_by_debit ON ledger_transfers (debit_account_id, seq);
CREATE INDEX ledger_transfers_by_credit ON ledger_transfers (credit_account_id, seq);
CREATE INDEX ledger_transfers_by_reference ON ledger_transfers (reference, seq) WHERE reference IS NOT NULL;

CREATE FUNCTION ledger_transfers_are_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'ledger transfers are immutable (% refused)', TG_OP USING ERRCODE = 'restrict_violation';
END
$$;
CREATE TRIGGER ledger_transfers_immutable BEFORE UPDATE OR DELETE ON ledger_transfers
  FOR EACH ROW EXECUTE FUNCTION ledger_transfers_are_immutable();

-- The system's shared accounts exist from the start; per-user ones are created on demand.
INSERT INTO ledger_accounts (id, code) VALUES ('funding', 'funding'), ('treasury', 'treasury');
`,
    // The same tables, with the references 002 drops left out from the start. The order of
    // transfers is the table's rowid (seq), which only grows: transfers are never deleted.
    sqlite: `
CREATE TABLE ledger_accounts (
  id text PRIMARY KEY,
  code text NOT NULL,
  debits_must_not_exceed_credits boolean NOT NULL DEFAULT false,
  debits_pending bigint NOT NULL DEFAULT 0 CHECK (debits_pending >= 0),
  debits_posted bigint NOT NULL DEFAULT 0 CHECK (debits_posted >= 0),
  credits_pending bigint NOT NULL DEFAULT 0 CHECK (credits_pending >= 0),
  credits_posted bigint NOT NULL DEFAULT 0 CHECK (credits_posted >= 0),
  created_at timestamptz NOT NULL DEFAULT (now()),
  CONSTRAINT ledger_accounts_debits_within_credits
    CHECK (NOT debits_must_not_exceed_credits OR debits_pending + debits_posted <= credits_posted)
);

CREATE TABLE ledger_transfers (
  seq INTEGER PRIMARY KEY,
  id text NOT NULL UNIQUE,
  kind text NOT NULL CHECK (kind IN ('posted', 'pending', 'post_pending', 'void_pending')),
  debit_account_id text NOT NULL,
  credit_account_id text NOT NULL,
  amount bigint NOT NULL CHECK (amount >= 0),
  pending_id text,
  code text NOT NULL,
  reference text,
  created_at timestamptz NOT NULL DEFAULT (now()),
  CHECK (debit_account_id <> credit_account_id),
  CHECK ((kind IN ('post_pending', 'void_pending')) = (pending_id IS NOT NULL)),
  CHECK (kind IN ('post_pending', 'void_pending') OR amount > 0)
);

CREATE UNIQUE INDEX ledger_transfers_resolve_once ON ledger_transfers (pending_id) WHERE pending_id IS NOT NULL;
CREATE INDEX ledger_transfers_by_debit ON ledger_transfers (debit_account_id, seq);
CREATE INDEX ledger_transfers_by_credit ON ledger_transfers (credit_account_id, seq);
CREATE INDEX ledger_transfers_by_reference ON ledger_transfers (reference, seq) WHERE reference IS NOT NULL;

CREATE TRIGGER ledger_transfers_no_update BEFORE UPDATE ON ledger_transfers
BEGIN SELECT RAISE(ABORT, 'ledger transfers are immutable (UPDATE refused)'); END;
CREATE TRIGGER ledger_transfers_no_delete BEFORE DELETE ON ledger_transfers
BEGIN SELECT RAISE(ABORT, 'ledger transfers are immutable (DELETE refused)'); END;

INSERT INTO ledger_accounts (id, code) VALUES ('funding', 'funding'), ('treasury', 'treasury');
`,
  },
  {
    // A foreign key is checked by a query of its own for every row inserted: on PGlite a
    // transfer's three would cost about as much as the rest of its insert.
    // What they guarded is checked anyway: the one statement that records transfers updates every
    // account they name and refuses the operation when one is missing (./apply.ts), a resolution
    // is recorded only after its pending transfer was read (./pending.ts), and checkInvariants
    // reports a transfer naming an account or a pending transfer that does not exist.
    id: "ledger/002_references_checked_by_the_ledger",
    sql: `
ALTER TABLE ledger_transfers
  DROP CONSTRAINT ledger_transfers_debit_account_id_fkey,
  DROP CONSTRAINT ledger_transfers_credit_account_id_fkey,
  DROP CONSTRAINT ledger_transfers_pending_id_fkey;
`,
    sqlite: "-- SQLite's tables were made without these references (001).",
  },
];
