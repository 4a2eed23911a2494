/**
 * The web app's webhook pages: the same list, create and delete as /v1/webhooks for the signed-in
 * wallet, plus GET /app/api/webhooks/{id}/deliveries (filterable by status) and
 * POST /app/api/webhooks/{id}/replay, which queues the failed deliveries again and returns the
 * webhook to `active`. Someone else's webhook is a 404.
 */
import type { FastifyInstance } from "fastify";
import { ApiError } from "../core/errors.ts";
import type { Webhooks } from "../events/index.ts";
import { registerWebhooks } from "../http/routes/webhooks.ts";
import { wakeDelivery } from "../events/outbox.ts";
import { DELIVERY_STATUSES, deliveryToApi, getWebhook, listDeliveries, replayFailed, webhookToApi, type DeliveryStatus } from "../events/webhook-repo.ts";

const DEFAULT_LIMIT = 20;
const MAX_LIMIT = 100;

function parseQuery(query: Record<string, unknown>): { status?: DeliveryStatus; limit: number; before?: string } {
  const out: { status?: DeliveryStatus; limit: number; before?: string } = { limit: DEFAULT_LIMIT };
  if (query.status !== undefined) {
    if (!DELIVERY_STATUSES.includes(query.status as DeliveryStatus)) {
      throw new ApiError("invalid_request", `status must be one of ${DELIVERY_STATUSES.join(", ")}.`, "status");
    }
    out.status = query.status as DeliveryStatus;
  }
  if (query.limit !== undefined) {
    const limit = Number(query.limit);
    if (!/^\d+$/.test(String(query.limit)) || limit < 1 || limit > MAX_LIMIT) {
      throw new ApiError("invalid_request", `limit must be a whole number from 1 to ${MAX_LIMIT}.`, "limit");
    }
    out.limit = limit;
  }
  if (query.before !== undefined) {
    if (typeof query.before !== "string" || !query.before.startsWith("evt_")) throw new ApiError("invalid_request", "before must be an event id.", "before");
    out.before = query.before;
  }
  return out;
}

export function registerWebhookRoutes(app: FastifyInstance, webhooks: Webhooks): void {
  const { db } = webhooks;
  registerWebhooks(app, webhooks, (request) => request.appWallet);
  const owned = async (wallet: string, id: string) => {
    const webhook = await getWebhook(db, wallet, id);
    if (!webhook) throw new ApiError("not_found", `No webhook '${id}' exists.`, "webhook_id");
    return webhook;
  };

  app.get("/webhooks/:id/deliveries", async (request) => {
    const { id } = request.params as { id: string };
    const query = parseQuery(request.query as Record<string, unknown>);
    await owned(request.appWallet, id);
    const { deliveries, hasMore } = await listDeliveries(db, id, query);
    return {
      object: "list",
      data: deliveries.map((d) => deliveryToApi(id, d)),
      has_more: hasMore,
      next_cursor: hasMore ? deliveries[deliveries.length - 1]!.eventId : null,
    };
  });

  app.post("/webhooks/:id/replay", async (request) => {
    const { id } = request.params as { id: string };
    await owned(request.appWallet, id);
    const replayed = await replayFailed(db, id);
    wakeDelivery();
    return { object: "webhook_replay", replayed, webhook: webhookToApi(await owned(request.appWallet, id)) };
  });
}
