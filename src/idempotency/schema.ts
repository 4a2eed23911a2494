/** The idempotency part's table: one row per wallet and `Idempotency-Key`, kept 24 hours. */
export const IDEMPOTENCY_MIGRATIONS = [
  {
    id: "idempotency/001_keys",
    sql: `
      CREATE TABLE idempotency_keys (
        wallet text NOT NULL,
        key text NOT NULL,
        -- The request the key was first used with: its method, path and canonical body, hashed.
        fingerprint text NOT NULL,
        -- A token of the request holding the key: only it records the outcome or lets the key go.
        claim text NOT NULL,
        -- The job the request started (a completion's), once admitted.
        job_id text,
        -- What the request answered, as JSON text (a caller's text may hold a lone surrogate,
        -- which JSON escapes and jsonb refuses). Null while the request runs.
        outcome text,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        -- One row per key and wallet, whatever the route: the insert that claims a key is what
        -- keeps two concurrent requests, on one node or two, from both running.
        PRIMARY KEY (wallet, key)
      );
      CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
    `,
    sqlite: `
      CREATE TABLE idempotency_keys (
        wallet text NOT NULL,
        key text NOT NULL,
        fingerprint text NOT NULL,
        claim text NOT NULL,
        job_id text,
        outcome text,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        PRIMARY KEY (wallet, key)
      );
      CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
    `,
  },
];
