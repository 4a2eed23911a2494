/** POST /webhooks, GET /webhooks, DELETE /webhooks/{id}: the caller's webhooks. */
import type { FastifyInstance, FastifyRequest } from "fastify";
import { ApiError } from "../../core/index.ts";
import type { EventName } from "../../events/index.ts";
import { IDEMPOTENCY_KEY_HEADER, type IdempotencyPort, idempotently } from "../idempotency.ts";
import { ERROR_RESPONSES, idParams, ref } from "../schemas.ts";

export interface WebhookInput {
  url: string;
  events: EventName[];
  secret: string;
}

/** What these routes ask of the webhooks part; bodies come back in their API form. */
export interface WebhookRoutesOptions {
  /** Refuses a target URL the policy does not allow with ApiError(invalid_request, param "url"). */
  create(wallet: string, input: WebhookInput): Promise<Record<string, unknown>>;
  list(wallet: string): Promise<Record<string, unknown>[]>;
  /** False when the wallet has no such webhook. */
  remove(wallet: string, id: string): Promise<boolean>;
  /** Whose webhooks these are: the API key's wallet on /v1; the web app passes its session's. */
  walletOf?: (request: FastifyRequest) => string;
  /** The stored `Idempotency-Key`s; without it the header is not read. */
  idempotency?: IdempotencyPort;
}

export async function webhookRoutes(app: FastifyInstance, options: WebhookRoutesOptions): Promise<void> {
  const walletOf = options.walletOf ?? ((request: FastifyRequest) => request.owner.wallet);

  app.post("/webhooks", { schema: { body: ref("WebhookInput"), response: { 200: ref("Webhook"), ...ERROR_RESPONSES } }, config: { documentedHeaders: [IDEMPOTENCY_KEY_HEADER] } }, async (request, reply) => {
    const input = request.body as WebhookInput;
    const wallet = walletOf(request);
    return idempotently(request, reply, options.idempotency, wallet, () => options.create(wallet, { url: input.url, events: [...new Set(input.events)], secret: input.secret }));
  });

  app.get("/webhooks", { schema: { response: { 200: ref("WebhookList"), ...ERROR_RESPONSES } } }, async (request) => ({
    object: "list",
    data: await options.list(walletOf(request)),
  }));

  app.delete("/webhooks/:id", { schema: { params: idParams(), response: { 200: ref("WebhookDeleted"), ...ERROR_RESPONSES } } }, async (request) => {
    const { id } = request.params as { id: string };
    // Someone else's webhook answers exactly like one that does not exist.
    if (!(await options.remove(walletOf(request), id))) {
      throw new ApiError("not_found", `No webhook '${id.slice(0, 100)}' exists.`, "webhook_id");
    }
    return { id, object: "webhook", deleted: true };
  });
}
