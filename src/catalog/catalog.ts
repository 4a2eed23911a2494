/**
 * The model catalog as data. A model is approved for the network by being listed here; workers
 * may serve only catalog models. Whether a model shows in GET /models depends on live workers
 * (see the network part), not on this list.
 */
import { TIERS, type Tier } from "../core/index.ts";

export interface CatalogModel {
  id: string;
  ownedBy: string;
  tier: Tier;
  /** Model size as the API shows it, e.g. "70B". */
  parameters: string;
  contextWindow: number;
  /** Unix seconds: when governance approved the model. */
  created: number;
  description: string;
  /** The family whose tokenizer the gateway counts the model's output with (inference/family-tokenizers.ts). */
  tokenizer?: "llama3" | "qwen" | "mistral" | "gemma3";
}

/** Approval date of the launch catalog (2026-11-21T00:00:00Z). */
const LAUNCH = 1_795_219_200;

/** The project's own wiring model (below): the one name code uses for it. */
export const WIRING_MODEL_ID = "svc-dev/wiring-model";

export const LAUNCH_CATALOG: readonly CatalogModel[] = [
  { id: "meta-llama/Llama-3.3-70B-Instruct", ownedBy: "Meta", tier: "max", parameters: "70B", contextWindow: 131_072, created: LAUNCH, description: "Llama 3.3 70B Instruct", tokenizer: "llama3" },
  { id: "deepseek-ai/DeepSeek-R1-Distill-Llama-70B", ownedBy: "DeepSeek", tier: "max", parameters: "70B", contextWindow: 131_072, created: LAUNCH, description: "DeepSeek R1 distilled into Llama 70B", tokenizer: "llama3" },
  { id: "google/gemma-3-27b-it", ownedBy: "Google", tier: "pro", parameters: "27B", contextWindow: 131_072, created: LAUNCH, description: "Gemma 3 27B instruction-tuned", tokenizer: "gemma3" },
  { id: "Qwen/Qwen2.5-14B-Instruct", ownedBy: "Qwen", tier: "pro", parameters: "14B", contextWindow: 32_768, created: LAUNCH, description: "Qwen2.5 14B Instruct", tokenizer: "qwen" },
  { id: "Qwen/Qwen3-8B", ownedBy: "Qwen", tier: "standard", parameters: "8B", contextWindow: 32_768, created: LAUNCH, description: "Qwen3 8B", tokenizer: "qwen" },
  { id: "mistralai/Mistral-7B-Instruct-v0.3", ownedBy: "Mistral AI", tier: "standard", parameters: "7B", contextWindow: 32_768, created: LAUNCH, description: "Mistral 7B Instruct v0.3", tokenizer: "mistral" },
  { id: "meta-llama/Llama-3.2-3B-Instruct", ownedBy: "Meta", tier: "lite", parameters: "3B", contextWindow: 131_072, created: LAUNCH, description: "Llama 3.2 3B Instruct", tokenizer: "llama3" },
  { id: "Qwen/Qwen3-1.7B", ownedBy: "Qwen", tier: "lite", parameters: "1.7B", contextWindow: 32_768, created: LAUNCH, description: "Qwen3 1.7B", tokenizer: "qwen" },
];

/**
 * The project's own wiring model: a tiny hand-weighted GGUF that exercises the whole path
 * (tokenizer, chat template, sampling, streaming) without being a language model. The GGUF itself
 * is built by inference/wiring-model.ts from this entry.
 */
export const WIRING_MODEL: CatalogModel = {
  id: WIRING_MODEL_ID,
  ownedBy: "svc",
  tier: "lite",
  parameters: "0.0002B",
  contextWindow: 2048,
  created: LAUNCH,
  description: "Wiring model for development and tests: fixed hand-set weights, not a language model",
};

export class Catalog {
  private readonly byId: Map<string, CatalogModel>;

  constructor(models: readonly CatalogModel[]) {
    this.byId = new Map(models.map((m) => [m.id, m]));
  }

  get(id: string): CatalogModel | undefined {
    return this.byId.get(id);
  }

  /** Add or replace an entry (e.g. a local GGUF served by `svc dev --model`). */
  approve(model: CatalogModel): void {
    this.byId.set(model.id, model);
  }

  all(): CatalogModel[] {
    return [...this.byId.values()];
  }
}

export function defaultCatalog(): Catalog {
  return new Catalog([...LAUNCH_CATALOG, WIRING_MODEL]);
}

export function ratesOf(model: CatalogModel) {
  return TIERS[model.tier];
}
