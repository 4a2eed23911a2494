/** SQL for webhooks and the owner's view of their deliveries. The only code that writes `webhooks`. */
import type { Db } from "../store/index.ts";
import type { EventName } from "./names.ts";

export type WebhookStatus = "active" | "failed";
export type DeliveryStatus = "pending" | "delivered" | "failed";
export const DELIVERY_STATUSES: readonly DeliveryStatus[] = ["pending", "delivered", "failed"];

export interface WebhookRecord {
  id: string;
  wallet: string;
  url: string;
  events: EventName[];
  status: WebhookStatus;
  createdAt: Date;
}

const COLUMNS = "id, wallet, url, events, status, created_at";

function fromRow(row: Record<string, unknown>): WebhookRecord {
  return {
    id: row.id as string,
    wallet: row.wallet as string,
    url: row.url as string,
    events: row.events as EventName[],
    status: row.status as WebhookStatus,
    createdAt: row.created_at as Date,
  };
}

export function webhookToApi(webhook: WebhookRecord): Record<string, unknown> {
  return {
    id: webhook.id,
    object: "webhook",
    url: webhook.url,
    events: webhook.events,
    created_at: webhook.createdAt.toISOString(),
    status: webhook.status,
  };
}

export async function insertWebhook(db: Db, input: { id: string; wallet: string; url: string; events: EventName[]; sealedSecret: string }): Promise<WebhookRecord> {
  const [row] = await db.query(
    `INSERT INTO webhooks (id, wallet, url, events, secret_ciphertext) VALUES ($1, $2, $3, $4, $5) RETURNING ${COLUMNS}`,
    [input.id, input.wallet, input.url, input.events, input.sealedSecret],
  );
  return fromRow(row!);
}

/** The wallet's webhooks, newest first. */
export async function listWebhooks(db: Db, wallet: string): Promise<WebhookRecord[]> {
  return (await db.query(`SELECT ${COLUMNS} FROM webhooks WHERE wallet = $1 ORDER BY id DESC`, [wallet])).map(fromRow);
}

/** A webhook of this wallet; someone else's is as absent as a missing one. */
export async function getWebhook(db: Db, wallet: string, id: string): Promise<WebhookRecord | undefined> {
  const [row] = await db.query(`SELECT ${COLUMNS} FROM webhooks WHERE id = $1 AND wallet = $2`, [id, wallet]);
  return row ? fromRow(row) : undefined;
}

/** Deletes it with its deliveries; false when the wallet has no such webhook. */
export async function deleteWebhook(db: Db, wallet: string, id: string): Promise<boolean> {
  return (await db.query("DELETE FROM webhooks WHERE id = $1 AND wallet = $2 RETURNING id", [id, wallet])).length > 0;
}

export interface DeliveryView {
  eventId: string;
  event: EventName;
  status: DeliveryStatus;
  attempts: number;
  lastAttemptAt: Date | null;
  nextAttemptAt: Date | null;
  lastStatusCode: number | null;
  lastError: string | null;
  deliveredAt: Date | null;
  createdAt: Date;
  payload: Record<string, unknown>;
}

export function deliveryToApi(webhookId: string, d: DeliveryView): Record<string, unknown> {
  const iso = (date: Date | null) => (date ? date.toISOString() : null);
  return {
    object: "webhook_delivery",
    webhook_id: webhookId,
    event_id: d.eventId,
    event: d.event,
    status: d.status,
    attempts: d.attempts,
    last_attempt_at: iso(d.lastAttemptAt),
    next_attempt_at: iso(d.nextAttemptAt),
    last_status_code: d.lastStatusCode,
    last_error: d.lastError,
    delivered_at: iso(d.deliveredAt),
    created_at: iso(d.createdAt),
    payload: d.payload,
  };
}

/** A page of a webhook's deliveries, newest event first; `before` is an event id cursor. */
export async function listDeliveries(
  db: Db,
  webhookId: string,
  query: { status?: DeliveryStatus; limit: number; before?: string },
): Promise<{ deliveries: DeliveryView[]; hasMore: boolean }> {
  const where = ["d.webhook_id = $1"];
  const params: unknown[] = [webhookId];
  if (query.status) where.push(`d.status = $${params.push(query.status)}`);
  if (query.before) where.push(`d.event_id < $${params.push(query.before)}`);
  const rows = await db.query<Record<string, unknown>>(
    `SELECT d.event_id, e.name, d.status, d.attempts, d.last_attempt_at, d.next_attempt_at, d.last_status_code,
            d.last_error, d.delivered_at, d.created_at, e.body
       FROM webhook_deliveries d JOIN events e ON e.id = d.event_id
      WHERE ${where.join(" AND ")} ORDER BY d.event_id DESC LIMIT ${query.limit + 1}`,
    params,
  );
  const deliveries = rows.slice(0, query.limit).map((r) => ({
    eventId: r.event_id as string,
    event: r.name as EventName,
    status: r.status as DeliveryStatus,
    attempts: r.attempts as number,
    lastAttemptAt: r.last_attempt_at as Date | null,
    nextAttemptAt: r.status === "pending" ? (r.next_attempt_at as Date) : null,
    lastStatusCode: r.last_status_code as number | null,
    lastError: r.last_error as string | null,
    deliveredAt: r.delivered_at as Date | null,
    createdAt: r.created_at as Date,
    payload: JSON.parse(r.body as string) as Record<string, unknown>,
  }));
  return { deliveries, hasMore: rows.length > query.limit };
}

/**
 * Queues the webhook's failed deliveries again, each with a fresh round of attempts, and returns
 * the webhook to `active` so they (and what queued up behind them) go out in event order.
 */
export async function replayFailed(db: Db, webhookId: string): Promise<number> {
  return db.transaction(async (tx) => {
    const requeued = await tx.query(
      `UPDATE webhook_deliveries SET status = 'pending', attempts = 0, next_attempt_at = now()
        WHERE webhook_id = $1 AND status = 'failed' RETURNING event_id`,
      [webhookId],
    );
    await tx.query("UPDATE webhooks SET status = 'active', failed_at = NULL WHERE id = $1", [webhookId]);
    return requeued.length;
  });
}
