/**
 * What an operator scrapes, in Prometheus' text format (prom-client): the API's requests by route,
 * method and status with their times, the jobs not yet ended by status and the age of the oldest
 * (the settlement backlog), the workers by model and standing, the chain journal's sends, webhook
 * delivery attempts, whether the database answers, and Node's own health (event-loop delay, heap,
 * GC). Labels are of low cardinality by construction: a route is its pattern
 * (`/v1/jobs/:id`), never a job id or a wallet.
 */
import { performance } from "node:perf_hooks";
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { Answered } from "../http/index.ts";
import { unfinishedJobCounts, UNFINISHED_STATUSES } from "../jobs/index.ts";
import type { WorkerPool } from "../network/index.ts";
import type { Db } from "../store/index.ts";

export interface MetricsSources {
  db: Db;
  pool: WorkerPool;
}

export interface ServiceMetrics {
  registry: Registry;
  /** Counts one answered request (the HTTP server calls it when the response closes). */
  answered(a: Answered): void;
  /** Counts one send of a chain action by how it ended (the chain journal calls it). */
  chainSent(kind: string, outcome: string): void;
  /** Counts one webhook delivery attempt by how it ended (the delivery loop calls it). */
  webhookAttempt(outcome: string): void;
}

/** Request times from a cache hit to a long stream; the gateway's own share is a few ms. */
const SECONDS_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

export function createServiceMetrics(sources: MetricsSources): ServiceMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const requests = new Counter({ name: "svc_http_requests_total", help: "Requests answered by the API and the app, by route pattern, method and status (0: the caller left before any answer).", labelNames: ["route", "method", "status"], registers: [registry] });
  const durations = new Histogram({ name: "svc_http_request_duration_seconds", help: "Time from a request's arrival to its response's end (a stream's last byte), by route pattern and status.", labelNames: ["route", "status"], buckets: SECONDS_BUCKETS, registers: [registry] });
  const chainSends = new Counter({ name: "svc_chain_sends_total", help: "Sends of chain actions by this process (a job's escrow lock, settlement or refund, a deposit...; several may share one transaction), by kind and how each ended: landed, refused (executed and refused), not_landed (its blockhash expired).", labelNames: ["kind", "outcome"], registers: [registry] });
  const webhookAttempts = new Counter({ name: "svc_webhook_deliveries_total", help: "Webhook delivery attempts by this node, by how each ended: delivered, retrying (failed, to be tried again), failed (the last attempt failed).", labelNames: ["outcome"], registers: [registry] });
  jobGauges(registry, sources.db);
  workerGauge(registry, sources.pool);
  databaseGauge(registry, sources.db);
  return {
    registry,
    answered(a) {
      const status = String(a.status);
      requests.inc({ route: a.route, method: a.method, status });
      durations.observe({ route: a.route, status }, a.ms / 1000);
    },
    chainSent: (kind, outcome) => chainSends.inc({ kind, outcome }),
    webhookAttempt: (outcome) => webhookAttempts.inc({ outcome }),
  };
}

/** How long the database takes to answer a trivial query at the scrape; 0 reads as down (the scrape still answers). */
function databaseGauge(registry: Registry, db: Db): void {
  new Gauge({
    name: "svc_database_up",
    help: "1 when the database answered a trivial query at the scrape, 0 when it failed.",
    registers: [registry],
    async collect() {
      this.set(await db.query("SELECT 1").then(() => 1, () => 0));
    },
  });
  new Gauge({
    name: "svc_database_query_seconds",
    help: "Time the database took to answer a trivial query at the scrape (its round trip, or PGlite's turn on the main thread).",
    registers: [registry],
    async collect() {
      const started = performance.now();
      await db.query("SELECT 1").catch(() => undefined);
      this.set((performance.now() - started) / 1000);
    },
  });
}

/** The jobs not yet ended, read at each scrape through the unfinished queue (its cost follows the backlog). */
function jobGauges(registry: Registry, db: Db): void {
  let latest: ReturnType<typeof unfinishedJobCounts> | undefined;
  // Both gauges read one query per scrape: the first to collect starts it, the second shares it.
  const read = () => (latest ??= unfinishedJobCounts(db).finally(() => setImmediate(() => (latest = undefined))));
  new Gauge({
    name: "svc_jobs_unfinished",
    help: "Jobs not yet ended (pending, processing, settling), by status: the settlement backlog.",
    labelNames: ["status"],
    registers: [registry],
    async collect() {
      const { byStatus } = await read();
      for (const status of UNFINISHED_STATUSES) this.set({ status }, byStatus[status] ?? 0);
    },
  });
  new Gauge({
    name: "svc_jobs_unfinished_oldest_age_seconds",
    help: "Age of the oldest job not yet ended; 0 when there is none.",
    registers: [registry],
    async collect() {
      const { oldestCreatedAt } = await read();
      this.set(oldestCreatedAt ? Math.max(0, (Date.now() - oldestCreatedAt.getTime()) / 1000) : 0);
    },
  });
}

/** Workers hosting each model, by standing (good, demoted, unfit), as this node's pool holds them. */
function workerGauge(registry: Registry, pool: WorkerPool): void {
  new Gauge({
    name: "svc_workers",
    help: "Workers hosting a model in this node's pool, by model and standing.",
    labelNames: ["model", "standing"],
    registers: [registry],
    collect() {
      this.reset();
      for (const model of pool.hostedModels()) {
        for (const worker of pool.hosting(model)) this.inc({ model, standing: pool.health(worker.address)?.standing ?? "good" });
      }
    },
  });
}
