/**
 * The Usage page's spend per day and model, and the Overview's first steps (credits, a key, a
 * first request), for the signed-in wallet. The jobs, accounts and wallets parts answer through
 * the functions given here; this part reads no table of theirs.
 */
import type { FastifyInstance } from "fastify";
import { ERROR_RESPONSES, int, maybe, object, str } from "../http/index.ts";
import type { DailySpend } from "../jobs/index.ts";

/** The Usage page covers this many UTC days, today included. */
export const USAGE_DAYS = 30;

export interface UsagePageOptions {
  /** The wallet's charged credits per UTC day and model over the last `days` days (jobs' spendByDay). */
  spendByDay(wallet: string, days: number): Promise<DailySpend[]>;
  availableCredits(wallet: string): Promise<number>;
  /** Whether the wallet holds a live (not revoked) API key. */
  hasApiKey(wallet: string): Promise<boolean>;
  /** Whether the wallet ever made a job. */
  hasJob(wallet: string): Promise<boolean>;
  /** Catalog models that a worker serves now, as GET /v1/models lists them. */
  servedModels(): string[];
  /** The app's origin, which serves /v1 too. */
  appUrl(): string;
}

const spend = { credits: int, jobs: int };
const modelSpend = object({ model: str, ...spend });
const usage = object({
  object: { const: "usage" },
  days: int,
  credits_spent: int,
  jobs: int,
  models: { type: "array", items: modelSpend, description: "each model's totals, most credits first" },
  data: {
    type: "array",
    description: "every day of the period, oldest first, with the models spent on that day",
    items: object({ day: { ...str, description: "the UTC day, YYYY-MM-DD" }, ...spend, models: { type: "array", items: modelSpend } }),
  },
});
const firstSteps = object({
  object: { const: "first_steps" },
  base_url: { ...str, description: "the API's base URL: the app's origin and /v1" },
  model: { ...maybe("string"), description: "a model served now, for the example request; null when none is" },
  models: { type: "array", items: str, description: "the models served now" },
  credits_remaining: int,
  steps: object({ credits: { type: "boolean" }, api_key: { type: "boolean" }, first_request: { type: "boolean" } }),
});
const respond = (body: unknown) => ({ schema: { response: { 200: body, ...ERROR_RESPONSES } } });

/** The UTC days `YYYY-MM-DD` of the `days` days ending with `now`'s, oldest first. */
export function periodDays(days: number, now = new Date()): string[] {
  return Array.from({ length: days }, (_, i) => new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() - (days - 1 - i))).toISOString().slice(0, 10));
}

/** The answer of GET /usage: every day of the period (zero when nothing was spent) and the totals. Pure. */
export function usageToApi(rows: readonly DailySpend[], days: string[]) {
  const byDay = new Map(days.map((day) => [day, { day, credits: 0, jobs: 0, models: [] as { model: string; credits: number; jobs: number }[] }]));
  const byModel = new Map<string, { model: string; credits: number; jobs: number }>();
  for (const row of rows) {
    const day = byDay.get(row.day);
    if (!day) continue;
    day.credits += row.credits;
    day.jobs += row.jobs;
    day.models.push({ model: row.model, credits: row.credits, jobs: row.jobs });
    const total = byModel.get(row.model) ?? { model: row.model, credits: 0, jobs: 0 };
    total.credits += row.credits;
    total.jobs += row.jobs;
    byModel.set(row.model, total);
  }
  const models = [...byModel.values()].sort((a, b) => b.credits - a.credits || a.model.localeCompare(b.model));
  const data = [...byDay.values()];
  return {
    object: "usage",
    days: days.length,
    credits_spent: data.reduce((n, d) => n + d.credits, 0),
    jobs: data.reduce((n, d) => n + d.jobs, 0),
    models,
    data,
  };
}

export async function usagePageRoutes(app: FastifyInstance, options: UsagePageOptions): Promise<void> {
  app.get("/usage", respond(usage), async (request) => {
    const now = new Date();
    return usageToApi(await options.spendByDay(request.appWallet, USAGE_DAYS), periodDays(USAGE_DAYS, now));
  });

  app.get("/first-steps", respond(firstSteps), async (request) => {
    const wallet = request.appWallet;
    const [credits, apiKey, firstRequest] = await Promise.all([options.availableCredits(wallet), options.hasApiKey(wallet), options.hasJob(wallet)]);
    const models = options.servedModels();
    return {
      object: "first_steps",
      base_url: `${new URL(options.appUrl()).origin}/v1`,
      model: models[0] ?? null,
      models,
      credits_remaining: credits,
      steps: { credits: credits > 0, api_key: apiKey, first_request: firstRequest },
    };
  });
}
