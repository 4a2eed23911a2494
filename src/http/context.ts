/** What the HTTP layer needs from the rest of the service. */
import type { Catalog } from "../catalog/index.ts";
import type { Logger, RateLimitOptions } from "../core/index.ts";
import type { JobService } from "../jobs/index.ts";
import type { WorkerPool } from "../network/index.ts";
import type { ReadinessProbes } from "./routes/health.ts";
import type { AccountRoutesOptions } from "./routes/account.ts";
import type { DisputeRoutesOptions } from "./routes/disputes.ts";
import type { JobRoutesOptions } from "./routes/jobs.ts";
import type { WebhookRoutesOptions } from "./routes/webhooks.ts";
import type { IdempotencyPort } from "./idempotency.ts";
import type { Answered } from "./request-log.ts";

/** Who sent a request, as its API key says. */
export interface KeyOwner {
  wallet: string;
  keyCreatedAt: Date;
  /** Set when the key was accepted from a cache that may not yet know of its revocation: the job's admission confirms it. */
  keyToConfirm?: string;
}

/**
 * The functions the routes are given, bound to the parts that own the data by whoever assembles
 * the service (src/ports.ts), so that nothing in this part holds a database handle.
 */
export interface HttpPorts {
  /**
   * The wallet behind an Authorization header value, or the spec's authentication error. Every
   * request with a revoked key is refused (spec): a key taken from a cache that may lag is
   * confirmed in the database now, unless `confirmedAtAdmission` (the route spends only through
   * a job's admission, which confirms `keyToConfirm` in its own transaction).
   */
  authenticate(authorization: string | undefined, confirmedAtAdmission: boolean): Promise<KeyOwner>;
  account: AccountRoutesOptions;
  jobs: JobRoutesOptions;
  disputes: DisputeRoutesOptions;
  webhooks: WebhookRoutesOptions;
  /** The stored `Idempotency-Key`s of the POST routes. */
  idempotency: IdempotencyPort;
}

export interface HttpContext {
  ports: HttpPorts;
  jobs: JobService;
  pool: WorkerPool;
  catalog: Catalog;
  logger: Logger;
  /** Origin of the web app; error bodies link to `<appUrl>/docs/errors#<code>`. */
  appUrl: string;
  /** The per-IP limit; false turns it off (DECISIONS: 50/s, burst 100 by default). */
  rateLimit?: RateLimitOptions | false;
  /**
   * The proxies in front of the server (addresses or CIDR ranges) whose X-Forwarded-For names the
   * client: the per-address limits then count clients, not the proxy. None by default.
   */
  trustProxy?: string[];
  /** Refused requests per address (default REFUSALS_PER_ADDRESS); false turns the limit off. */
  refusalLimit?: RateLimitOptions | false;
  /** How long a request (headers and body) may take to arrive; default REQUEST_TIMEOUT_MS. */
  requestTimeoutMs?: number;
  /** What GET /readyz checks. */
  readiness: ReadinessProbes;
  /** Told of every answered request (the metrics' counts and times). */
  answered?: (a: Answered) => void;
}

declare module "fastify" {
  interface FastifyRequest {
    /** The wallet behind the request's API key, set by the authentication hook. */
    owner: KeyOwner;
    /** The wallet signed in to the web app, set by the /app/api session hook. */
    appWallet: string;
  }
}
