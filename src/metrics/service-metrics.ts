/**
 * What an operator scrapes, in Prometheus' text format (prom-client): the API's requests by route,
 * method and status with their times, paid requests by model, the time the gateway adds to its
 * workers' runs, the jobs not yet ended by status and the age of the oldest (the settlement
 * backlog), the jobs ended by status, the workers by model and standing, the chain journal's sends
 * and their fees, the ledger's totals, webhook delivery attempts, whether the database answers,
 * and Node's own health (event-loop delay, heap, GC). Labels are of low cardinality by
 * construction: a route is its pattern (`/v1/jobs/:id`), never a job id or a wallet, and a model
 * is a catalog id or `unknown`.
 */
import { performance } from "node:perf_hooks";
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { Catalog } from "../catalog/index.ts";
import { creditsToBaseUnits } from "../core/index.ts";
import type { Answered } from "../http/index.ts";
import { unfinishedJobCounts, UNFINISHED_STATUSES } from "../jobs/index.ts";
import { ledgerTotals, type CodeTotals } from "../ledger/index.ts";
import type { WorkerPool } from "../network/index.ts";
import type { Db } from "../store/index.ts";

export interface MetricsSources {
  db: Db;
  pool: WorkerPool;
  /** Which model ids may become a label. */
  catalog: Catalog;
}

export interface ServiceMetrics {
  registry: Registry;
  /** Counts one answered request (the HTTP server calls it when the response closes). */
  answered(a: Answered): void;
  /** Counts one send of a chain action by how it ended (the chain journal calls it). */
  chainSent(kind: string, outcome: string): void;
  /** Counts one webhook delivery attempt by how it ended (the delivery loop calls it). */
  webhookAttempt(outcome: string): void;
  /** Adds the fee of one landed chain transaction, by the kind of its actions (the chain journal calls it). */
  chainFee(kind: string, lamports: bigint): void;
  /** Counts one job this node moved to a final status (the jobs part calls it). */
  jobEnded(status: string): void;
}

/** Request times from a cache hit to a long stream; the gateway's own share is a few ms. */
const SECONDS_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
/** The gateway's own time on a request: a fraction of a millisecond idle, seconds when queued for a busy model. */
const ADDED_BUCKETS = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export function createServiceMetrics(sources: MetricsSources): ServiceMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const requests = new Counter({ name: "svc_http_requests_total", help: "Requests answered by the API and the app, by route pattern, method and status (0: the caller left before any answer).", labelNames: ["route", "method", "status"], registers: [registry] });
  const durations = new Histogram({ name: "svc_http_request_duration_seconds", help: "Time from a request's arrival to its response's end (a stream's last byte), by route pattern and status.", labelNames: ["route", "status"], buckets: SECONDS_BUCKETS, registers: [registry] });
  const chainSends = new Counter({ name: "svc_chain_sends_total", help: "Sends of chain actions by this process (a job's escrow lock, settlement or refund, a deposit...; several may share one transaction), by kind and how each ended: landed, refused (executed and refused), not_landed (its blockhash expired).", labelNames: ["kind", "outcome"], registers: [registry] });
  const webhookAttempts = new Counter({ name: "svc_webhook_deliveries_total", help: "Webhook delivery attempts by this node, by how each ended: delivered, retrying (failed, to be tried again), failed (the last attempt failed).", labelNames: ["outcome"], registers: [registry] });
  const chainFees = new Counter({ name: "svc_chain_fees_lamports_total", help: "Lamports paid in fees for the transactions this process's chain journal put on the chain (landed or executed and refused), by the kind of their actions.", labelNames: ["kind"], registers: [registry] });
  const jobsEnded = new Counter({ name: "svc_jobs_ended_total", help: "Jobs this node moved from an unfinished status to a final one, by that status (settled, failed, refunded).", labelNames: ["status"], registers: [registry] });
  const completion = completionMetrics(registry, sources.catalog);
  jobGauges(registry, sources.db);
  workerGauge(registry, sources.pool);
  databaseGauge(registry, sources.db);
  ledgerGauge(registry, sources.db);
  return {
    registry,
    answered(a) {
      const status = String(a.status);
      requests.inc({ route: a.route, method: a.method, status });
      durations.observe({ route: a.route, status }, a.ms / 1000);
      if (a.completion) completion(a, status);
    },
    chainSent: (kind, outcome) => chainSends.inc({ kind, outcome }),
    webhookAttempt: (outcome) => webhookAttempts.inc({ outcome }),
    chainFee: (kind, lamports) => chainFees.inc({ kind }, Number(lamports)),
    jobEnded: (status) => jobsEnded.inc({ status }),
  };
}

/**
 * A chat completion's request by model, and the gateway's share of its time: from its arrival to
 * its response's end, less its worker's run (StartedJob.workerRun: the job handed to the worker
 * that ran it, to that worker's `done` reaching the gateway); for a stream also up to its first
 * token written, less the worker's time to its first output. Only a completion whose worker
 * finished and whose caller read it to the end is timed so.
 */
function completionMetrics(registry: Registry, catalog: Catalog): (a: Answered, status: string) => void {
  const labelNames = ["model", "status", "stream"];
  const paid = new Counter({ name: "svc_paid_requests_total", help: "Chat completion requests that named a model, by model (a catalog id, else unknown), status and stream.", labelNames, registers: [registry] });
  const paidDurations = new Histogram({ name: "svc_paid_request_duration_seconds", help: "Time from a chat completion's arrival to its response's end, by model, status and stream.", labelNames, buckets: SECONDS_BUCKETS, registers: [registry] });
  const added = new Histogram({ name: "svc_gateway_added_seconds", help: "Per completed chat completion: arrival to response end, less the time from handing the job to the worker that ran it to that worker's last message reaching the gateway.", labelNames: ["stream"], buckets: ADDED_BUCKETS, registers: [registry] });
  const firstTokenAdded = new Histogram({ name: "svc_gateway_first_token_added_seconds", help: "Per completed stream: arrival to its first token written to the caller, less the time from handing the job to its worker to that worker's first output reaching the gateway.", buckets: ADDED_BUCKETS, registers: [registry] });
  return (a, status) => {
    const { model, stream, workerRun: run, firstSentAt } = a.completion!;
    const labels = { model: catalog.get(model) ? model : "unknown", status, stream: String(stream) };
    paid.inc(labels);
    paidDurations.observe(labels, a.ms / 1000);
    if (a.status !== 200 || !a.finished || run?.doneAt === undefined) return;
    added.observe({ stream: labels.stream }, Math.max(0, a.ms - (run.doneAt - run.dispatchedAt)) / 1000);
    if (stream && firstSentAt !== undefined && run.firstOutputAt !== undefined) {
      firstTokenAdded.observe(Math.max(0, firstSentAt - a.arrivedAt - (run.firstOutputAt - run.dispatchedAt)) / 1000);
    }
  };
}

/**
 * The ledger's totals in credits, summed over its accounts at each scrape (one statement,
 * ledgerTotals). `refunded` is what went back to wallets after being charged (a charge the chain
 * refused, a dispute upheld): wallets are credited only by deposits and those.
 */
function ledgerGauge(registry: Registry, db: Db): void {
  const perCredit = Number(creditsToBaseUnits(1));
  const credits = (units: bigint) => Number(units) / perCredit;
  const held = (t: CodeTotals) => t.creditsPosted - t.debitsPosted;
  new Gauge({
    name: "svc_ledger_credits",
    help: "The ledger's totals in credits: wallets_available (spendable), wallets_held (pending: job locks, withdrawals in flight, dispute bonds), escrow_locked (open job locks), escrow_charged (charged, awaiting the settlement's confirmation), workers_paid, treasury, refunded, deposited, withdrawn, withdrawing.",
    labelNames: ["total"],
    registers: [registry],
    async collect() {
      const { wallet, escrow, worker, treasury, funding } = await ledgerTotals(db);
      const totals: Record<string, bigint> = {
        wallets_available: held(wallet) - wallet.debitsPending,
        wallets_held: wallet.debitsPending,
        escrow_locked: escrow.creditsPending,
        escrow_charged: held(escrow),
        workers_paid: worker.creditsPosted,
        treasury: held(treasury),
        refunded: wallet.creditsPosted - funding.debitsPosted,
        deposited: funding.debitsPosted,
        withdrawn: funding.creditsPosted,
        withdrawing: funding.creditsPending,
      };
      for (const [total, units] of Object.entries(totals)) this.set({ total }, credits(units));
    },
  });
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
    help: "Time the database took to answer a trivial query at the scrape (its round trip, or an embedded database's turn on the main thread).",
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
