/**
 * Finding an upstream model's context window from what the server exposes:
 *
 *  - vLLM: GET /v1/models lists each served model with `max_model_len`.
 *  - llama-server: GET /props has `default_generation_settings.n_ctx`, the per-slot context it
 *    actually runs with (its /v1/models `meta.n_ctx_train` is the training length, not that).
 *  - Ollama: POST /api/show has `model_info["<arch>.context_length"]` (the model's trained length)
 *    and, when the Modelfile sets one, `num_ctx` in `parameters`, which is what it runs with.
 *    Without num_ctx, Ollama runs with its server default (OLLAMA_CONTEXT_LENGTH) and silently
 *    drops the start of longer prompts, so operators should pass a contextWindow that matches.
 */
import type { UpstreamClient } from "./openai-http.ts";
import { upstreamErrorFromBody } from "./openai-errors.ts";

export type ContextWindowSource = "vllm-models" | "llama-server-props" | "ollama-show";

export interface DiscoveredWindow {
  tokens: number;
  source: ContextWindowSource;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function positiveInteger(value: unknown): number | undefined {
  return typeof value === "number" && Number.isInteger(value) && value > 0 ? value : undefined;
}

// Ollama lists "llama3:latest" for a model pulled and requested as "llama3".
function sameModel(listed: unknown, wanted: string): boolean {
  return listed === wanted || listed === `${wanted}:latest`;
}

async function fromModels(client: UpstreamClient, model: string): Promise<number | undefined> {
  const reply = await client.json("GET", client.api("/models"));
  // Wrong credentials would fail every later request too: say so now, at connect.
  if (reply.status === 401 || reply.status === 403) throw upstreamErrorFromBody(reply.status, reply.text);
  if (!reply.ok || !isRecord(reply.body) || !Array.isArray(reply.body.data)) return undefined;
  const entry = reply.body.data.find((m: unknown) => isRecord(m) && sameModel(m.id, model));
  return isRecord(entry) ? positiveInteger(entry.max_model_len) : undefined;
}

async function fromProps(client: UpstreamClient): Promise<number | undefined> {
  const reply = await client.json("GET", client.root("/props"));
  if (!reply.ok || !isRecord(reply.body)) return undefined;
  const settings = reply.body.default_generation_settings;
  return (isRecord(settings) ? positiveInteger(settings.n_ctx) : undefined) ?? positiveInteger(reply.body.n_ctx);
}

async function fromShow(client: UpstreamClient, model: string): Promise<number | undefined> {
  // Older Ollama reads `name`, newer `model`.
  const reply = await client.json("POST", client.root("/api/show"), { model, name: model });
  if (!reply.ok || !isRecord(reply.body)) return undefined;
  const { parameters, model_info: info } = reply.body;
  if (typeof parameters === "string") {
    const numCtx = /^\s*num_ctx\s+(\d+)\s*$/m.exec(parameters)?.[1];
    if (numCtx !== undefined && Number(numCtx) > 0) return Number(numCtx);
  }
  if (!isRecord(info)) return undefined;
  for (const [key, value] of Object.entries(info)) {
    if (key.endsWith(".context_length") && positiveInteger(value) !== undefined) return value as number;
  }
  return undefined;
}

/** The first window a server reports, asking the most specific endpoint first; null if none does. */
export async function discoverContextWindow(client: UpstreamClient, model: string): Promise<DiscoveredWindow | null> {
  const fromVllm = await fromModels(client, model);
  if (fromVllm !== undefined) return { tokens: fromVllm, source: "vllm-models" };
  const fromLlama = await fromProps(client);
  if (fromLlama !== undefined) return { tokens: fromLlama, source: "llama-server-props" };
  const fromOllama = await fromShow(client, model);
  if (fromOllama !== undefined) return { tokens: fromOllama, source: "ollama-show" };
  return null;
}
