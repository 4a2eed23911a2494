/**
 * The model catalog as data. A model is approved for the network by governance, recorded in the
 * database (schema.ts, governance.ts); every node holds the approvals in memory here, reloaded on
 * each change, so the request path asks synchronously. Workers may serve only catalog models.
 * Whether a model shows in GET /models depends on live workers too (see the network part).
 */
import { ApiError, TIERS, type Tier } from "../core/index.ts";

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
  tokenizer?: TokenizerFamilyName;
}

export type TokenizerFamilyName = "llama3" | "qwen" | "mistral" | "gemma3";

/** An approval as the database holds it: the model, and its retirement once one is announced. */
export interface GovernedModel extends CatalogModel {
  approvedAt: Date;
  /** From this moment the model is refused; before it, the retirement is announced. */
  retiresAt: Date | null;
  retirementReason: string | null;
}

/** Approval date of the launch catalog (2026-11-21T00:00:00Z). */
export const LAUNCH = 1_795_219_200;

/** The project's own wiring model (below): the one name code uses for it. */
export const WIRING_MODEL_ID = "svc-dev/wiring-model";

/** The first approvals of every deployment: seeded into its database once (governance.ts). */
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

/** An announced retirement: the model is refused from `retiresAt` on. */
export interface Retirement {
  retiresAt: Date;
  reason: string;
}

export class Catalog {
  /** Entries this process adds itself, never governed (the wiring model, `svc dev --model`'s local model). */
  private readonly local: Map<string, CatalogModel>;
  /** The database's approvals as last loaded, retired ones included (their settled jobs stay readable). */
  private governed = new Map<string, GovernedModel>();
  /** Each model's tokenizer family, kept current across reloads: the inference part reads it per count. */
  readonly tokenizerFamilies = new Map<string, TokenizerFamilyName>();

  constructor(local: readonly CatalogModel[]) {
    this.local = new Map(local.map((m) => [m.id, m]));
    this.refreshFamilies();
  }

  /** The model if approved and not retired at `nowMs`: what requests and workers may use. */
  get(id: string, nowMs = Date.now()): CatalogModel | undefined {
    const local = this.local.get(id);
    if (local) return local;
    const governed = this.governed.get(id);
    return governed && !retiredAt(governed, nowMs) ? governed : undefined;
  }

  /** Every model approved and not retired at `nowMs`. */
  all(nowMs = Date.now()): CatalogModel[] {
    const governed = [...this.governed.values()].filter((m) => !this.local.has(m.id) && !retiredAt(m, nowMs));
    return [...governed, ...this.local.values()];
  }

  /** The model's announced retirement, pending or past (undefined for none, and for local entries). */
  retirement(id: string): Retirement | undefined {
    if (this.local.has(id)) return undefined;
    const governed = this.governed.get(id);
    return governed?.retiresAt && governed.retirementReason !== null ? { retiresAt: governed.retiresAt, reason: governed.retirementReason } : undefined;
  }

  /** Whether the id was ever approved, retired models included: past jobs name them. */
  known(id: string): boolean {
    return this.local.has(id) || this.governed.has(id);
  }

  /**
   * Add or replace a local entry (e.g. a GGUF served by `svc dev --model`), in memory only: it
   * names a file on one developer's machine and lives as long as that process serves it, where an
   * approval in a database other nodes may share would outlast it and offer it to every worker.
   */
  approve(model: CatalogModel): void {
    this.local.set(model.id, model);
    this.refreshFamilies();
  }

  /** The database's approvals, as just loaded, in place of the ones held. */
  replaceGoverned(models: readonly GovernedModel[]): void {
    this.governed = new Map(models.map((m) => [m.id, m]));
    this.refreshFamilies();
  }

  private refreshFamilies(): void {
    this.tokenizerFamilies.clear();
    for (const m of [...this.governed.values(), ...this.local.values()]) if (m.tokenizer) this.tokenizerFamilies.set(m.id, m.tokenizer);
  }
}

function retiredAt(model: GovernedModel, nowMs: number): boolean {
  return model.retiresAt !== null && model.retiresAt.getTime() <= nowMs;
}

/**
 * A node's catalog before the database's approvals are loaded: the wiring model, which stays a
 * local entry of every gateway rather than an approval. It is the project's own test fixture (a
 * hand-set GGUF every `svc worker` builds with `builtin`, the same everywhere), not a model anyone
 * governs; a smoke check of any deployment uses it, and no vote should be able to take that away.
 */
export function defaultCatalog(): Catalog {
  return new Catalog([WIRING_MODEL]);
}

/**
 * The refusal of a request naming a model the catalog does not serve: `model_not_found`, the
 * contract's code for it, whose message says when a retired model was retired and why.
 */
export function modelNotFound(catalog: Catalog, id: string): ApiError {
  const retirement = catalog.retirement(id);
  if (retirement && retirement.retiresAt.getTime() <= Date.now()) {
    return new ApiError("model_not_found", `The model '${id}' was retired on ${retirement.retiresAt.toISOString()} (${retirement.reason}) and is no longer served.`, "model");
  }
  return new ApiError("model_not_found", `The model '${id}' does not exist.`, "model");
}

export function ratesOf(model: CatalogModel) {
  return TIERS[model.tier];
}
