/** What the HTTP layer needs from the rest of the service. */
import type { Catalog } from "../catalog/index.ts";
import type { Logger, RateLimitOptions } from "../core/index.ts";
import type { Webhooks } from "../events/index.ts";
import type { JobService } from "../jobs/index.ts";
import type { WorkerPool } from "../network/index.ts";
import type { Db } from "../store/index.ts";
import type { ReadinessProbes } from "./routes/health.ts";
import type { WebOptions } from "../web/index.ts";

export interface HttpContext {
  db: Db;
  jobs: JobService;
  pool: WorkerPool;
  catalog: Catalog;
  logger: Logger;
  /** Origin of the web app; error bodies link to `<appUrl>/docs/errors#<code>`. */
  appUrl: string;
  rateLimit?: RateLimitOptions;
  /** Webhooks and their delivery records. */
  webhooks: Webhooks;
  /** The web app's sign-in options (dev wallet, session lifetime). */
  web: WebOptions;
  /** What GET /readyz checks. */
  readiness: ReadinessProbes;
}

declare module "fastify" {
  interface FastifyRequest {
    /** The wallet behind the request's API key, set by the authentication hook. */
    owner: { wallet: string; keyCreatedAt: Date };
    /** The wallet signed in to the web app, set by the /app/api session hook. */
    appWallet: string;
  }
}
