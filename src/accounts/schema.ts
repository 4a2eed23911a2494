/** Tables owned by the accounts part: wallets and their API keys. */
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
  },
];
