/** GET /models and GET /models/{id}: catalog models that at least one worker hosts right now. */
import type { FastifyInstance } from "fastify";
import type { Catalog, CatalogModel } from "../../catalog/index.ts";
import { ApiError, TIERS } from "../../core/index.ts";
import type { WorkerPool } from "../../network/index.ts";
import { ERROR_RESPONSES, ref } from "../schemas.ts";

export interface ModelRoutesOptions {
  catalog: Pick<Catalog, "all" | "get" | "retirement">;
  /** Who serves what now. */
  pool: Pick<WorkerPool, "hostedModels" | "activeWorkers" | "medianLatencyMs" | "contextWindow">;
}

export function modelToApi(model: CatalogModel, { catalog, pool }: ModelRoutesOptions) {
  const rates = TIERS[model.tier];
  // Listed models are not retired yet: a retirement here is one announced ahead of its date.
  const retirement = catalog.retirement(model.id);
  return {
    id: model.id,
    object: "model",
    created: model.created,
    owned_by: model.ownedBy,
    svc: {
      tier: model.tier,
      credits_per_request: rates.creditsPerRequest,
      credits_per_1k_tokens: rates.creditsPer1kTokens,
      active_workers: pool.activeWorkers(model.id),
      // The contract's integer: 0 until a time to first token is measured for a worker of the
      // model (workers that join unprobed: in-process ones, and another node's before a job here).
      median_latency_ms: pool.medianLatencyMs(model.id) ?? 0,
      parameters: model.parameters,
      // What a request can get now: the catalog's window, as far as the roomiest worker holds it.
      context_window: Math.min(model.contextWindow, pool.contextWindow(model.id)),
      retires_at: retirement ? retirement.retiresAt.toISOString() : null,
      retirement_reason: retirement ? retirement.reason : null,
    },
  };
}

const modelIdParams = { type: "object", properties: { "*": { type: "string", description: "A model id; its slash may be sent raw or as %2F." } } };

export async function modelRoutes(app: FastifyInstance, options: ModelRoutesOptions): Promise<void> {
  const { catalog, pool } = options;
  app.get("/models", { schema: { response: { 200: ref("ModelList"), ...ERROR_RESPONSES } } }, async () => {
    const hosted = pool.hostedModels();
    const data = catalog
      .all()
      .filter((m) => hosted.has(m.id))
      .map((m) => modelToApi(m, options));
    return { object: "list", data };
  });

  // Model ids contain a slash ("meta-llama/Llama-3.3-70B-Instruct"), sent raw or as %2F.
  app.get("/models/*", { schema: { params: modelIdParams, response: { 200: ref("Model"), ...ERROR_RESPONSES } } }, async (request) => {
    const raw = (request.params as Record<string, string>)["*"] ?? "";
    const id = decodeURIComponent(raw);
    const model = catalog.get(id);
    if (!model || !pool.hostedModels().has(id)) throw new ApiError("not_found", `No model '${id}' is being served.`, "model");
    return modelToApi(model, options);
  });
}
