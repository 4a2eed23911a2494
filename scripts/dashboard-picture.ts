/**
 * docs/grafana-dashboard.png: the Grafana dashboard (docs/grafana-dashboard.json) filled by a load
 * run, for docs/deploy.md "Metrics". Grafana is not installable here, so this draws the dashboard
 * itself, from its own queries answered by a real Prometheus:
 *
 * - the service in-process with its metrics on (svc dev's embedded defaults: PGlite and the
 *   embedded chain on disk), a worker in a process of its own serving the bench's model through
 *   the test upstream (bench/worker-process.ts), and a webhook receiver that fails some first attempts;
 * - Prometheus (`apt-get install prometheus`; PROMETHEUS=<path> for another binary) scraping the
 *   service's /metrics every second as job `svc`, its `instance` label the metrics address;
 * - callers in processes of their own (bench/paced-client.ts, the `openai` SDK) sending JSON and
 *   streamed chat completions, an unknown model's (404) and an unfunded wallet's (402), for
 *   SECONDS (default 75), then every job settled and a quiet tail;
 * - every panel's PromQL run through Prometheus' /api/v1/query_range over the run (step 2 s,
 *   `$instance` as the dashboard's "All", `$__rate_interval` as Grafana works it out for a 1 s
 *   scrape at that step), drawn (scripts/dashboard-render.ts) and screenshotted with Chromium.
 *
 * Run: npm run dashboard:picture [-- <seconds of load>]. A docs tool, not a test: CI does not run it.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { readFile, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { chromium } from "playwright-core";
import { issueApiKey } from "../src/accounts/accounts.ts";
import { generateKeypair } from "../src/core/keys.ts";
import { startService, type Service } from "../src/service.ts";
import { startReceiver, type Receiver } from "../test/support/webhook-receiver.ts";
import { testCert } from "../test/support/tls-cert.ts";
import { drivePaced, type PacedResult } from "../bench/paced-client.ts";
import { fundedClient, settled } from "../bench/support.ts";
import { BENCH_MODEL, startWorkerProcess } from "../bench/worker-process.ts";
import { type Dashboard, legendOf, PAGE_WIDTH_PX, type Panel, type Range, renderDashboard, type Series } from "./dashboard-render.ts";

const SECONDS = Number(process.argv[2] ?? 75);
const SCRAPE_S = 1;
const STEP_S = 2;
/** Grafana's $__rate_interval: max($__interval + scrape interval, 4 × scrape interval), $__interval being the step. */
const RATE_INTERVAL = `${Math.max(STEP_S + SCRAPE_S, 4 * SCRAPE_S)}s`;
/** Idle before the load, and again once the backlog settled: the picture shows both edges. */
const QUIET_S = 10;
/** Scales the webhook retry delays (30 s, 5 min, ...): a retry within the run. */
const WEBHOOK_TIME_SCALE = 0.001;
const WEBHOOK_SECRET = "dashboard-picture-webhook-secret";
const CHROMIUM = process.env.SVC_CHROMIUM ?? "/usr/bin/chromium";
const PROMETHEUS = process.env.PROMETHEUS ?? "prometheus";
const DASHBOARD = "docs/grafana-dashboard.json";
const PICTURE = "docs/grafana-dashboard.png";

function freePort(): Promise<number> {
  const probe = createServer();
  return new Promise((resolve) => probe.listen(0, "127.0.0.1", () => {
    const { port } = probe.address() as { port: number };
    probe.close(() => resolve(port));
  }));
}

interface Prometheus {
  url: string;
  process: ChildProcess;
}

/** Prometheus on loopback scraping `target` (host:port) as job `svc`, its data in `dir`. */
async function startPrometheus(dir: string, target: string): Promise<Prometheus> {
  const config = join(dir, "prometheus.yml");
  await writeFile(config, `global:\n  scrape_interval: ${SCRAPE_S}s\n  scrape_timeout: ${SCRAPE_S}s\nscrape_configs:\n  - job_name: svc\n    static_configs:\n      - targets: ["${target}"]\n`);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(PROMETHEUS, [`--config.file=${config}`, `--storage.tsdb.path=${join(dir, "tsdb")}`, `--web.listen-address=127.0.0.1:${port}`], { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  child.stderr!.on("data", (chunk: Buffer) => (log = (log + chunk.toString()).slice(-4000)));
  const failed = new Promise<never>((_, reject) => {
    child.once("error", (error) => reject(new Error(`cannot run ${PROMETHEUS} (apt-get install -y prometheus, or PROMETHEUS=<path>): ${error.message}`)));
    child.once("exit", (code) => reject(new Error(`prometheus exited with ${code}:\n${log}`)));
  });
  const ready = (async () => {
    for (let i = 0; i < 300; i++) {
      const up = await promQuery(url, "/api/v1/query", { query: `up{job="svc"}` }).catch(() => undefined);
      if (up?.[0]?.value?.[1] === "1") return;
      await sleep(100);
    }
    throw new Error(`prometheus did not scrape ${target} within 30 s:\n${log}`);
  })();
  await Promise.race([ready, failed]);
  failed.catch(() => undefined);
  return { url, process: child };
}

interface PromSeries {
  metric: Record<string, string>;
  value?: [number, string];
  values?: [number, string][];
}

async function promQuery(url: string, path: string, params: Record<string, string>): Promise<PromSeries[]> {
  const res = await fetch(`${url}${path}?${new URLSearchParams(params)}`);
  const body = (await res.json()) as { status: string; error?: string; data?: { result: PromSeries[] } };
  if (body.status !== "success") throw new Error(`${params.query}: ${body.error}`);
  return body.data!.result;
}

/** An expression as Grafana sends it: the dashboard's variables replaced ($instance as "All"). */
function substituted(expr: string): string {
  return expr
    .replace(/\$__rate_interval|\$\{__rate_interval\}/g, RATE_INTERVAL)
    .replace(/\$__interval|\$\{__interval\}/g, `${STEP_S}s`)
    .replace(/\$instance|\$\{instance\}/g, ".*");
}

/** Every target of a panel over the range, each series on the range's steps (NaN where Prometheus had no value). */
async function panelSeries(url: string, panel: Panel, range: Range): Promise<Series[]> {
  const end = range.startS + (range.steps - 1) * range.stepS;
  const out: Series[] = [];
  for (const target of panel.targets ?? []) {
    const result = await promQuery(url, "/api/v1/query_range", { query: substituted(target.expr), start: String(range.startS), end: String(end), step: String(range.stepS) });
    const series = result.map((r) => {
      const values = new Array<number>(range.steps).fill(Number.NaN);
      for (const [t, v] of r.values ?? []) values[Math.round((t - range.startS) / range.stepS)] = Number(v);
      return { legend: legendOf(target.legendFormat, r.metric), values };
    });
    out.push(...series.sort((a, b) => a.legend.localeCompare(b.legend)));
  }
  return out;
}

/**
 * A receiver failing about one event in ten at its first attempt (the delivery retries). None fails
 * for good: a delivery's last failed attempt turns its webhook off, and nothing would be delivered after it.
 */
async function startFlakyReceiver(): Promise<Receiver> {
  const receiver = await startReceiver(WEBHOOK_SECRET);
  const attempts = new Map<string, number>();
  receiver.script("/hook", (delivery) => {
    const id = delivery.eventId ?? "";
    const attempt = (attempts.get(id) ?? 0) + 1;
    attempts.set(id, attempt);
    const draw = createHash("sha256").update(id).digest()[0]!;
    return draw < 26 && attempt === 1 ? 503 : 200;
  });
  return receiver;
}

async function registerWebhook(service: Service, apiKey: string, url: string): Promise<void> {
  const res = await fetch(`${service.baseUrl}/webhooks`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ url, events: ["job.completed", "job.failed"], secret: WEBHOOK_SECRET }),
  });
  if (!res.ok) throw new Error(`POST /v1/webhooks answered ${res.status}: ${await res.text()}`);
}

interface Callers {
  funded: string;
  unfunded: string;
}

/** The run's callers, each in a process of its own: JSON all along, streams over its middle, the failing ones throughout. */
async function driveLoad(service: Service, keys: Callers): Promise<Record<string, PacedResult>> {
  const base = { baseUrl: service.baseUrl, model: BENCH_MODEL, maxTokens: 16 };
  const later = async (delayS: number, run: () => Promise<PacedResult>) => (await sleep(delayS * 1000), run());
  const [json, streamed, unknownModel, unfunded] = await Promise.all([
    drivePaced({ ...base, apiKey: keys.funded, rate: 20, seconds: SECONDS }),
    later(SECONDS * 0.25, () => drivePaced({ ...base, apiKey: keys.funded, rate: 15, seconds: SECONDS * 0.5, stream: true })),
    drivePaced({ ...base, apiKey: keys.funded, model: "no-such/model", rate: 1, seconds: SECONDS }),
    later(SECONDS * 0.5, () => drivePaced({ ...base, apiKey: keys.unfunded, rate: 2, seconds: SECONDS * 0.5 })),
  ]);
  return { "JSON": json, "streamed": streamed, "unknown model": unknownModel, "unfunded wallet": unfunded };
}

const summary = (results: Record<string, PacedResult>) =>
  Object.entries(results)
    .map(([name, r]) => `${r.sent} ${name}${r.failed > 0 ? ` (${Object.entries(r.failures).map(([kind, n]) => `${n} × ${kind}`).join(", ")})` : ""}`)
    .join(", ");

/** The page in Chromium, screenshotted whole at the page's width. */
async function screenshot(html: string, path: string): Promise<void> {
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"] });
  try {
    const page = await browser.newPage({ viewport: { width: PAGE_WIDTH_PX, height: 1000 } });
    await page.setContent(html);
    await page.screenshot({ path, fullPage: true });
  } finally {
    await browser.close();
  }
}

interface Run {
  service: Service;
  prometheus: Prometheus;
  results: Record<string, PacedResult>;
  startS: number;
  endS: number;
}

/** The service, its worker, the receiver and Prometheus up; the load; every job settled; the quiet tail. */
async function run(dir: string, stop: (close: () => unknown) => void): Promise<Run> {
  const service = await startService({
    port: 0,
    dataDir: join(dir, "data"),
    metrics: { port: 0 },
    // The callers share one address: no per-IP limits, and the failing ones are not cut off as refused.
    rateLimit: false,
    refusalLimit: false,
    webhooks: { allowLoopback: true, trustedCa: (await testCert()).cert, timeScale: WEBHOOK_TIME_SCALE },
  });
  stop(() => service.close());
  const worker = await startWorkerProcess({ gateway: service.origin });
  stop(() => worker.close());
  service.trust.vouch(worker.address);
  const receiver = await startFlakyReceiver();
  stop(() => receiver.close());
  const funded = (await fundedClient(service, 10_000_000)).apiKey;
  await registerWebhook(service, funded, `${receiver.origin}/hook`);
  const unfunded = await issueApiKey(service.db, generateKeypair().address);
  const prometheus = await startPrometheus(dir, new URL(service.metrics!.url).host);
  stop(() => prometheus.process.kill());
  const startS = Math.floor(Date.now() / 1000);
  await sleep(QUIET_S * 1000);
  console.log(`load for ${SECONDS} s`);
  const results = await driveLoad(service, { funded, unfunded });
  console.log(`sent ${summary(results)}; settling`);
  console.log(`backlog settled in ${((await settled(service)) / 1000).toFixed(1)} s`);
  await sleep(QUIET_S * 1000);
  return { service, prometheus, results, startS, endS: Math.floor(Date.now() / 1000) };
}

async function main(): Promise<void> {
  const dashboard = JSON.parse(await readFile(DASHBOARD, "utf8")) as Dashboard;
  const dir = await mkdtemp(join(tmpdir(), "svc-dashboard-"));
  const closers: (() => unknown)[] = [];
  try {
    const r = await run(dir, (close) => closers.unshift(close));
    const range: Range = { startS: r.startS, stepS: STEP_S, steps: Math.floor((r.endS - r.startS) / STEP_S) + 1 };
    const seriesOf = new Map<number, Series[]>();
    const panels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]).filter((p) => p.type !== "row");
    for (const panel of panels) seriesOf.set(panel.id, await panelSeries(r.prometheus.url, panel, range));
    const empty = panels.filter((p) => (seriesOf.get(p.id) ?? []).every((s) => s.values.every(Number.isNaN)));
    if (empty.length > 0) console.log(`panels with no data: ${empty.map((p) => p.title).join("; ")}`);
    const version = (await promQuery(r.prometheus.url, "/api/v1/query", { query: "prometheus_build_info" }))[0]?.metric.version ?? "";
    const caption =
      `${DASHBOARD}'s own PromQL queries, run by Prometheus ${version} (scraping the service every ${SCRAPE_S} s; $instance = All, ` +
      `$__rate_interval = ${RATE_INTERVAL}, step ${STEP_S} s) over a bench load run on one node (embedded PGlite and chain, one worker on a test upstream): ` +
      `${SECONDS} s of ${summary(r.results)} chat completions through the openai SDK, a webhook receiver failing about one delivery in ten at its first attempt; then the backlog settled. ` +
      `Drawn by scripts/dashboard-picture.ts (npm run dashboard:picture) because Grafana is not available here; times UTC.`;
    await screenshot(renderDashboard(dashboard, seriesOf, range, caption), PICTURE);
    console.log(`wrote ${PICTURE}`);
  } finally {
    for (const close of closers) await close();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
process.exit(0);
