/**
 * Events are written only for an account with a webhook subscribed to them. Tests that read the
 * outbox as the evidence an event fired give the account such a webhook, in the `failed` state,
 * which gets no deliveries: its events are kept, never sent.
 */
import { newId } from "../../src/core/index.ts";
import { EVENT_NAMES } from "../../src/events/names.ts";
import type { Db } from "../../src/store/index.ts";

export async function keepEvents(db: Db, account: string): Promise<void> {
  await db.query("INSERT INTO webhooks (id, wallet, url, events, secret_ciphertext, status) VALUES ($1, $2, 'https://kept.invalid/events', $3::text[], 'unused', 'failed')", [
    newId("wh"),
    account,
    [...EVENT_NAMES],
  ]);
}
