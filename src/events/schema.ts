/**
 * Tables owned by the events part: the outbox of events, webhooks and their deliveries. Runs
 * after the accounts migrations: its first migration added the credit.low arming flag to
 * `wallets`, a column the accounts part reads and writes (accounts.recordCreditLowSide); events
 * never touches it. It also made the web app's first sign-in tables. A migration never changes
 * once applied, so both stay in its text; the web part's own migration (web/001) drops the latter.
 */
import type { Migration } from "../store/index.ts";

export const EVENTS_MIGRATIONS: readonly Migration[] = [
  {
    id: "events/001_outbox_and_webhooks",
    sql: `
      -- The outbox: each row is written in the same transaction as the change it reports.
      -- body is the exact JSON envelope sent, so every attempt signs the same bytes.
      CREATE TABLE events (
        id text PRIMARY KEY,
        account text NOT NULL,
        name text NOT NULL,
        -- One event per change: the same change reported twice (a retried step) collides here.
        dedupe_key text UNIQUE,
        created_at timestamptz NOT NULL,
        body text NOT NULL
      );

      CREATE TABLE webhooks (
        id text PRIMARY KEY,
        wallet text NOT NULL,
        url text NOT NULL,
        events text[] NOT NULL,
        -- AES-256-GCM under a key kept outside the database (see secret-box.ts).
        secret_ciphertext text NOT NULL,
        status text NOT NULL DEFAULT 'active',
        created_at timestamptz NOT NULL DEFAULT now(),
        failed_at timestamptz
      );
      CREATE INDEX webhooks_by_wallet ON webhooks (wallet, id);

      -- One row per (webhook, event), fanned out when the event is written. Only the oldest
      -- pending row of a webhook is ever attempted, which keeps deliveries in event order.
      -- lease_until/lease_token: the node attempting it, so two nodes never send it at once.
      CREATE TABLE webhook_deliveries (
        webhook_id text NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
        event_id text NOT NULL REFERENCES events (id),
        status text NOT NULL DEFAULT 'pending',
        attempts integer NOT NULL DEFAULT 0,
        next_attempt_at timestamptz NOT NULL DEFAULT now(),
        lease_until timestamptz,
        lease_token text,
        last_attempt_at timestamptz,
        last_status_code integer,
        last_error text,
        delivered_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (webhook_id, event_id)
      );
      CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (webhook_id, event_id) WHERE status = 'pending';
      CREATE INDEX webhook_deliveries_by_status ON webhook_deliveries (webhook_id, status, event_id);

      -- credit.low fires when the balance goes from at-or-above the threshold to below it; this
      -- remembers which side the balance was on after its last change.
      ALTER TABLE wallets ADD COLUMN credit_low_armed boolean NOT NULL DEFAULT true;

      -- Web-app sign-in: a wallet signs a message holding a one-time nonce. Only a hash of a
      -- session token is stored.
      CREATE TABLE app_challenges (
        nonce text PRIMARY KEY,
        wallet text NOT NULL,
        message text NOT NULL,
        expires_at timestamptz NOT NULL
      );
      CREATE INDEX app_challenges_by_wallet ON app_challenges (wallet, expires_at);
      CREATE TABLE app_sessions (
        token_hash text PRIMARY KEY,
        wallet text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz NOT NULL
      );
    `,
    // The same tables. A webhook's event names are a JSON array (SQLite has no arrays); the
    // dedupe key's index is made by name, as PostgreSQL names its UNIQUE constraint; a text
    // primary key is NOT NULL, which SQLite, unlike PostgreSQL, does not imply.
    sqlite: `
      CREATE TABLE events (
        id text NOT NULL PRIMARY KEY,
        account text NOT NULL,
        name text NOT NULL,
        dedupe_key text,
        created_at timestamptz NOT NULL,
        body text NOT NULL
      );
      CREATE UNIQUE INDEX events_dedupe_key_key ON events (dedupe_key);

      CREATE TABLE webhooks (
        id text NOT NULL PRIMARY KEY,
        wallet text NOT NULL,
        url text NOT NULL,
        events jsonb NOT NULL,
        secret_ciphertext text NOT NULL,
        status text NOT NULL DEFAULT 'active',
        created_at timestamptz NOT NULL DEFAULT (now()),
        failed_at timestamptz
      );
      CREATE INDEX webhooks_by_wallet ON webhooks (wallet, id);

      CREATE TABLE webhook_deliveries (
        webhook_id text NOT NULL CONSTRAINT webhook_deliveries_webhook_id_fkey REFERENCES webhooks (id) ON DELETE CASCADE,
        event_id text NOT NULL CONSTRAINT webhook_deliveries_event_id_fkey REFERENCES events (id),
        status text NOT NULL DEFAULT 'pending',
        attempts integer NOT NULL DEFAULT 0,
        next_attempt_at timestamptz NOT NULL DEFAULT (now()),
        lease_until timestamptz,
        lease_token text,
        last_attempt_at timestamptz,
        last_status_code integer,
        last_error text,
        delivered_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT (now()),
        PRIMARY KEY (webhook_id, event_id)
      );
      CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (webhook_id, event_id) WHERE status = 'pending';
      CREATE INDEX webhook_deliveries_by_status ON webhook_deliveries (webhook_id, status, event_id);

      ALTER TABLE wallets ADD COLUMN credit_low_armed boolean NOT NULL DEFAULT true;

      CREATE TABLE app_challenges (
        nonce text NOT NULL PRIMARY KEY,
        wallet text NOT NULL,
        message text NOT NULL,
        expires_at timestamptz NOT NULL
      );
      CREATE INDEX app_challenges_by_wallet ON app_challenges (wallet, expires_at);
      CREATE TABLE app_sessions (
        token_hash text NOT NULL PRIMARY KEY,
        wallet text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT (now()),
        expires_at timestamptz NOT NULL
      );
    `,
  },
];
