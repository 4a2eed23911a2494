/**
 * Governance of the catalog: approving a model, announcing its retirement, and every node's
 * in-memory catalog kept equal to the approvals. A change commits in approved_models, whose
 * trigger NOTIFYs (schema.ts); each node then reloads the table. The functions take a Db and open
 * no transaction of their own, so `svc admin` runs them in its transaction with its audit row.
 */
import { type Logger, TIERS, type Tier } from "../core/index.ts";
import { type Db, valuesList } from "../store/index.ts";
import { type Catalog, type GovernedModel, LAUNCH, LAUNCH_CATALOG } from "./catalog.ts";
import { MODEL_APPROVAL_CHANGES } from "./schema.ts";

/** What an approval states about a model; its approval date is the database's clock. */
export interface ModelApproval {
  id: string;
  ownedBy: string;
  tier: Tier;
  parameters: string;
  contextWindow: number;
  description: string;
  tokenizer?: "llama3" | "qwen" | "mistral" | "gemma3";
}

const TIER_NAMES = Object.keys(TIERS);
const TOKENIZERS = ["llama3", "qwen", "mistral", "gemma3"];
const COLUMNS = "id, owned_by, tier, parameters, context_window, description, tokenizer";
const COLUMN_TYPES = ["text", "text", "text", "text", "integer", "text", "text"];

/** Refuses an approval the catalog could not serve, with a message an operator can act on. */
function checkApproval(model: ModelApproval): void {
  // A worker names the model as `<id>=<engine>` (worker/engine-spec.ts): no spaces, no '='.
  if (!/^[^\s=]+$/.test(model.id)) throw new Error(`a model id is non-empty, without spaces or '=': '${model.id}'`);
  if (!TIER_NAMES.includes(model.tier)) throw new Error(`tier '${model.tier}' is not one of ${TIER_NAMES.join(", ")}`);
  if (!Number.isSafeInteger(model.contextWindow) || model.contextWindow <= 0) throw new Error(`the context window is a positive number of tokens, not ${model.contextWindow}`);
  if (model.tokenizer !== undefined && !TOKENIZERS.includes(model.tokenizer)) throw new Error(`tokenizer '${model.tokenizer}' is not one of ${TOKENIZERS.join(", ")}`);
  for (const [field, value] of [["ownedBy", model.ownedBy], ["parameters", model.parameters], ["description", model.description]] as const) {
    if (value.trim() === "") throw new Error(`${field} is empty`);
  }
}

const approvalValues = (m: ModelApproval) => [m.id, m.ownedBy, m.tier, m.parameters, m.contextWindow, m.description, m.tokenizer ?? null];

/**
 * Approves the model, or re-approves one already approved: its fields are replaced and a pending
 * or past retirement is cleared. Its approval date stays the first one, the `created` callers see.
 */
export async function approveModel(db: Db, model: ModelApproval): Promise<void> {
  checkApproval(model);
  await db.query(
    `INSERT INTO approved_models (${COLUMNS}) VALUES ${valuesList(1, COLUMN_TYPES)}
     ON CONFLICT (id) DO UPDATE SET owned_by = EXCLUDED.owned_by, tier = EXCLUDED.tier, parameters = EXCLUDED.parameters,
       context_window = EXCLUDED.context_window, description = EXCLUDED.description, tokenizer = EXCLUDED.tokenizer,
       retires_at = NULL, retirement_reason = NULL`,
    approvalValues(model),
  );
}

/**
 * Announces the model's retirement: GET /models shows the date until it comes, and from then on
 * the model is refused. A date already past retires it at once. The row stays, for its past jobs.
 */
export async function retireModel(db: Db, id: string, retiresAt: Date, reason: string): Promise<void> {
  if (Number.isNaN(retiresAt.getTime())) throw new Error("the retirement date is not a valid date");
  if (reason.trim() === "") throw new Error("a retirement needs a reason: callers are shown it");
  const rows = await db.query("UPDATE approved_models SET retires_at = $2, retirement_reason = $3 WHERE id = $1 RETURNING id", [id, retiresAt, reason]);
  if (rows.length === 0) throw new Error(`model '${id}' is not approved in this deployment's catalog, so it cannot be retired (svc admin models list shows the approved ones)`);
}

interface ApprovalRow {
  id: string;
  owned_by: string;
  tier: Tier;
  parameters: string;
  context_window: number;
  description: string;
  tokenizer: GovernedModel["tokenizer"] | null;
  approved_at: Date;
  retires_at: Date | null;
  retirement_reason: string | null;
}

/** Every approval, retired ones included, oldest first. */
export async function listGovernedModels(db: Db): Promise<GovernedModel[]> {
  const rows = await db.query<ApprovalRow>(`SELECT ${COLUMNS}, approved_at, retires_at, retirement_reason FROM approved_models ORDER BY approved_at, id`);
  return rows.map((r) => ({
    id: r.id,
    ownedBy: r.owned_by,
    tier: r.tier,
    parameters: r.parameters,
    contextWindow: r.context_window,
    created: Math.floor(r.approved_at.getTime() / 1000),
    description: r.description,
    ...(r.tokenizer !== null ? { tokenizer: r.tokenizer } : {}),
    approvedAt: r.approved_at,
    retiresAt: r.retires_at,
    retirementReason: r.retirement_reason,
  }));
}

/**
 * The launch catalog as the first approvals. Run at every start: a row already there is left as
 * it is, so an operator's later change (a retirement, a re-approval) is never undone by a restart.
 */
export async function seedLaunchCatalog(db: Db): Promise<void> {
  const params = LAUNCH_CATALOG.flatMap(approvalValues);
  const launchAt = params.length + 1;
  const rows = valuesList(LAUNCH_CATALOG.length, COLUMN_TYPES);
  // `WHERE true`: without it SQLite would read the ON of ON CONFLICT as a join's.
  await db.query(
    `INSERT INTO approved_models (${COLUMNS}, approved_at)
     SELECT v.*, $${launchAt}::timestamptz FROM (VALUES ${rows}) AS v WHERE true
     ON CONFLICT (id) DO NOTHING`,
    [...params, new Date(LAUNCH * 1000)],
  );
}

/** Reloads the approvals into the catalog; reloads asked for while one runs make one more after it. */
class CatalogReloads {
  private running: Promise<void> | undefined;
  private again = false;

  constructor(private readonly db: Db, private readonly catalog: Catalog, private readonly logger: Logger) {}

  request(): void {
    if (this.running) this.again = true;
    else this.running = this.run();
  }

  async now(): Promise<void> {
    this.catalog.replaceGoverned(await listGovernedModels(this.db));
  }

  private async run(): Promise<void> {
    do {
      this.again = false;
      // A failed reload keeps the approvals held; the next change, or a resumed listener, tries again.
      await this.now().catch((error: unknown) => this.logger.warn({ err: error }, "could not reload the model catalog"));
    } while (this.again);
    this.running = undefined;
  }
}

/**
 * Seeds the launch catalog, loads the approvals into `catalog`, and from then on reloads them on
 * every change any node commits. Listening starts before the first load, so no change falls in
 * between. While the listening connection is lost the catalog keeps what it holds (a retirement
 * date still takes effect: `Catalog.get` compares it with the clock); it reloads once resumed.
 */
export async function loadGovernedCatalog(db: Db, catalog: Catalog, logger: Logger): Promise<void> {
  await seedLaunchCatalog(db);
  const reloads = new CatalogReloads(db, catalog, logger);
  await db.listen?.(MODEL_APPROVAL_CHANGES, { notified: () => reloads.request(), lost: () => undefined, resumed: () => reloads.request() });
  await reloads.now();
}
