/** POST /webhooks, GET /webhooks, DELETE /webhooks/{id}: the caller's webhooks. */
import type { FastifyInstance, FastifyRequest } from "fastify";
import { ApiError } from "../../core/errors.ts";
import { isId, newId } from "../../core/ids.ts";
import type { Webhooks } from "../../events/index.ts";
import { EVENT_NAMES, isEventName, type EventName } from "../../events/names.ts";
import { parseTargetUrl, resolveTarget, TargetRefusedError } from "../../events/target.ts";
import { deleteWebhook, insertWebhook, listWebhooks, webhookToApi } from "../../events/webhook-repo.ts";

export const MIN_SECRET_LENGTH = 16;
const MAX_SECRET_LENGTH = 512;

interface WebhookInput {
  url: string;
  events: EventName[];
  secret: string;
}

function parseInput(body: unknown): WebhookInput {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new ApiError("invalid_request", "The body must be a JSON object with url, events and secret.", "body");
  }
  const { url, events, secret } = body as Record<string, unknown>;
  if (typeof url !== "string" || url === "") throw new ApiError("invalid_request", "url is required: the HTTPS endpoint that receives deliveries.", "url");
  if (!Array.isArray(events) || events.length === 0) {
    throw new ApiError("invalid_request", "events is required: a non-empty array of event names.", "events");
  }
  const unknown = events.find((e) => !isEventName(e));
  if (unknown !== undefined) {
    throw new ApiError("invalid_request", `${JSON.stringify(unknown)} is not an event name; use any of ${EVENT_NAMES.join(", ")}.`, "events");
  }
  if (typeof secret !== "string" || secret.length < MIN_SECRET_LENGTH || secret.length > MAX_SECRET_LENGTH) {
    throw new ApiError("invalid_request", `secret is required: a string of ${MIN_SECRET_LENGTH} to ${MAX_SECRET_LENGTH} characters.`, "secret");
  }
  return { url, events: [...new Set(events as EventName[])], secret };
}

/** `walletOf`: whose webhooks these are (the API key's wallet on /v1; the web app passes its session's). */
export function registerWebhooks(app: FastifyInstance, webhooks: Webhooks, walletOf = (request: FastifyRequest) => request.owner.wallet): void {
  const { db } = webhooks;

  app.post("/webhooks", async (request) => {
    const input = parseInput(request.body);
    let url: URL;
    try {
      url = parseTargetUrl(input.url, webhooks.policy);
      await resolveTarget(url, webhooks.policy);
    } catch (err) {
      if (err instanceof TargetRefusedError) throw new ApiError("invalid_request", err.message, "url");
      throw err;
    }
    const id = newId("wh");
    const webhook = await insertWebhook(db, {
      id,
      wallet: walletOf(request),
      url: input.url,
      events: input.events,
      sealedSecret: webhooks.secrets.seal(input.secret, id),
    });
    return webhookToApi(webhook);
  });

  app.get("/webhooks", async (request) => ({
    object: "list",
    data: (await listWebhooks(db, walletOf(request))).map(webhookToApi),
  }));

  app.delete("/webhooks/:id", async (request) => {
    const { id } = request.params as { id: string };
    // Someone else's webhook answers exactly like one that does not exist, and so does an id
    // that no webhook could have (which is then never looked up).
    if (!isId("wh", id) || !(await deleteWebhook(db, walletOf(request), id))) {
      throw new ApiError("not_found", `No webhook '${id.slice(0, 100)}' exists.`, "webhook_id");
    }
    return { id, object: "webhook", deleted: true };
  });
}
