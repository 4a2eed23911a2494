/**
 * Tables of the web app's server side: sign-in nonces and wallet sessions. They take the place of
 * the bearer-token challenge and session tables that migration events/001 creates, which
 * web/001 drops.
 */
export const WEB_MIGRATIONS = [
  {
    id: "web/001_sign_in",
    sql: `
      DROP TABLE IF EXISTS app_challenges;
      DROP TABLE IF EXISTS app_sessions;
      -- A nonce is handed out before the wallet signs and used up by the sign-in that names it.
      CREATE TABLE web_sign_in_nonces (
        nonce text PRIMARY KEY,
        expires_at timestamptz NOT NULL
      );
      CREATE INDEX web_sign_in_nonces_by_expiry ON web_sign_in_nonces (expires_at);
      -- Only a SHA-256 of the session cookie's value is stored.
      CREATE TABLE web_sessions (
        token_hash text PRIMARY KEY,
        wallet text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz NOT NULL
      );
      CREATE INDEX web_sessions_by_wallet ON web_sessions (wallet);
    `,
    sqlite: `
      DROP TABLE IF EXISTS app_challenges;
      DROP TABLE IF EXISTS app_sessions;
      CREATE TABLE web_sign_in_nonces (
        nonce text NOT NULL PRIMARY KEY,
        expires_at timestamptz NOT NULL
      );
      CREATE INDEX web_sign_in_nonces_by_expiry ON web_sign_in_nonces (expires_at);
      CREATE TABLE web_sessions (
        token_hash text NOT NULL PRIMARY KEY,
        wallet text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT (now()),
        expires_at timestamptz NOT NULL
      );
      CREATE INDEX web_sessions_by_wallet ON web_sessions (wallet);
    `,
  },
];
