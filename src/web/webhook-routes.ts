/**
 * The web app's webhook pages: the same list, create and delete as /v1/webhooks for the signed-in
 * wallet, plus GET /app/api/webhooks/{id}/deliveries (filterable by status) and
 * POST /app/api/webhooks/{id}/replay, which queues the failed deliveries again and returns the
 * webhook to `active`. Someone else's webhook is a 404.
 */
import type { FastifyInstance } from "fastify";
import { ApiError } from "../core/index.ts";
import { ERROR_RESPONSES, type WebhookRoutesOptions, idParams, int, maybe, object, ref, str, webhookRoutes, timestamp } from "../http/index.ts";

const DEFAULT_LIMIT = 20;
const MAX_LIMIT = 100;

export type DeliveryQuery = { status?: string; limit: number; before?: string };

/** The webhooks part's functions these pages use, bound to the service's database. */
export interface WebhookPageOptions {
  /** List, create and delete, as on /v1. */
  webhooks: WebhookRoutesOptions;
  /** The wallet's webhook in its API form, or undefined when it has none with this id. */
  get(wallet: string, id: string): Promise<Record<string, unknown> | undefined>;
  deliveries(webhookId: string, query: DeliveryQuery): Promise<{ data: Record<string, unknown>[]; nextCursor: string | null }>;
  /** Queues the failed deliveries again; how many. */
  replay(webhookId: string): Promise<number>;
  deliveryStatuses: readonly string[];
}

function deliveryQuery(statuses: readonly string[]) {
  return {
    type: "object",
    properties: {
      status: { type: "string", enum: [...statuses] },
      limit: { type: "string", pattern: "^[0-9]+$", description: `a whole number from 1 to ${MAX_LIMIT}` },
      before: { type: "string", pattern: "^evt_", description: "an event id" },
    },
  };
}

function parseQuery(query: Record<string, string | undefined>): DeliveryQuery {
  const out: DeliveryQuery = { limit: DEFAULT_LIMIT };
  if (query.status !== undefined) out.status = query.status;
  if (query.limit !== undefined) {
    const limit = Number(query.limit);
    if (limit < 1 || limit > MAX_LIMIT) throw new ApiError("invalid_request", `limit must be a whole number from 1 to ${MAX_LIMIT}.`, "limit");
    out.limit = limit;
  }
  if (query.before !== undefined) out.before = query.before;
  return out;
}

const delivery = object({
  object: { const: "webhook_delivery" },
  webhook_id: str,
  event_id: str,
  event: str,
  status: str,
  attempts: int,
  last_attempt_at: timestamp,
  next_attempt_at: timestamp,
  last_status_code: maybe("integer"),
  last_error: maybe("string"),
  delivered_at: timestamp,
  created_at: timestamp,
  payload: { type: "object", additionalProperties: true, description: "The event as delivered." },
});
const deliveryList = object({ object: { const: "list" }, data: { type: "array", items: delivery }, has_more: { type: "boolean" }, next_cursor: maybe("string") });
const replayAnswer = object({ object: { const: "webhook_replay" }, replayed: int, webhook: ref("Webhook") });

export async function webhookPageRoutes(app: FastifyInstance, options: WebhookPageOptions): Promise<void> {
  await app.register(webhookRoutes, { ...options.webhooks, walletOf: (request) => request.appWallet });
  const owned = async (wallet: string, id: string) => {
    const webhook = await options.get(wallet, id);
    if (!webhook) throw new ApiError("not_found", `No webhook '${id}' exists.`, "webhook_id");
    return webhook;
  };

  const deliveriesSchema = { params: idParams(), querystring: deliveryQuery(options.deliveryStatuses), response: { 200: deliveryList, ...ERROR_RESPONSES } };
  app.get("/webhooks/:id/deliveries", { schema: deliveriesSchema }, async (request) => {
    const { id } = request.params as { id: string };
    const query = parseQuery(request.query as Record<string, string | undefined>);
    await owned(request.appWallet, id);
    const { data, nextCursor } = await options.deliveries(id, query);
    return { object: "list", data, has_more: nextCursor !== null, next_cursor: nextCursor };
  });

  app.post("/webhooks/:id/replay", { schema: { params: idParams(), response: { 200: replayAnswer, ...ERROR_RESPONSES } } }, async (request) => {
    const { id } = request.params as { id: string };
    await owned(request.appWallet, id);
    const replayed = await options.replay(id);
    return { object: "webhook_replay", replayed, webhook: await owned(request.appWallet, id) };
  });
}
