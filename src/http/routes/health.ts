/**
 * GET /healthz (liveness) and GET /readyz (readiness) for operators and load balancers, at the
 * root, without an API key and outside the per-IP burst limit: a probe refused with 429 would
 * take a healthy node out of rotation. Liveness touches nothing; readiness checks the database,
 * the chain, the message bus (on a node that shares work with others) and that some worker is
 * reachable, at most once a second however often it is asked.
 */
import type { FastifyInstance } from "fastify";
import type { Logger } from "../../core/index.ts";

/** What readiness asks of the rest of the service. */
export interface ReadinessProbes {
  /** Resolves once the database answered a query. */
  database(): Promise<unknown>;
  /** Resolves once the chain answered (its current slot). */
  chain(): Promise<unknown>;
  /** Workers reachable now (connected here, or to another node over the bus) that callers' jobs may go to. */
  workers(): number;
  /** Whether the message bus to the other nodes is connected; absent on a node that has none. */
  bus?(): boolean;
}

/** A check slower than this counts as failed, so a hung dependency still gets a prompt 503. */
export const READINESS_TIMEOUT_MS = 2_000;
/** Readiness answers from one check for this long. */
const READINESS_CACHE_MS = 1_000;

type CheckResult = "ok" | string;

export interface Readiness {
  status: "ready" | "not_ready";
  checks: { database: CheckResult; chain: CheckResult; workers: CheckResult; bus?: CheckResult };
}

async function probe(name: string, check: () => Promise<unknown>, logger: Logger, timeoutMs: number): Promise<CheckResult> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<CheckResult>((resolve) => {
    timer = setTimeout(() => resolve(`no answer within ${timeoutMs} ms`), timeoutMs);
  });
  const answered = check().then(
    (): CheckResult => "ok",
    (error: unknown): CheckResult => {
      // The reason goes to the log; the unauthenticated answer only says which part failed.
      logger.warn({ err: error, check: name }, "readiness check failed");
      return "unreachable";
    },
  );
  try {
    return await Promise.race([answered, timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

export async function checkReadiness(probes: ReadinessProbes, logger: Logger, timeoutMs = READINESS_TIMEOUT_MS): Promise<Readiness> {
  const [database, chain] = await Promise.all([probe("database", probes.database, logger, timeoutMs), probe("chain", probes.chain, logger, timeoutMs)]);
  const workers = probes.workers() > 0 ? "ok" : "no worker connected that is sold to callers";
  const bus = probes.bus === undefined ? undefined : probes.bus() ? "ok" : "disconnected";
  const ready = database === "ok" && chain === "ok" && workers === "ok" && (bus === undefined || bus === "ok");
  return { status: ready ? "ready" : "not_ready", checks: { database, chain, workers, ...(bus === undefined ? {} : { bus }) } };
}

const check = { type: "string" } as const;
const readinessSchema = {
  type: "object",
  properties: {
    status: { type: "string" },
    checks: { type: "object", properties: { database: check, chain: check, workers: check, bus: check } },
  },
} as const;

export interface HealthRoutesOptions {
  probes: ReadinessProbes;
  logger: Logger;
}

export async function healthRoutes(app: FastifyInstance, { probes, logger }: HealthRoutesOptions): Promise<void> {
  const config = { public: true, rateLimited: false };
  app.get(
    "/healthz",
    { config, schema: { response: { 200: { type: "object", properties: { status: { type: "string" } } } } } },
    async () => ({ status: "ok" }),
  );

  let last: { at: number; answer: Promise<Readiness> } | undefined;
  app.get("/readyz", { config, schema: { response: { 200: readinessSchema, 503: readinessSchema } } }, async (_request, reply) => {
    if (last === undefined || Date.now() - last.at >= READINESS_CACHE_MS) last = { at: Date.now(), answer: checkReadiness(probes, logger) };
    const readiness = await last.answer;
    reply.header("cache-control", "no-store");
    // Like every 503 of the service, say when to ask again: the answer holds for that long.
    if (readiness.status !== "ready") reply.header("retry-after", String(Math.ceil(READINESS_CACHE_MS / 1000)));
    return reply.status(readiness.status === "ready" ? 200 : 503).send(readiness);
  });
}
