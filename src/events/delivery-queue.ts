/**
 * The delivery queue's SQL. Per webhook only the head (its oldest pending delivery) is ever
 * attempted, which is what keeps deliveries in event order. A node takes the head by setting a
 * lease in one conditional UPDATE; on PostgreSQL a second node's UPDATE waits for the first and
 * then no longer matches, so two nodes never attempt the same delivery in the normal case. A node
 * that dies mid-attempt leaves a lease that expires, and the delivery is attempted again (at
 * least once). All times are the database's clock, so nodes with skewed clocks agree.
 *
 * On SQLite one process owns the database and its one connection runs one statement at a time,
 * so the same conditional UPDATE is all that keeps two loops from taking one head.
 */
import { isAnyOf, msBetween, plusMs, spelled, type Db } from "../store/index.ts";

/** Delay before attempt n+1 after attempt n failed (index n), spec "Delivery". */
export const RETRY_DELAYS_MS = [0, 30_000, 300_000, 1_800_000, 7_200_000] as const;
export const MAX_ATTEMPTS = 5;

export interface Head {
  webhookId: string;
  eventId: string;
  /** Milliseconds until it may be taken (its next attempt time or another node's lease); <= 0: now. */
  waitMs: number;
}

export interface Claimed {
  attempts: number;
  body: string;
  url: string;
  sealedSecret: string;
}

const HEAD_LIMIT = 500;

const READY_AT = "CASE WHEN lease_until > next_attempt_at THEN lease_until ELSE next_attempt_at END";

/** Each webhook's oldest pending delivery (SQLite has no DISTINCT ON), with when it may be taken. */
const OLDEST_PENDING = {
  postgres: `SELECT DISTINCT ON (webhook_id) webhook_id, event_id, ${READY_AT} AS ready_at
               FROM webhook_deliveries WHERE status = 'pending'
              ORDER BY webhook_id, event_id`,
  sqlite: `SELECT webhook_id, event_id, ready_at
             FROM (SELECT webhook_id, event_id, ${READY_AT} AS ready_at,
                          row_number() OVER (PARTITION BY webhook_id ORDER BY event_id) AS nth
                     FROM webhook_deliveries WHERE status = 'pending')
            WHERE nth = 1`,
};

/** The head of every active webhook with something pending, soonest first. */
export async function heads(db: Db): Promise<Head[]> {
  const rows = await db.query<{ webhook_id: string; event_id: string; wait_ms: number }>(
    `WITH h AS (${spelled(db, OLDEST_PENDING)})
     SELECT h.webhook_id, h.event_id, ${msBetween(db, "now()", "h.ready_at")} AS wait_ms
       FROM h JOIN webhooks w ON w.id = h.webhook_id
      WHERE w.status = 'active'
      ORDER BY wait_ms, h.event_id
      LIMIT ${HEAD_LIMIT}`,
  );
  return rows.map((r) => ({ webhookId: r.webhook_id, eventId: r.event_id, waitMs: Number(r.wait_ms) }));
}

/**
 * Leases delivery ($1, $2) for $3 ms to token $4. SQLite's RETURNING reads only the updated
 * table, not an UPDATE's FROM: there the event and webhook are read by subqueries.
 */
const CLAIM = {
  postgres: `UPDATE webhook_deliveries d
        SET lease_until = now() + $3::float8 * interval '1 millisecond', lease_token = $4
       FROM events e, webhooks w
      WHERE d.webhook_id = $1 AND d.event_id = $2 AND d.status = 'pending'
        AND d.next_attempt_at <= now() AND (d.lease_until IS NULL OR d.lease_until < now())
        AND e.id = d.event_id AND w.id = d.webhook_id AND w.status = 'active'
        AND NOT EXISTS (SELECT 1 FROM webhook_deliveries p
                         WHERE p.webhook_id = d.webhook_id AND p.status = 'pending' AND p.event_id < d.event_id)
      RETURNING d.attempts, e.body, w.url, w.secret_ciphertext`,
  sqlite: `UPDATE webhook_deliveries
        SET lease_until = ${plusMs("sqlite", "now()", "$3")}, lease_token = $4
      WHERE webhook_id = $1 AND event_id = $2 AND status = 'pending'
        AND next_attempt_at <= now() AND (lease_until IS NULL OR lease_until < now())
        AND EXISTS (SELECT 1 FROM webhooks w WHERE w.id = $1 AND w.status = 'active')
        AND NOT EXISTS (SELECT 1 FROM webhook_deliveries p WHERE p.webhook_id = $1 AND p.status = 'pending' AND p.event_id < $2)
      RETURNING attempts, (SELECT body FROM events WHERE id = $2) AS body,
                (SELECT url FROM webhooks WHERE id = $1) AS url, (SELECT secret_ciphertext FROM webhooks WHERE id = $1) AS secret_ciphertext`,
};

/** Takes the head for `leaseMs`, if it is still the due, unleased head of an active webhook. */
export async function claim(db: Db, head: Head, token: string, leaseMs: number): Promise<Claimed | undefined> {
  const params = [head.webhookId, head.eventId, leaseMs, token];
  const [row] = await db.query<{ attempts: number; body: string; url: string; secret_ciphertext: string }>(spelled(db, CLAIM), params);
  return row ? { attempts: row.attempts, body: row.body, url: row.url, sealedSecret: row.secret_ciphertext } : undefined;
}

export async function markDelivered(db: Db, head: Head, token: string, statusCode: number): Promise<void> {
  await db.query(
    `UPDATE webhook_deliveries
        SET status = 'delivered', attempts = attempts + 1, last_attempt_at = now(), delivered_at = now(),
            last_status_code = $3, last_error = NULL, lease_until = NULL, lease_token = NULL
      WHERE webhook_id = $1 AND event_id = $2 AND lease_token = $4`,
    [head.webhookId, head.eventId, statusCode, token],
  );
}

/**
 * Records a failed attempt (the `attempts`-th, counted from 1). Before the last one it schedules
 * the next after the spec's delay times `timeScale`; the last one fails the delivery and the
 * webhook, which stops its deliveries until a replay.
 */
export async function markFailed(
  db: Db,
  head: Head,
  token: string,
  failure: { attempt: number; statusCode: number | null; error: string; timeScale: number },
): Promise<"pending" | "failed" | undefined> {
  const last = failure.attempt >= MAX_ATTEMPTS;
  const delayMs = last ? 0 : RETRY_DELAYS_MS[failure.attempt]! * failure.timeScale;
  return db.transaction(async (tx) => {
    const [row] = await tx.query<{ status: "pending" | "failed" }>(
      `UPDATE webhook_deliveries
          SET attempts = attempts + 1, last_attempt_at = now(), last_status_code = $3, last_error = $4,
              status = $5, next_attempt_at = ${plusMs(tx, "now()", "$6::float8")},
              lease_until = NULL, lease_token = NULL
        WHERE webhook_id = $1 AND event_id = $2 AND lease_token = $7
        RETURNING status`,
      [head.webhookId, head.eventId, failure.statusCode, failure.error.slice(0, 500), last ? "failed" : "pending", delayMs, token],
    );
    if (row?.status === "failed") {
      await tx.query("UPDATE webhooks SET status = 'failed', failed_at = now() WHERE id = $1", [head.webhookId]);
    }
    return row?.status;
  });
}

/** Gives up leases without counting an attempt (the loop is stopping). */
export async function releaseLeases(db: Db, tokens: string[]): Promise<void> {
  if (tokens.length === 0) return;
  await db.query(`UPDATE webhook_deliveries SET lease_until = NULL, lease_token = NULL WHERE ${isAnyOf(db, "lease_token", "$1::text[]")}`, [tokens]);
}

/** Which of these events are visible (committed) now. */
export async function visibleEvents(db: Db, ids: string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  return (await db.query<{ id: string }>(`SELECT id FROM events WHERE ${isAnyOf(db, "id", "$1::text[]")}`, [ids])).map((r) => r.id);
}
