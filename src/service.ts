/**
 * The gateway assembled: database (SQLite, PGlite or PostgreSQL), the chain (embedded LiteSVM), the
 * catalog, the worker pool with the worker protocol's endpoint, the job service and the HTTP
 * server. `svc dev` and the tests both start it through `startService`.
 */
import { tmpdir } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import { join } from "node:path";
import { createServiceMetrics, startMetricsServer, type MetricsServer, type ServiceMetrics } from "./metrics/index.ts";
import type { FastifyInstance } from "fastify";
import { ACCOUNTS_MIGRATIONS, ApiKeyCache } from "./accounts/index.ts";
import { CATALOG_MIGRATIONS, defaultCatalog, loadGovernedCatalog, WIRING_MODEL_ID, type Catalog } from "./catalog/index.ts";
import { type ActionOwnerNode, CHAIN_MIGRATIONS, type Chain, ChainJournal, openChain, type OpenChainOptions } from "./chain/index.ts";
import { DISPUTE_WINDOW_MS, JOB_TIMEOUT_MS, type Logger, awaitedLater, type RateLimitOptions, type Signer, silentLogger } from "./core/index.ts";
import { type HttpContext, buildServer, checkParams } from "./http/index.ts";
import { httpPorts, moneyPages, webAppPorts } from "./ports.ts";
import { EVENTS_MIGRATIONS, emitWorkerRegistered, openWebhooks, startWebhookDelivery, type DeliveryLoop, type WebhookOptions, type Webhooks } from "./events/index.ts";
import {
  ARBITRATION_WINDOW_HOURS,
  Arbitration,
  DEFAULT_AUDIT_SHARE,
  DEFAULT_FIRST_TOKEN_TIMEOUT_MS,
  DEFAULT_PROVEN_AUDIT_SHARE,
  DEFAULT_SLASH_SHARE_BPS,
  Disputes,
  JOBS_MIGRATIONS,
  JobService,
  Probation,
  unfinishedJobIds,
} from "./jobs/index.ts";
import { CreditBook, Deposits, WalletPayments, moveCustodialCredits } from "./wallets/index.ts";
import { LEDGER_MIGRATIONS } from "./ledger/index.ts";
import { FamilyTokenizers, ModelVocabularies, ensureWiringModel } from "./inference/index.ts";
import { NETWORK_MIGRATIONS, NodeBridge, WorkerGateway, type WorkerHandle, type WorkerLimits, WorkerPool, WorkerTrust, followWorkerSuspensions } from "./network/index.ts";
import { type Bus, connectBus } from "./bus/index.ts";
import { NODES_MIGRATIONS, NodeLease, deploymentId, loadNodeId } from "./nodes/index.ts";
import { ADMIN_MIGRATIONS, type AdminSocket, serveAdminSocket } from "./admin/index.ts";
import { type Db, type EmbeddedEngine, isEmbedded, migrate, openDb } from "./store/index.ts";
import { IDEMPOTENCY_MIGRATIONS } from "./idempotency/index.ts";
import { WEB_MIGRATIONS, type WebOptions, registerWebApp } from "./web/index.ts";
import { startTracing, type TracingHandle, type TracingOptions, tracingWanted } from "./tracing/index.ts";

export const DEFAULT_PORT = 8080;
/** How long a shutdown lets HTTP connections end by themselves once every job is done. */
const CLOSE_GRACE_MS = 2_000;
/** A chain action open this long with nobody waiting on it was left by a send that gave up. */
const STALE_ACTION_MS = 60_000;

export interface ServiceOptions {
  /** An open database to use (the service takes it over and closes it); else one is opened. */
  db?: Db;
  /** Where the embedded database and the chain keep their files; without it everything lives in memory. */
  dataDir?: string;
  /** The engine a new embedded database is made with (default SQLite); one already in the data dir keeps its own. */
  embedded?: EmbeddedEngine;
  /** Use PostgreSQL instead of an embedded database. */
  databaseUrl?: string;
  /** This gateway's id among nodes sharing a database (default: kept in the data dir, else new each start). */
  nodeId?: string;
  /** How long a node's lease lasts unrenewed before a survivor takes over its jobs (default 10 s). */
  nodeLeaseMs?: number;
  /** A chain action of this node open this long with no send waiting on it is finished as at a restart (default 60 s). */
  staleActionMs?: number;
  /** NATS, shared with the other gateway nodes: requests here can run on workers connected there. */
  natsUrl?: string;
  /** How often this node announces its workers on the bus (default 2 s; tests shorten it). */
  announceMs?: number;
  /** A Solana cluster's JSON-RPC address instead of the embedded chain (OpenChainOptions.chainUrl). */
  chainUrl?: string;
  /** The service's chain keys, when not `<dataDir>/keys`: every gateway on one chain holds the same. */
  keysDir?: string;
  /** OpenChainOptions.priorityFeeMicroLamports. */
  priorityFeeMicroLamports?: bigint;
  /** PostgreSQL schema to work in (tests isolate themselves this way). */
  databaseSchema?: string;
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  appUrl?: string;
  jobTimeoutMs?: number;
  /** The per-IP limit (`parseRateLimit`); false turns it off. */
  rateLimit?: RateLimitOptions | false;
  /** The proxies in front of the gateway whose X-Forwarded-For names the client (addresses or CIDRs). */
  trustProxy?: string[];
  /** Refused requests per address before it is answered 429 (http REFUSALS_PER_ADDRESS); false turns it off. */
  refusalLimit?: RateLimitOptions | false;
  /** How long a request (headers and body) may take to arrive at the API and the app (default 30 s). */
  requestTimeoutMs?: number;
  logger?: Logger;
  catalog?: Catalog;
  /** Workers that run inside this process, outside the worker protocol: the operator's own, in its seed pool. */
  seedWorkers?: WorkerHandle[];
  /**
   * Addresses of more workers of the operator's seed pool: vouched for without a probation, and
   * trusted above any stake when outputs disagree (network/worker-trust.ts). Only the operator's
   * own workers belong here.
   */
  seedPool?: string[];
  /** Probation checks a worker that is neither vouched for nor staked must pass to be sold (default 10). */
  probationChecks?: number;
  /** Webhooks: `svc dev` allows http://localhost; tests scale the retry delays and trust their receiver's CA. */
  webhooks?: WebhookOptions;
  /** Worker protocol: silence after which a worker is dropped (default 15 s). */
  workerHeartbeatTimeoutMs?: number;
  /** Worker protocol: time a worker has to count a prompt (default 10 s). */
  workerCountTimeoutMs?: number;
  /** Worker protocol: the host workers sign into the handshake, when a proxy rewrites the Host header. */
  workerPublicHost?: string;
  /** Worker protocol: time a new worker has to finish its probe job (default 30 s). */
  workerProbeTimeoutMs?: number;
  /** Worker protocol: handshakes per IP and messages per connection (worker-limits.ts has the defaults). */
  workerLimits?: Partial<WorkerLimits>;
  /** A worker with no token this long after taking a job is stalling; the job moves on (default 60 s). */
  firstTokenTimeoutMs?: number;
  /** How long a request waits for a slot while every worker of its model is busy (default 30 s). */
  queueWaitMs?: number;
  /** How long a retry with an `Idempotency-Key` waits for the first request's outcome before 409 (default 30 s). */
  idempotencyWaitMs?: number;
  /** The web app: session lifetime, and in `svc dev` the dev wallet it can sign in as. */
  web?: WebOptions;
  /** FAULT INJECTION, for tests only: settle on workers' claimed hashes, unchecked (JobServiceOptions). */
  skipProofCheck?: boolean;
  /** Callers answered before their settlements confirm, at most (default 64; JobServiceOptions). */
  maxAnsweredUnconfirmed?: number;
  /** How long a job whose lock the credit book granted waits at most for its output before it is recorded (default 5 ms; JobServiceOptions). */
  admissionDeferMs?: number;
  /** Disputes: the filing window after the final token, arbitration's wait for workers and retry, the slashed share. */
  disputes?: { windowMs?: number; arbitrationWindowMs?: number; arbitrationRetryMs?: number; slashShareBps?: bigint; auditShare?: number; provenAuditShare?: number };
  /** The escrow program's rules when the chain is new (tests shorten its job timeout). */
  escrowRules?: OpenChainOptions["escrowRules"];
  /** Serve Prometheus metrics on a port of its own (default host 127.0.0.1; port 0 picks one); none without it. */
  metrics?: { port: number; host?: string };
  /** Lock jobs into their wallets' escrow tables and settle them in batches (JobServiceOptions.escrowTables; default true). */
  escrowTables?: boolean;
  /**
   * Whether this process is the only writer of its ledger, so it can hold its wallets' credits in
   * memory and answer a caller whose lock they cover before the admission commits
   * (JobServiceOptions.book). Default: on the embedded store, which one process owns; never on
   * PostgreSQL, which other nodes may share.
   */
  soleLedgerWriter?: boolean;
  /**
   * Export OpenTelemetry traces over OTLP (src/tracing; docs/deploy.md "Tracing"). Default: when
   * OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set.
   */
  tracing?: boolean | TracingOptions;
}

export interface Service {
  /** This gateway's id among the nodes sharing its database. */
  nodeId: string;
  /** `http://host:port/v1`. */
  baseUrl: string;
  /** `http://host:port`: what `svc worker --gateway` takes. */
  origin: string;
  /** The worker protocol's endpoint (`/v1/workers/connect`) on the same port. */
  workers: WorkerGateway;
  app: FastifyInstance;
  db: Db;
  chain: Chain;
  catalog: Catalog;
  /** Who the operator vouches for (its seed pool), and what each worker's word weighs. */
  trust: WorkerTrust;
  pool: WorkerPool;
  jobs: JobService;
  /** The journal of every chain transaction the service sends. */
  journal: ChainJournal;
  /** Funding wallets (development deposits), through the journal. */
  deposits: Deposits;
  webhooks: Webhooks;
  /** The background loop that delivers webhook events. */
  delivery: DeliveryLoop;
  /** Where `GET /metrics` is served, when ServiceOptions.metrics asked for it. */
  metrics?: MetricsServer;
  /** `svc dev`: let the web app sign in as this wallet with no extension. */
  enableDevSignIn(wallet: Signer): void;
  /** Stops in order; `onStep` hears each step before it starts, for a console to say what is happening. */
  close(onStep?: (step: string, fields?: Record<string, unknown>) => void): Promise<void>;
}

// Events reference wallets, so they come after the accounts' tables.
export const SERVICE_MIGRATIONS = [
  ...LEDGER_MIGRATIONS,
  ...ACCOUNTS_MIGRATIONS,
  ...EVENTS_MIGRATIONS,
  ...JOBS_MIGRATIONS,
  ...CHAIN_MIGRATIONS,
  ...NODES_MIGRATIONS,
  ...WEB_MIGRATIONS,
  ...IDEMPOTENCY_MIGRATIONS,
  ...CATALOG_MIGRATIONS,
  ...NETWORK_MIGRATIONS,
  ...ADMIN_MIGRATIONS,
];

/**
 * Stop the service. Jobs in flight finish on their workers before the workers are let go; the
 * HTTP server only finishes closing once the workers' upgraded sockets are gone too.
 */
async function closeInOrder(
  parts: {
    app: FastifyInstance;
    jobs: JobService;
    workers: WorkerGateway;
    delivery: DeliveryLoop;
    vocabularies: ModelVocabularies;
    chain: Chain;
    db: Db;
    arbitration: Arbitration;
    disputes: Disputes;
    lease: NodeLease;
    bridge?: NodeBridge;
    bus?: Bus;
    metrics?: MetricsServer;
    tracing?: TracingHandle;
    adminSocket?: AdminSocket;
  },
  onStep: (step: string, fields?: Record<string, unknown>) => void,
): Promise<void> {
  onStep("refusing new requests; draining running jobs", { runningJobs: parts.jobs.runningJobs });
  const httpClosed = parts.app.close();
  await parts.jobs.drain();
  parts.disputes.stop();
  // An arbitration cut short here resumes at the next start.
  await parts.arbitration.close();
  // The other nodes stop routing here; jobs run here for them fail over or fail there.
  parts.bridge?.close();
  onStep("closing worker connections");
  await parts.workers.close();
  // Every job is done; what is left is connections with no request in flight, some with none
  // ever sent (Node keeps those until its header timeout, a minute): a shutdown does not wait.
  if ((await Promise.race([httpClosed.then(() => true), sleep(CLOSE_GRACE_MS).then(() => false)])) === false) parts.app.server.closeAllConnections();
  await httpClosed;
  await parts.jobs.drain();
  onStep("stopping webhook delivery");
  await parts.delivery.stop();
  await parts.vocabularies.close();
  // Anything still open is left to a surviving node, or to this node's next start.
  await parts.lease.release();
  await parts.metrics?.close();
  onStep(parts.bus ? "closing the bus, the chain and the database" : "closing the chain and the database");
  await parts.bus?.close();
  await parts.chain.close();
  // Open until here: with no socket, `svc admin` opens the database itself.
  await parts.adminSocket?.close();
  await parts.db.close();
  // Last, for the spans of the work above; bounded, so a collector that is down does not hold the shutdown.
  await parts.tracing?.shutdown();
}

/** The process's tracing SDK, held for this service when its options or the environment ask for traces. */
function tracingFor(options: ServiceOptions, nodeId: string): TracingHandle | undefined {
  const wanted = options.tracing ?? tracingWanted();
  return wanted === false ? undefined : startTracing({ nodeId, ...(wanted === true ? {} : wanted) });
}

/**
 * The admin socket (admin/socket.ts) of a node on the embedded store with a data dir: one process
 * owns that database, so `svc admin` acts through it. On PostgreSQL `svc admin` opens the database.
 */
async function adminSocketFor(options: ServiceOptions, db: Db, pool: WorkerPool, logger: Logger): Promise<AdminSocket | undefined> {
  if (!isEmbedded(db) || !options.dataDir || options.databaseUrl) return undefined;
  const node = { connectedWorkers: () => pool.all().map((w) => ({ address: w.address, vetting: pool.vetting(w.address) })), suspendedConnected: () => pool.suspendedConnected() };
  return serveAdminSocket({ db, dataDir: options.dataDir, logger, node });
}

/** The API's context: the parts it calls, and the limits the options set. */
function apiContext(
  options: ServiceOptions,
  parts: Pick<HttpContext, "ports" | "jobs" | "pool" | "catalog" | "logger" | "readiness"> & { answered: HttpContext["answered"] },
): HttpContext {
  const { answered, ...rest } = parts;
  return {
    ...rest,
    appUrl: options.appUrl ?? "",
    ...(options.rateLimit !== undefined ? { rateLimit: options.rateLimit } : {}),
    ...(options.requestTimeoutMs !== undefined ? { requestTimeoutMs: options.requestTimeoutMs } : {}),
    ...(options.refusalLimit !== undefined ? { refusalLimit: options.refusalLimit } : {}),
    ...(options.trustProxy !== undefined ? { trustProxy: options.trustProxy } : {}),
    ...(answered ? { answered } : {}),
  };
}

/** Metrics, when ServiceOptions.metrics asks for them: counted from the start, served once the API listens. */
function serviceMetrics(
  options: ServiceOptions,
  db: Db,
  pool: WorkerPool,
  journal: ChainJournal,
  jobs: JobService,
  catalog: Catalog,
): { answered?: HttpContext["answered"]; webhookAttempt?: ServiceMetrics["webhookAttempt"]; serve(): Promise<MetricsServer | undefined> } {
  const metrics = options.metrics ? createServiceMetrics({ db, pool, catalog }) : undefined;
  const where = options.metrics;
  if (metrics) {
    journal.onSent = metrics.chainSent;
    journal.onFee = metrics.chainFee;
    jobs.onEnded = metrics.jobEnded;
    jobs.timeRuns = true;
  }
  return {
    ...(metrics ? { answered: metrics.answered, webhookAttempt: metrics.webhookAttempt } : {}),
    serve: async () => (metrics && where ? startMetricsServer({ registry: metrics.registry, ...where }) : undefined),
  };
}

/** The worker protocol's endpoint, with the service's limits and a registration event per worker. */
function workerGateway(options: ServiceOptions, parts: { pool: WorkerPool; catalog: Catalog; logger: Logger; chain: Chain; db: Db }): WorkerGateway {
  return new WorkerGateway({
    pool: parts.pool,
    catalog: parts.catalog,
    logger: parts.logger,
    ...(options.workerHeartbeatTimeoutMs !== undefined ? { heartbeatTimeoutMs: options.workerHeartbeatTimeoutMs } : {}),
    ...(options.workerCountTimeoutMs !== undefined ? { countTimeoutMs: options.workerCountTimeoutMs } : {}),
    ...(options.workerPublicHost !== undefined ? { publicHost: options.workerPublicHost } : {}),
    ...(options.workerProbeTimeoutMs !== undefined ? { probeTimeoutMs: options.workerProbeTimeoutMs } : {}),
    ...(options.workerLimits ? { limits: options.workerLimits } : {}),
    ...(options.trustProxy !== undefined ? { trustProxy: options.trustProxy } : {}),
    isStaked: (address) => parts.chain.isStaked(address),
    onRegistered: (worker) => emitWorkerRegistered(parts.db, worker),
  });
}

/** The parts that run the service's work: one chain journal, with the jobs and deposits as owners of its actions. */
function assembleParts(options: ServiceOptions, db: Db, chain: Chain, logger: Logger, nodeId: string) {
  const catalog = options.catalog ?? defaultCatalog();
  const seedPool = [...(options.seedPool ?? []), ...(options.seedWorkers ?? []).map((w) => w.address)];
  const trust = new WorkerTrust(seedPool, (address) => chain.stakeBehindWord(address));
  const pool = new WorkerPool({ trust, ...(options.probationChecks !== undefined ? { checksToProve: options.probationChecks } : {}) });
  for (const worker of options.seedWorkers ?? []) pool.add(worker);
  // The wiring model's vocabulary is built here like its weights; catalog models use their family's
  // tokenizer, from a map the catalog keeps current as approvals change.
  const vocabularies = new ModelVocabularies(
    new Map([[WIRING_MODEL_ID, () => ensureWiringModel(join(options.dataDir ?? join(tmpdir(), "svc-vocabularies"), "models"))]]),
    logger,
    { tokenizers: new FamilyTokenizers(), of: catalog.tokenizerFamilies },
  );
  const journal = new ChainJournal(db, chain, logger, nodeId);
  // The embedded store has one writer, this process: its book of wallets' credits can grant locks.
  const book = (options.soleLedgerWriter ?? isEmbedded(db)) ? new CreditBook() : undefined;
  const jobs = new JobService({
    nodeId,
    db,
    chain,
    journal,
    pool,
    catalog,
    logger,
    vocabularies,
    ...(book ? { book } : {}),
    ...(options.jobTimeoutMs ? { timeoutMs: options.jobTimeoutMs } : {}),
    ...(options.firstTokenTimeoutMs ? { firstTokenTimeoutMs: options.firstTokenTimeoutMs } : {}),
    ...(options.queueWaitMs !== undefined ? { queueWaitMs: options.queueWaitMs } : {}),
    ...(options.skipProofCheck ? { skipProofCheck: true } : {}),
    ...(options.maxAnsweredUnconfirmed !== undefined ? { maxAnsweredUnconfirmed: options.maxAnsweredUnconfirmed } : {}),
    ...(options.admissionDeferMs !== undefined ? { admissionDeferMs: options.admissionDeferMs } : {}),
    ...(options.escrowTables !== undefined ? { escrowTables: options.escrowTables } : {}),
    onSettled: (jobId, workerAddress) => arbitration.maybeAudit(jobId, workerAddress),
    probation: new Probation({ pool, trust, logger, timeoutMs: options.jobTimeoutMs ?? JOB_TIMEOUT_MS, firstTokenTimeoutMs: options.firstTokenTimeoutMs ?? DEFAULT_FIRST_TOKEN_TIMEOUT_MS }),
  });
  const deposits = new Deposits(db, journal, chain);
  const payments = new WalletPayments(db, journal, chain, book);
  const arbitration = new Arbitration({
    db,
    chain,
    journal,
    pool,
    trust,
    logger,
    windowMs: options.disputes?.arbitrationWindowMs ?? ARBITRATION_WINDOW_HOURS * 3_600_000,
    retryMs: options.disputes?.arbitrationRetryMs ?? 60_000,
    slashShareBps: options.disputes?.slashShareBps ?? DEFAULT_SLASH_SHARE_BPS,
    auditShare: options.disputes?.auditShare ?? DEFAULT_AUDIT_SHARE,
    provenAuditShare: options.disputes?.provenAuditShare ?? options.disputes?.auditShare ?? DEFAULT_PROVEN_AUDIT_SHARE,
  });
  const disputes = new Disputes({ db, chain, journal, logger, nodeId, ...(book ? { book } : {}), windowMs: options.disputes?.windowMs ?? DISPUTE_WINDOW_MS }, (jobId) => arbitration.arbitrate(jobId));
  return { catalog, trust, pool, vocabularies, journal, jobs, deposits, arbitration, disputes, payments };
}

/**
 * Holds this node's lease, finishes what its last run left open, and from then on takes over
 * the work of nodes whose leases run out. Chain actions first: a job whose action finishes now
 * is not one to return.
 */
async function recoverUnderLease(node: { db: Db; journal: ChainJournal; jobs: JobService; logger: Logger; nodeId: string; leaseMs?: number; staleActionMs?: number }): Promise<NodeLease> {
  const finish = async (owner: ActionOwnerNode) => ({ resumedActions: await node.journal.resumeOpen(owner), refundedJobs: await node.jobs.refundInterrupted(owner) });
  const takeOver = async (deadNodeId: string) => {
    const finished = await finish({ nodeId: deadNodeId, orUnowned: false });
    node.logger.info({ deadNodeId, ...finished, adoptedJobs: await node.jobs.adoptJobsOf(deadNodeId) }, "finished a dead node's work");
  };
  const lease = await NodeLease.acquire({
    db: node.db,
    nodeId: node.nodeId,
    logger: node.logger,
    ...(node.leaseMs ? { leaseMs: node.leaseMs } : {}),
    takeOver,
    finishStale: async () => void (await node.journal.resumeStale({ nodeId: node.nodeId, orUnowned: false }, node.staleActionMs ?? STALE_ACTION_MS)),
  });
  const recovered = await finish({ nodeId: node.nodeId, orUnowned: true });
  if (recovered.resumedActions > 0 || recovered.refundedJobs > 0) node.logger.info(recovered, "recovered work left by the last run");
  lease.start();
  return lease;
}

function openServiceDb(options: ServiceOptions): Promise<Db> {
  return openDb({
    ...(options.databaseUrl ? { databaseUrl: options.databaseUrl } : {}),
    ...(options.dataDir ? { dataDir: options.dataDir } : {}),
    ...(options.databaseSchema ? { schema: options.databaseSchema } : {}),
    ...(options.embedded ? { embedded: options.embedded } : {}),
  });
}

/** With a bus, the other gateway nodes' workers join this node's pool and this node's theirs. */
async function joinOtherNodes(options: ServiceOptions, db: Db, pool: WorkerPool, nodeId: string, logger: Logger): Promise<{ bus?: Bus; bridge?: NodeBridge }> {
  if (!options.natsUrl) return {};
  const bus = await connectBus(options.natsUrl, logger, `deployment.${await deploymentId(db)}`);
  return { bus, bridge: new NodeBridge({ bus, pool, nodeId, logger, ...(options.announceMs ? { announceMs: options.announceMs } : {}) }) };
}

function readinessProbes(db: Db, chain: Chain, pool: WorkerPool, bus: Bus | undefined): HttpContext["readiness"] {
  return { database: () => db.query("SELECT 1"), chain: () => chain.slot(), workers: () => pool.soldWorkers, ...(bus ? { bus: () => bus.connected() } : {}) };
}

/**
 * The embedded chain keeps its records as long as the database keeps its commits: PostgreSQL
 * syncs each commit, and then so does the chain; an embedded database does not (docs/architecture.md,
 * "Why a crash loses nothing"), and there a sync of the chain's log would be the longest part of the
 * escrow lock's landing, which each reply waits for, without making the node survive a power cut.
 */
function chainOptions(options: ServiceOptions, logger: Logger): OpenChainOptions {
  return {
    logger,
    syncLog: options.databaseUrl !== undefined,
    ...(options.dataDir ? { dataDir: options.dataDir } : {}),
    ...(options.chainUrl ? { chainUrl: options.chainUrl } : {}),
    ...(options.keysDir ? { keysDir: options.keysDir } : {}),
    ...(options.priorityFeeMicroLamports ? { priorityFeeMicroLamports: options.priorityFeeMicroLamports } : {}),
    ...(options.escrowRules ? { escrowRules: options.escrowRules } : {}),
  };
}

/**
 * The database and the chain, opened side by side: the embedded chain loads on its own thread
 * while the database opens and migrates here. If either fails, what did open is closed.
 */
async function openStorage(options: ServiceOptions, logger: Logger): Promise<{ db: Db; chain: Chain }> {
  // Awaited once the database is ready, or closed if it is not.
  const chainOpening = awaitedLater(openChain(chainOptions(options, logger)));
  let db: Db | undefined;
  try {
    db = options.db ?? await openServiceDb(options);
    await migrate(db, SERVICE_MIGRATIONS);
    return { db, chain: await chainOpening };
  } catch (error) {
    await (await chainOpening.catch(() => undefined))?.close().catch(() => undefined);
    await db?.close().catch(() => undefined);
    throw error;
  }
}

export async function startService(options: ServiceOptions = {}): Promise<Service> {
  const logger = options.logger ?? silentLogger();
  const { db, chain } = await openStorage(options, logger);
  let tracing: TracingHandle | undefined;
  let adminSocket: AdminSocket | undefined;
  try {
    const nodeId = await loadNodeId(options.nodeId, options.dataDir);
    // Before the parts start work: the SDK is global, and the API's hook is only added when it runs.
    tracing = tracingFor(options, nodeId);
    const { catalog, trust, pool, vocabularies, journal, jobs, deposits, arbitration, disputes, payments } = assembleParts(options, db, chain, logger, nodeId);
    await loadGovernedCatalog(db, catalog, logger);
    await followWorkerSuspensions(db, pool, logger);
    await moveCustodialCredits(db, chain, logger, await unfinishedJobIds(db));
    const { bus, bridge } = await joinOtherNodes(options, db, pool, nodeId, logger);
    const lease = await recoverUnderLease({ db, journal, jobs, logger, nodeId, leaseMs: options.nodeLeaseMs, staleActionMs: options.staleActionMs });
    await arbitration.resumeOpen();
    disputes.start();
    const webhooks = await openWebhooks({ db, logger, ...(options.dataDir ? { dataDir: options.dataDir } : {}), ...options.webhooks });
    const host = options.host ?? "127.0.0.1";
    const metrics = serviceMetrics(options, db, pool, journal, jobs, catalog);
    const ports = httpPorts({ db, apiKeys: await ApiKeyCache.open(db), jobs, disputes, catalog, webhooks }, { idempotencyWaitMs: options.idempotencyWaitMs });
    const ctx = apiContext(options, { ports, jobs, pool, catalog, logger, readiness: readinessProbes(db, chain, pool, bus), answered: metrics.answered });
    // The web app: its page at the root, its API under /app/api (wallet sessions, never API keys).
    const web: WebOptions = { ...options.web };
    const money = moneyPages(payments, chain, web, ctx);
    const app = await buildServer(ctx, (server) => registerWebApp(server, { ...webAppPorts({ db, webhooks, ports, jobs, catalog, pool }), ports, ...money, appUrl: () => ctx.appUrl, options: web, checkRequest: checkParams }));
    const workers = workerGateway(options, { pool, catalog, logger, chain, db });
    bridge?.start();
    workers.attach(app.server);
    adminSocket = await adminSocketFor(options, db, pool, logger);
    await app.listen({ host, port: options.port ?? DEFAULT_PORT });
    const address = app.server.address();
    const port = typeof address === "object" && address ? address.port : options.port;
    // In development the web app (and its error docs) share the gateway's origin.
    if (!options.appUrl) ctx.appUrl = `http://${host}:${port}`;
    const delivery = startWebhookDelivery(webhooks, metrics.webhookAttempt);
    const metricsServer = await metrics.serve();
    return {
      nodeId,
      baseUrl: `http://${host}:${port}/v1`,
      origin: `http://${host}:${port}`,
      workers,
      app,
      db,
      chain,
      catalog,
      trust,
      pool,
      jobs,
      journal,
      deposits,
      webhooks,
      delivery,
      ...(metricsServer ? { metrics: metricsServer } : {}),
      enableDevSignIn: (wallet) => {
        web.devWallet = wallet;
      },
      close: (onStep = () => {}) => closeInOrder({ app, jobs, workers, delivery, vocabularies, chain, db, arbitration, disputes, lease, bridge, bus, metrics: metricsServer, tracing, adminSocket }, onStep),
    };
  } catch (error) {
    await adminSocket?.close().catch(() => undefined);
    await chain.close().catch(() => undefined);
    await db.close().catch(() => undefined);
    await tracing?.shutdown();
    throw error;
  }
}
