/** GET /models and GET /models/{id}: catalog models that at least one worker hosts right now. */
import type { FastifyInstance } from "fastify";
import type { CatalogModel } from "../../catalog/catalog.ts";
import { ApiError } from "../../core/errors.ts";
import { TIERS } from "../../core/pricing.ts";
import type { HttpContext } from "../context.ts";

export function modelToApi(model: CatalogModel, ctx: HttpContext) {
  const rates = TIERS[model.tier];
  return {
    id: model.id,
    object: "model",
    created: model.created,
    owned_by: model.ownedBy,
    svc: {
      tier: model.tier,
      credits_per_request: rates.creditsPerRequest,
      credits_per_1k_tokens: rates.creditsPer1kTokens,
      active_workers: ctx.pool.activeWorkers(model.id),
      median_latency_ms: ctx.pool.medianLatencyMs(model.id),
      parameters: model.parameters,
      // What a request can get now: the catalog's window, as far as the roomiest worker holds it.
      context_window: Math.min(model.contextWindow, ctx.pool.contextWindow(model.id)),
    },
  };
}

export function registerModels(app: FastifyInstance, ctx: HttpContext): void {
  app.get("/models", async () => {
    const hosted = ctx.pool.hostedModels();
    const data = ctx.catalog
      .all()
      .filter((m) => hosted.has(m.id))
      .map((m) => modelToApi(m, ctx));
    return { object: "list", data };
  });

  // Model ids contain a slash ("meta-llama/Llama-3.3-70B-Instruct"), sent raw or as %2F.
  app.get("/models/*", async (request) => {
    const raw = (request.params as Record<string, string>)["*"] ?? "";
    const id = decodeURIComponent(raw);
    const model = ctx.catalog.get(id);
    if (!model || !ctx.pool.hostedModels().has(id)) throw new ApiError("not_found", `No model '${id}' is being served.`, "model");
    return modelToApi(model, ctx);
  });
}
