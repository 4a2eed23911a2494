/** Tables owned by the accounts part: wallets and their API keys. */

/** The channel a changed API key's hash is sent on (NOTIFY), to every node. */
export const API_KEY_CHANGES = "svc_api_key_changes";
/** The payload that says every key changed (the table was truncated, on PostgreSQL); a key's hash is hex, never this. */
export const EVERY_API_KEY = "*";

export const ACCOUNTS_MIGRATIONS = [
  {
    id: "accounts/001_wallets_and_keys",
    sql: `
      CREATE TABLE wallets (
        address text PRIMARY KEY,
        created_at timestamptz NOT NULL DEFAULT now(),
        last_topup_at timestamptz,
        credit_low_threshold integer NOT NULL DEFAULT 100
      );
      -- Only the SHA-256 of a key is stored. Keys carry ~190 bits of randomness, so a plain hash
      -- cannot be reversed, and looking a key up by its hash compares no secret in variable time.
      CREATE TABLE api_keys (
        key_hash text PRIMARY KEY,
        wallet text NOT NULL REFERENCES wallets (address),
        created_at timestamptz NOT NULL DEFAULT now(),
        revoked_at timestamptz,
        suspended_at timestamptz
      );
      CREATE UNIQUE INDEX api_keys_one_live_key_per_wallet ON api_keys (wallet) WHERE revoked_at IS NULL;
    `,
    // SQLite lets a text primary key hold NULL unless told otherwise; PostgreSQL never does.
    sqlite: `
      CREATE TABLE wallets (
        address text NOT NULL PRIMARY KEY,
        created_at timestamptz NOT NULL DEFAULT (now()),
        last_topup_at timestamptz,
        credit_low_threshold integer NOT NULL DEFAULT 100
      );
      CREATE TABLE api_keys (
        key_hash text NOT NULL PRIMARY KEY,
        wallet text NOT NULL CONSTRAINT api_keys_wallet_fkey REFERENCES wallets (address),
        created_at timestamptz NOT NULL DEFAULT (now()),
        revoked_at timestamptz,
        suspended_at timestamptz
      );
      CREATE UNIQUE INDEX api_keys_one_live_key_per_wallet ON api_keys (wallet) WHERE revoked_at IS NULL;
    `,
  },
  {
    // Every node keeps the keys it recently accepted (api-key-cache.ts); a key revoked, suspended
    // or deleted, by this service or by hand, tells every node listening, once it commits.
    id: "accounts/002_api_key_changes",
    sql: `
      CREATE FUNCTION notify_api_key_change() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM pg_notify('${API_KEY_CHANGES}', CASE WHEN TG_OP = 'TRUNCATE' THEN '${EVERY_API_KEY}' ELSE OLD.key_hash END);
        RETURN NULL;
      END
      $$;
      CREATE TRIGGER api_key_changed AFTER UPDATE OR DELETE ON api_keys
        FOR EACH ROW EXECUTE FUNCTION notify_api_key_change();
      CREATE TRIGGER api_keys_truncated AFTER TRUNCATE ON api_keys
        FOR EACH STATEMENT EXECUTE FUNCTION notify_api_key_change();
    `,
    // A trigger of SQLite's fires on one event, and SQLite has no TRUNCATE: a DELETE of every
    // row fires the row trigger for each (a row trigger turns off its truncate shortcut).
    sqlite: `
      CREATE TRIGGER api_key_changed AFTER UPDATE ON api_keys
      BEGIN SELECT pg_notify('${API_KEY_CHANGES}', OLD.key_hash); END;
      CREATE TRIGGER api_key_deleted AFTER DELETE ON api_keys
      BEGIN SELECT pg_notify('${API_KEY_CHANGES}', OLD.key_hash); END;
    `,
  },
];
