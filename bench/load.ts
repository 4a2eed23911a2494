/**
 * Paid JSON completions per second through the gateway, against a plain Node.js proxy and
 * Portkey's open-source gateway (`@portkey-ai/gateway`, headless, in a process of its own) in
 * front of the same instant upstream, in one run: an OpenAI-compatible upstream answering at once
 * (the test upstream, vLLM dialect), a worker serving Qwen/Qwen3-1.7B through it over the worker
 * protocol (both in a process of their own, as in production: worker-process.ts), and autocannon,
 * in a process of its own (load-generator.ts), driving each target at 1, 32 and 256 connections,
 * interleaved. After each gateway run it waits for every job to settle and reports how long the
 * backlog took and how many jobs settled a second. Before the load, a caller in a process of its
 * own times sequential requests, back to back, straight to the upstream, through the gateway and
 * through Portkey (whole JSON answers only: Portkey 1.15's streams answer 500 on Node 20). The
 * plain hop (hop.ts) is measured beside them: a proxy that forwards each request over a WebSocket
 * to the worker's process, which asks the same upstream, so the network's shape with no money
 * path and no protocol rules. The
 * service runs on svc dev's defaults (SQLite on disk, the embedded chain on disk), and then again
 * on PostgreSQL when DATABASE_URL is set; STORES=sqlite,pglite picks the embedded engines to drive
 * (PGlite: a data dir made before SQLite was the default); ESCROWS=records,tables drives each
 * storage with both escrow designs (a record per job, and the wallets' escrow tables), a service each.
 *
 * Before all of that, each service and the proxy take WARM_UP seconds of unmeasured load (10 by
 * default), so the figures are a warm node's.
 *
 * Run: npm run bench:load [-- <seconds per run, default 5>]; PROFILE=<file> also writes CPU
 * profiles of each gateway's 32-connection run, the service's and the worker's
 * (PROFILE_CONNECTIONS=256 for that run instead). TRACING=1 has each service export its traces
 * over OTLP to a sink collector on loopback: what tracing costs a request (docs/deploy.md "Tracing").
 * METRICS=1 serves each service's Prometheus metrics and scrapes them every 5 s, as a Prometheus
 * would (more often than its default 15 s): what metrics cost a request (docs/deploy.md "Metrics").
 */
import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, request as httpRequest, type Server } from "node:http";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { spawn, type ChildProcess } from "node:child_process";
import { createRequire } from "node:module";
import { startService, type Service } from "../src/service.ts";
import { startHopProxy } from "./hop.ts";
import { type Latencies, latencyLine, measureLatencies } from "./latency.ts";
import { runLoad } from "./load-generator.ts";
import { type BenchStorage, benchStorage, embeddedStores, fundedClient, observePgliteExchanges, observeSqliteStatements, percentile, settled } from "./support.ts";
import { startProfile } from "./profile.ts";
import { BENCH_MODEL as MODEL, startWorkerProcess, UPSTREAM_MODEL, type WorkerProcess } from "./worker-process.ts";

const SECONDS = Number(process.argv[2] ?? 5);
/**
 * PROFILE=<file>: CPU profiles over each gateway's run at 32 connections, of this process's main
 * thread (<file>-sqlite.cpuprofile, <file>-postgres.cpuprofile) and of the worker's process
 * (<file>-sqlite-worker.cpuprofile, ...).
 */
const PROFILE = process.env.PROFILE;
/** PROFILE_CONNECTIONS=<n>: profile the run at 1 or 256 connections instead. */
const PROFILE_CONNECTIONS = Number(process.env.PROFILE_CONNECTIONS ?? 32);
/**
 * WARM_UP=<seconds>: load the gateway and the proxy each take at 32 connections, unmeasured, before
 * the sequential requests and the runs (default 10; 0 for none). V8 keeps compiling a node's code
 * for a while after it starts (CPU profiles of this bench, PROFILE above, show it 45 s in), and a
 * run on a warming node measures the compiler too.
 */
const WARM_UP_SECONDS = Number(process.env.WARM_UP ?? 10);
/** TRACING=1: the services trace, to the sink below. */
const TRACING = process.env.TRACING === "1";
/** METRICS=1: the services count their metrics and are scraped every SCRAPE_MS. */
const METRICS = process.env.METRICS === "1";
const SCRAPE_MS = 5_000;
/** How often the main thread's stalls are sampled; Node counts this period into each delay it reports. */
const STALL_RESOLUTION_MS = 10;
/** The same request: the gateway's catalog id, the upstream's own name for the proxy. */
const body = (model: string) => JSON.stringify({ model, messages: [{ role: "user", content: "Hello" }], max_tokens: 8 });

/** A plain proxy: what forwarding alone costs on this machine. */
function startProxy(target: URL): Promise<Server> {
  const server = createServer((req, res) => {
    const upstream = httpRequest({ host: target.hostname, port: target.port, path: req.url!.replace(/^\/v1/, target.pathname), method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode!, answer.headers);
      answer.pipe(res);
    });
    // The load generator drops its connections when a run ends: a forwarded request may be cut.
    upstream.on("error", () => res.destroy());
    req.pipe(upstream);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

/** An OTLP/HTTP collector that takes every export and keeps only its size. */
async function startTraceSink(): Promise<{ url: string; exports: number; bytes: number }> {
  const sink = { url: "", exports: 0, bytes: 0 };
  const server = createServer((req, res) => {
    req.on("data", (chunk: Buffer) => (sink.bytes += chunk.length));
    req.on("end", () => {
      sink.exports++;
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  server.unref();
  sink.url = `http://127.0.0.1:${(server.address() as { port: number }).port}/v1/traces`;
  return sink;
}
const traceSink = TRACING ? await startTraceSink() : undefined;

interface Row {
  target: string;
  connections: number;
  requestsPerSecond: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  settleMs?: number;
  settledPerSecond?: number;
  /** Requests answered 2xx, and (gateway rows) jobs settled from the run's start until its backlog was. */
  answered: number;
  settled?: number;
  /** Gateway rows: the run's escrow locks per lock transaction (several jobs' locks may share one). */
  locksPerTransaction?: number;
  /** The share of the run this process's main thread was busy (event-loop utilization). */
  busy: number;
  /** This process's CPU time (all threads: the service and the proxy) per request answered. */
  cpuMsPerRequest: number;
  /** The part of it on the main thread; the rest is the chain's thread, libuv's pool (signatures) and V8's helpers. */
  mainCpuMsPerRequest: number;
  /** The worker's and upstream's process's CPU time per request answered. */
  workerCpuMsPerRequest: number;
  /** The load generator's process's CPU time per request answered. */
  loadGeneratorCpuMsPerRequest: number;
  /**
   * The main thread's time inside the embedded database's statements (PGlite's exchanges, SQLite's
   * statements) per request answered, the node's own upkeep included. Wall time: a moment the
   * thread waits for a core in the middle of one counts too.
   */
  embeddedMsPerRequest: number;
  /** Every process's CPU time on this machine per request answered: the above, PostgreSQL's backends and anything else running. */
  machineCpuMsPerRequest: number;
  /** The share of the machine's time its hypervisor gave to others while this machine wanted to run (steal). */
  stolen: number;
  /** Gateway rows: the chain's thread's CPU time per job settled, from the run's start until its backlog was. */
  chainCpuMsPerJob?: number;
}

function load(url: string, connections: number, headers: Record<string, string>, model: string, seconds: number) {
  return runLoad({ url, body: body(model), headers, connections, seconds });
}

/** Portkey's gateway, headless on a port of its own, in a process of its own. */
async function startPortkey(): Promise<{ url: string; process: ChildProcess }> {
  const port = await freePort();
  const entry = createRequire(import.meta.url).resolve("@portkey-ai/gateway/build/start-server.js");
  const child = spawn(process.execPath, [entry, "--headless", `--port=${port}`], { stdio: "ignore" });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 200; i++) {
    if (await fetch(url).then((r) => r.ok, () => false)) return { url: `${url}/v1/chat/completions`, process: child };
    await new Promise((r) => setTimeout(r, 50));
  }
  child.kill();
  throw new Error("Portkey's gateway did not answer within 10 s");
}

function freePort(): Promise<number> {
  const probe = createServer();
  return new Promise((resolve) => probe.listen(0, "127.0.0.1", () => {
    const { port } = probe.address() as { port: number };
    probe.close(() => resolve(port));
  }));
}

async function drive(target: string, url: string, connections: number, headers: Record<string, string>, model: string, worker: WorkerProcess): Promise<Row> {
  const idleBefore = performance.eventLoopUtilization();
  const cpuBefore = process.cpuUsage();
  const mainCpuBefore = mainThreadCpuMs();
  const workerCpuBefore = await worker.cpuMs();
  const embeddedBefore = embeddedMs;
  const machineBefore = machineCpuTicks();
  const r = await load(url, connections, headers, model, SECONDS);
  const requests = Math.max(1, r.requests);
  return {
    target,
    connections,
    requestsPerSecond: r.requestsPerSecond,
    p50: r.p50,
    p99: r.p99,
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    answered: r.answered,
    busy: performance.eventLoopUtilization(idleBefore).utilization,
    cpuMsPerRequest: cpuMs(process.cpuUsage(cpuBefore)) / requests,
    mainCpuMsPerRequest: (mainThreadCpuMs() - mainCpuBefore) / requests,
    workerCpuMsPerRequest: ((await worker.cpuMs()) - workerCpuBefore) / requests,
    loadGeneratorCpuMsPerRequest: r.cpuMs / requests,
    embeddedMsPerRequest: (embeddedMs - embeddedBefore) / requests,
    ...machineShares(machineBefore, machineCpuTicks(), requests),
  };
}

function cpuMs(usage: NodeJS.CpuUsage): number {
  return (usage.user + usage.system) / 1000;
}

/** The main thread's CPU time so far, from Linux's /proc (user and system time, in 10 ms ticks). */
function mainThreadCpuMs(): number {
  return threadCpuMs(process.pid);
}

function threadCpuMs(tid: number): number {
  let stat: string;
  try {
    stat = readFileSync(`/proc/self/task/${tid}/stat`, "utf8");
  } catch {
    return 0; // the thread has ended
  }
  // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** This process's threads (Linux task ids). */
function threadIds(): number[] {
  return readdirSync("/proc/self/task").map(Number);
}

/** The CPU time so far of each of `threads`. */
function threadsCpuMs(threads: readonly number[]): Map<number, number> {
  return new Map(threads.map((tid) => [tid, threadCpuMs(tid)]));
}

/**
 * The most CPU time any one of the threads used since `before`. Of the threads the service starts
 * this is the chain's: Node names no thread, and the chain's executes every job's transactions
 * while the others (libuv's pool, checking signatures) use a fraction of that.
 */
function busiestThreadMsSince(before: Map<number, number>): number {
  return Math.max(0, ...[...before].map(([tid, ms]) => threadCpuMs(tid) - ms));
}

/** The machine's CPU time so far from /proc/stat, in 10 ms ticks summed over its cores. */
function machineCpuTicks(): { busy: number; steal: number; all: number } {
  const [, user, nice, system, idle, iowait, irq, softirq, steal] = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).map(Number);
  const busy = user! + nice! + system! + irq! + softirq!;
  return { busy, steal: steal!, all: busy + idle! + iowait! + steal! };
}

function machineShares(before: ReturnType<typeof machineCpuTicks>, after: ReturnType<typeof machineCpuTicks>, requests: number) {
  const all = Math.max(1, after.all - before.all);
  return { machineCpuMsPerRequest: ((after.busy - before.busy) * 10) / requests, stolen: (after.steal - before.steal) / all };
}

const dir = await mkdtemp(join(tmpdir(), "svc-load-"));
/** The time this process has spent inside the embedded databases' statements (the services' and the bench's own queries). */
let embeddedMs = 0;
observePgliteExchanges((_, ms) => (embeddedMs += ms));
observeSqliteStatements((_, ms) => (embeddedMs += ms));
/** The threads this process had before any service started. */
const threadsOfTheBench = new Set(threadIds());

/** A database's sequential latencies, upstream and through the gateway. */
interface SequentialLatencies {
  label: string;
  direct: Latencies;
  through: Latencies;
  /** Through Portkey: whole JSON requests only. */
  portkey: Latencies;
  /** Through the plain hop (hop.ts). */
  hop: Latencies;
}

/** The rows measured just before a gateway row at its concurrency: the baselines of the same moment. */
function baselinesOf(rows: Row[], i: number): { proxy: Row; portkey: Row; hop: Row } {
  const before = rows.slice(0, i).reverse();
  const at = (target: string) => before.find((r) => r.target === target && r.connections === rows[i]!.connections)!;
  return { proxy: at("plain proxy"), portkey: at("Portkey"), hop: at("plain hop") };
}

/** One target: what it asks, what this run measured, and whether that meets it. */
function verdict(what: string, measured: string, met: boolean): string {
  return `${met ? "met    " : "NOT met"}  ${what.padEnd(66)} ${measured}`;
}

/** Each target of the performance issue that this bench measures, per database, with its verdict. */
function targetLines(rows: Row[], sequential: readonly SequentialLatencies[]): string[] {
  const lines: string[] = [];
  for (const { label, direct, through, portkey, hop } of sequential) {
    const gateway = (connections: number) => rows.findIndex((r) => r.target === `gateway, ${label}` && r.connections === connections);
    const at32 = rows[gateway(32)]!;
    const portkey32 = baselinesOf(rows, gateway(32)).portkey;
    const at256 = rows[gateway(256)]!;
    const gatewayRows = rows.filter((r) => r.target === `gateway, ${label}`);
    const added = (gatewayMs: number[], upstreamMs: number[], p: number) => percentile(gatewayMs, p) - percentile(upstreamMs, p);
    const firstTokenP50 = added(through.firstTokenMs, direct.firstTokenMs, 50);
    const firstTokenP99 = added(through.firstTokenMs, direct.firstTokenMs, 99);
    const jsonP50 = added(through.jsonMs, direct.jsonMs, 50);
    const portkeyJsonP50 = added(portkey.jsonMs, direct.jsonMs, 50);
    const hop32 = baselinesOf(rows, gateway(32)).hop;
    const slowestSettleMs = Math.max(...gatewayRows.map((r) => r.settleMs ?? 0));
    const failed256 = at256.non2xx + at256.errors + at256.timeouts;
    lines.push(
      `${label}:`,
      verdict("requests a second at 32 connections: at least Portkey's", `${at32.requestsPerSecond.toFixed(0)} against ${portkey32.requestsPerSecond.toFixed(0)}`, at32.requestsPerSecond >= portkey32.requestsPerSecond),
      verdict("a whole JSON request: no more added over the upstream than Portkey adds, p50", `${jsonP50.toFixed(2)} ms against ${portkeyJsonP50.toFixed(2)}`, jsonP50 <= portkeyJsonP50),
      verdict("first token at most 2 ms above the upstream's at p50", `${firstTokenP50.toFixed(2)} ms`, firstTokenP50 <= 2),
      verdict("first token at most 10 ms above the upstream's at p99", `${firstTokenP99.toFixed(2)} ms`, firstTokenP99 <= 10),
      verdict("no request fails or times out at 256 connections", `${failed256} failed or timed out`, failed256 === 0),
      verdict("every backlog settled within 5 s after the load stops", `longest ${slowestSettleMs.toFixed(0)} ms`, slowestSettleMs <= 5000),
      // Settled a second at least equal to arrivals: every job answered in a run settled, within the bound above.
      verdict("every job answered in a run settled (settled / answered, per run)", gatewayRows.map((r) => `${r.settled}/${r.answered}`).join(", "), gatewayRows.every((r) => r.settled! >= r.answered)),
      `the plain hop on the same measures, with no money path: ${hop32.requestsPerSecond.toFixed(0)} requests a second at 32 connections; ` +
        `JSON added ${added(hop.jsonMs, direct.jsonMs, 50).toFixed(2)} ms at p50; first token added ${added(hop.firstTokenMs, direct.firstTokenMs, 50).toFixed(2)} / ${added(hop.firstTokenMs, direct.firstTokenMs, 99).toFixed(2)} ms at p50 / p99`,
    );
  }
  return lines;
}

/**
 * What 1,000 requests a second would leave for the gateway's own work, per database, at 32
 * connections: this machine's cores allow (cores) ms of CPU a request, and the main thread 1 ms.
 * The parts that are not the gateway's own code: the chain's thread, the worker's process (with the
 * bench's upstream), the database (an embedded one's time on the main thread; PostgreSQL's processes, read as
 * the machine's CPU less this process's, the worker's and the load generator's), and the load
 * generator (its own process's CPU).
 */
function budgetLines(rows: Row[]): string[] {
  const cores = availableParallelism();
  const lines = [`what 1,000 requests a second would leave on this machine (${cores} cores: ${cores.toFixed(1)} ms of CPU a request; one thread: 1.0 ms), at 32 connections:`];
  for (const r of rows) {
    if (!r.target.startsWith("gateway") || r.connections !== 32) continue;
    const embedded = r.embeddedMsPerRequest > 0;
    const loadGenerator = r.loadGeneratorCpuMsPerRequest;
    const database = embedded ? r.embeddedMsPerRequest : r.machineCpuMsPerRequest - r.cpuMsPerRequest - r.workerCpuMsPerRequest - loadGenerator;
    const parts = r.chainCpuMsPerJob! + r.workerCpuMsPerRequest + database + loadGenerator;
    const mainBesidesDatabase = r.mainCpuMsPerRequest - (embedded ? r.embeddedMsPerRequest : 0);
    lines.push(
      `${r.target.replace(/^gateway, /, "")}: chain's thread ${r.chainCpuMsPerJob!.toFixed(2)} + worker's process ${r.workerCpuMsPerRequest.toFixed(2)} + ` +
        `${embedded ? "the embedded database" : "PostgreSQL's processes"} ${database.toFixed(2)} + load generator ${loadGenerator.toFixed(2)} = ${parts.toFixed(2)} ms, ` +
        `${parts <= cores ? `leaving ${(cores - parts).toFixed(2)}` : `${(parts - cores).toFixed(2)} over, leaving nothing`} for the rest of the gateway, ` +
        `which took ${mainBesidesDatabase.toFixed(2)} on its main thread alone` +
        (embedded ? `; on the main thread the embedded database ${r.embeddedMsPerRequest.toFixed(2)} of the 1.0` : ""),
    );
  }
  return lines;
}

/** The escrow locks recorded so far, and the transactions carrying them. */
async function escrowLocks(service: Service): Promise<{ locks: number; transactions: number }> {
  const [row] = await service.db.query<{ locks: bigint; transactions: bigint }>(
    "SELECT count(*) AS locks, count(DISTINCT signature) AS transactions FROM chain_actions WHERE kind = 'escrow'",
  );
  return { locks: Number(row!.locks), transactions: Number(row!.transactions) };
}

const settledJobs = async (service: Service) =>
  Number((await service.db.query<{ n: number | bigint }>("SELECT count(*) AS n FROM jobs WHERE status = 'settled'"))[0]!.n);

/** What a Portkey request carries: the upstream it forwards to, as an OpenAI-compatible provider. */
const portkeyHeaders = (upstreamUrl: string) => ({ "x-portkey-provider": "openai", "x-portkey-custom-host": upstreamUrl, authorization: "Bearer unused" });

interface Targets {
  service: Service;
  worker: WorkerProcess;
  proxyUrl: string;
  portkeyUrl: string;
  hopUrl: string;
  auth: Record<string, string>;
}

/** Sequential requests, back to back, straight to the upstream, through the gateway, Portkey and the plain hop. */
async function sequential(t: Targets, storage: BenchStorage): Promise<void> {
  // A request that arrives while the main thread is held (an ANALYZE, a long GC) waits it out.
  const stalls = monitorEventLoopDelay({ resolution: STALL_RESOLUTION_MS });
  stalls.enable();
  const [direct, through, portkey, hop] = await measureLatencies([
    { url: `${t.worker.upstreamUrl}/chat/completions`, headers: {}, model: UPSTREAM_MODEL },
    { url: `${t.service.baseUrl}/chat/completions`, headers: t.auth, model: MODEL },
    { url: t.portkeyUrl, headers: portkeyHeaders(t.worker.upstreamUrl), model: UPSTREAM_MODEL, streams: false },
    { url: t.hopUrl, headers: {}, model: UPSTREAM_MODEL },
  ]);
  stalls.disable();
  latencyLines.push(
    latencyLine(`JSON request, ${storage.label}`, direct!.jsonMs, through!.jsonMs),
    latencyLine(`JSON request via Portkey`, direct!.jsonMs, portkey!.jsonMs),
    latencyLine(`JSON request via the plain hop`, direct!.jsonMs, hop!.jsonMs),
    latencyLine(`first token, ${storage.label}`, direct!.firstTokenMs, through!.firstTokenMs),
    latencyLine(`first token via the plain hop`, direct!.firstTokenMs, hop!.firstTokenMs),
    `${"the main thread's longest stall".padEnd(40)} ${(stalls.max / 1e6 - STALL_RESOLUTION_MS).toFixed(0)} ms (event-loop delay past its ${STALL_RESOLUTION_MS} ms timer)`,
  );
  latencies.push({ label: storage.label, direct: direct!, through: through!, portkey: portkey!, hop: hop! });
}

/** The gateway's run at one concurrency, then its backlog settled. */
async function gatewayRun(t: Targets, storage: BenchStorage, connections: number, serviceThreads: number[]): Promise<Row> {
  const before = await settledJobs(t.service);
  const locksBefore = await escrowLocks(t.service);
  const chainBefore = threadsCpuMs(serviceThreads);
  const profiling = PROFILE !== undefined && connections === PROFILE_CONNECTIONS ? await Promise.all([startProfile(), t.worker.startProfile()]) : undefined;
  const row = await drive(`gateway, ${storage.label}`, `${t.service.baseUrl}/chat/completions`, connections, t.auth, MODEL, t.worker);
  if (profiling) {
    await profiling[0].save(PROFILE!.replace(/(\.cpuprofile)?$/, `-${storage.kind}.cpuprofile`));
    await profiling[1].save(PROFILE!.replace(/(\.cpuprofile)?$/, `-${storage.kind}-worker.cpuprofile`));
  }
  row.settleMs = await settled(t.service);
  row.settled = (await settledJobs(t.service)) - before;
  row.chainCpuMsPerJob = busiestThreadMsSince(chainBefore) / Math.max(1, row.settled);
  const locksAfter = await escrowLocks(t.service);
  row.locksPerTransaction = (locksAfter.locks - locksBefore.locks) / Math.max(1, locksAfter.transactions - locksBefore.transactions);
  row.settledPerSecond = row.settled / ((SECONDS * 1000 + row.settleMs) / 1000);
  return row;
}

/** The proxy, Portkey, the plain hop and one gateway in turn at each concurrency; then every job of the run settled. */
async function driveService(storage: BenchStorage, rows: Row[]): Promise<number> {
  const service = await startService({
    port: 0,
    ...storage.options,
    // No per-IP limit: one load generator is one client. (Written as a huge limit, not `false`,
    // so the same bench runs on commits from before the limit could be turned off.)
    rateLimit: { ratePerSecond: 1e9, burst: 1e9 },
    tracing: traceSink ? { url: traceSink.url } : false,
    ...(METRICS ? { metrics: { port: 0 } } : {}),
  });
  const scrapes = service.metrics ? scrapeEvery(service.metrics.url) : undefined;
  // The services' threads: a closed chain's thread serves the next service.
  const serviceThreads = threadIds().filter((tid) => !threadsOfTheBench.has(tid));
  // The proxy and Portkey forward to the upstream the worker uses: the same upstream, the same process.
  const worker = await startWorkerProcess({ gateway: service.origin });
  service.trust.vouch(worker.address);
  const proxy = await startProxy(new URL(worker.upstreamUrl));
  const portkey = await startPortkey();
  const hop = await startHopProxy(worker.hopUrl);
  const client = await fundedClient(service, 10_000_000);
  const t: Targets = { service, worker, proxyUrl: `http://127.0.0.1:${(proxy.address() as { port: number }).port}/v1/chat/completions`, portkeyUrl: portkey.url, hopUrl: `http://127.0.0.1:${(hop.address() as { port: number }).port}/v1/chat/completions`, auth: { authorization: `Bearer ${client.apiKey}` } };
  if (WARM_UP_SECONDS > 0) {
    await load(t.proxyUrl, 32, {}, UPSTREAM_MODEL, WARM_UP_SECONDS);
    await load(t.portkeyUrl, 32, portkeyHeaders(worker.upstreamUrl), UPSTREAM_MODEL, WARM_UP_SECONDS);
    await load(t.hopUrl, 32, {}, UPSTREAM_MODEL, WARM_UP_SECONDS);
    await load(`${service.baseUrl}/chat/completions`, 32, t.auth, MODEL, WARM_UP_SECONDS);
    await settled(service);
  }
  await sequential(t, storage);
  await settled(service);
  for (const connections of [1, 32, 256]) {
    rows.push(await drive("plain proxy", t.proxyUrl, connections, {}, UPSTREAM_MODEL, worker));
    rows.push(await drive("Portkey", t.portkeyUrl, connections, portkeyHeaders(worker.upstreamUrl), UPSTREAM_MODEL, worker));
    rows.push(await drive("plain hop", t.hopUrl, connections, {}, UPSTREAM_MODEL, worker));
    rows.push(await gatewayRun(t, storage, connections, serviceThreads));
  }
  const jobs = await settledJobs(service);
  proxy.close();
  hop.close();
  portkey.process.kill();
  worker.close();
  scrapes?.stop();
  await service.close();
  await storage.drop();
  if (scrapes) console.log(`metrics on: ${scrapes.count} scrapes of ${service.metrics!.url}, ${scrapes.failed} failed`);
  return jobs;
}

/** A Prometheus of the bench's own: GET /metrics every SCRAPE_MS, the body read and dropped. */
function scrapeEvery(url: string): { count: number; failed: number; stop(): void } {
  const scrapes = { count: 0, failed: 0, stop: () => clearInterval(timer) };
  const timer = setInterval(() => {
    fetch(url).then((res) => res.text()).then(() => scrapes.count++, () => scrapes.failed++);
  }, SCRAPE_MS);
  return scrapes;
}

const rows: Row[] = [];
const latencyLines: string[] = [];
const latencies: SequentialLatencies[] = [];
const kinds = [...embeddedStores(), ...(process.env.DATABASE_URL ? (["postgres"] as const) : [])];
/** ESCROWS=records,tables: the service's escrow designs to drive, each a service of its own (default: tables, the service's default). */
const designs = (process.env.ESCROWS ?? "tables").split(",");
if (!designs.every((d) => d === "records" || d === "tables")) throw new RangeError(`ESCROWS takes records and/or tables, got ${process.env.ESCROWS}`);
let jobs = 0;
for (const kind of kinds) {
  for (const design of designs) {
    const storage = await benchStorage(kind, join(dir, `${kind}-${design}`));
    const tables = design === "tables";
    jobs += await driveService({ ...storage, label: tables ? storage.label : `${storage.label}, escrow records`, options: { ...storage.options, escrowTables: tables } }, rows);
  }
}
const rssMb = process.memoryUsage().rss / 2 ** 20;

console.log(`${SECONDS} s per run after ${WARM_UP_SECONDS} s of warm-up; ${jobs} jobs settled in all`);
console.log(traceSink ? `tracing on: ${traceSink.exports} OTLP exports, ${(traceSink.bytes / 2 ** 20).toFixed(1)} MB, to a sink on loopback` : "tracing off");
console.log("target                     conns   req/s   p50 ms   p99 ms  non-2xx  errors  timeouts  /proxy /Portkey  main busy  CPU ms/req (main)  worker ms/req  machine ms/req  steal  settled/s  backlog settled in  locks/tx  chain ms/job");
for (const [i, r] of rows.entries()) {
  const baselines = r.target.startsWith("gateway") ? baselinesOf(rows, i) : undefined;
  const ratio = baselines ? `${(r.requestsPerSecond / baselines.proxy.requestsPerSecond).toFixed(2)} ${(r.requestsPerSecond / baselines.portkey.requestsPerSecond).toFixed(2)}` : "";
  const settledColumns = r.settleMs === undefined ? "" : `${r.settledPerSecond!.toFixed(0).padStart(10)} ${`${r.settleMs.toFixed(0)} ms`.padStart(19)} ${r.locksPerTransaction!.toFixed(2).padStart(9)} ${r.chainCpuMsPerJob!.toFixed(2).padStart(13)}`;
  console.log(
    `${r.target.padEnd(26)} ${String(r.connections).padStart(5)} ${r.requestsPerSecond.toFixed(0).padStart(7)} ${String(r.p50).padStart(8)} ${String(r.p99).padStart(8)} ${String(r.non2xx).padStart(8)} ${String(r.errors).padStart(7)} ${String(r.timeouts).padStart(9)} ${ratio.padStart(14)} ${`${(r.busy * 100).toFixed(0)}%`.padStart(10)} ${`${r.cpuMsPerRequest.toFixed(2)} (${r.mainCpuMsPerRequest.toFixed(2)})`.padStart(18)} ${r.workerCpuMsPerRequest.toFixed(2).padStart(14)} ${r.machineCpuMsPerRequest.toFixed(2).padStart(15)} ${`${(r.stolen * 100).toFixed(0)}%`.padStart(6)} ${settledColumns}`,
  );
}
console.log("\nsequential requests, back to back, ms, p50 / p99 (100 of each, alternated; Portkey's streams fail on Node 20, so JSON only):");
for (const line of latencyLines) console.log(line);
console.log(`RSS of this process (the services and the proxy): ${rssMb.toFixed(0)} MB; the load generator, the timed caller and Portkey run in processes of their own`);
console.log("");
for (const line of budgetLines(rows)) console.log(line);
console.log("\nthe performance issue's targets, as this run measured them (memory: bench:idle-memory, bench:streams, bench:worker-memory):");
for (const line of targetLines(rows, latencies)) console.log(line);
await rm(dir, { recursive: true, force: true });
process.exit(0);
