/**
 * `svc worker`: serve models to a gateway from any machine. The worker dials out (no open port
 * needed), proves its identity with its keypair, reconnects when the gateway goes away, and on
 * Ctrl-C or SIGTERM finishes its running jobs before it exits.
 */
import { basename, dirname, resolve } from "node:path";
import { parseArgs } from "node:util";
import { createLogger, LOG_FORMATS, loadOrCreateKeypair, type LogFormat } from "../core/index.ts";
import { DEFAULT_MAX_SEQUENCES, type Engine } from "../inference/index.ts";
import {
  describeEngine,
  loadEngine,
  ModelSpecError,
  parseModelSpec,
  WorkerClient,
  type EngineLoadOptions,
  type ModelSpec,
  type WorkerClientEvent,
} from "../worker/index.ts";
import { endProgressLine, progressBar } from "./progress-bar.ts";

const HELP = `Usage: svc worker --gateway <url> --keypair <file.json> --model <catalog-id>=<engine> [options]
       svc worker stake|unstake ...   (the worker's stake: 'svc worker stake --help')

Serves models to a gateway. The worker connects out to the gateway, so it needs no open port.

Options:
  --gateway <url>          The gateway's origin, e.g. http://127.0.0.1:8080
  --keypair <file.json>    The worker's Solana keypair, created if missing; its address is paid
  --model <id>=<engine>    A catalog model and what runs it (repeatable). The engine is a .gguf
                           file, hf:<user>/<repo>/<file>.gguf, the URL of an OpenAI-compatible
                           server (http://host:port/v1, plus #<name> if it names the model
                           differently), or builtin (the development wiring model, svc-dev/wiring-model only)
  --concurrency <n>        Jobs run at once (default ${DEFAULT_MAX_SEQUENCES})
  --threads <n>            CPU threads for a GGUF model (the built-in model always uses 1)
  --upstream-context-window <n>
                           Context window of an OpenAI-compatible server's models, for servers
                           that do not report it (SVC_UPSTREAM_API_KEY holds their key, if any)
  --models-dir <dir>       Where hf: downloads and the built-in model are kept (default ./.svc/models)
  --drain-timeout <s>      On shutdown, how long running jobs get to finish (default 30)
  --log-format <f>         pretty (sentences, the default) or json (one record per line, with
                           the worker, job and amounts as fields, for log collectors);
                           SVC_LOG_FORMAT sets it too
  -h, --help               Show this help

HF_ENDPOINT points hf: downloads at a mirror, HF_TOKEN reads gated models, and a download that
gets no data for SVC_DOWNLOAD_STALL_S seconds (default 20) fails.

Example:
  svc worker --gateway http://127.0.0.1:8080 --keypair ./worker.json --model svc-dev/wiring-model=builtin`;

interface WorkerArgs {
  gateway: string;
  keyPath: string;
  specs: ModelSpec[];
  concurrency: number;
  engineOptions: EngineLoadOptions;
  drainTimeoutS: number;
  logFormat: LogFormat;
}

export async function runWorker(argv: string[]): Promise<void> {
  if (argv[0] === "stake" || argv[0] === "unstake") return (await import("./worker-stake.ts")).runWorkerStake(argv[0], argv.slice(1));
  const args = parseWorkerArgs(argv);
  if (args === undefined) return;
  const out = workerConsole(args.logFormat);
  const signer = await loadOrCreateKeypair(dirname(args.keyPath), basename(args.keyPath, ".json"));
  out.info(`Worker address: ${signer.address} (key: ${args.keyPath})`, { worker: signer.address, keypair: args.keyPath });
  const engines = await loadEngines(args.specs, args.engineOptions, out);
  out.info(`Concurrency: ${args.concurrency} jobs at once`, { concurrency: args.concurrency });

  const { gateway, concurrency } = args;
  const client = new WorkerClient({ gateway, signer, engines, concurrency, onEvent: (event) => report(event, gateway, out) });
  client.start();
  const stopping = stopOnSignals(client, engines, args.drainTimeoutS, out);
  try {
    await client.registered();
  } catch (error) {
    if (stopping()) return;
    await closeEngines(engines);
    out.error(`svc worker: ${(error as Error).message}`, { err: error });
    process.exit(1);
  }
}

function parseWorkerArgs(argv: string[]): WorkerArgs | undefined {
  const { values } = parseArgs({
    args: argv,
    options: {
      gateway: { type: "string" },
      keypair: { type: "string" },
      model: { type: "string", multiple: true },
      concurrency: { type: "string", default: String(DEFAULT_MAX_SEQUENCES) },
      threads: { type: "string" },
      "upstream-context-window": { type: "string" },
      "models-dir": { type: "string", default: ".svc/models" },
      "drain-timeout": { type: "string", default: "30" },
      "log-format": { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(HELP);
    return undefined;
  }
  if (!values.gateway) fail("--gateway is required, e.g. --gateway http://127.0.0.1:8080");
  if (!values.keypair) fail("--keypair is required, e.g. --keypair ./worker.json (created if missing)");
  if (!values.model || values.model.length === 0) fail("at least one --model <catalog-id>=<engine> is required");
  if (!values.keypair.endsWith(".json")) fail(`--keypair is a .json file, got '${values.keypair}'`);
  if (!URL.canParse(values.gateway)) fail(`--gateway must be a URL such as http://127.0.0.1:8080, got '${values.gateway}'`);
  const concurrency = positiveInteger("--concurrency", values.concurrency);
  const threads = values.threads === undefined ? undefined : positiveInteger("--threads", values.threads);
  const upstreamWindow = values["upstream-context-window"];
  const upstreamContextWindow = upstreamWindow === undefined ? undefined : positiveInteger("--upstream-context-window", upstreamWindow);
  const upstreamApiKey = process.env.SVC_UPSTREAM_API_KEY;
  const drainTimeoutS = Number(values["drain-timeout"]);
  if (!Number.isFinite(drainTimeoutS) || drainTimeoutS < 0) fail(`--drain-timeout is a number of seconds, got '${values["drain-timeout"]}'`);
  const logFormat = values["log-format"] ?? (process.env.SVC_LOG_FORMAT === "json" ? "json" : "pretty");
  if (!LOG_FORMATS.includes(logFormat as LogFormat)) fail(`--log-format is pretty or json, got '${logFormat}'`);
  const engineOptions: EngineLoadOptions = {
    modelsDir: resolve(values["models-dir"]),
    maxSequences: concurrency,
    ...(threads !== undefined ? { threads } : {}),
    ...(upstreamApiKey ? { upstreamApiKey } : {}),
    ...(upstreamContextWindow !== undefined ? { upstreamContextWindow } : {}),
  };
  return {
    gateway: values.gateway,
    keyPath: resolve(values.keypair),
    specs: modelSpecs(values.model),
    concurrency,
    engineOptions,
    drainTimeoutS,
    logFormat: logFormat as LogFormat,
  };
}

/** Each `--model` parsed, with a model given twice refused. */
function modelSpecs(args: string[]): ModelSpec[] {
  let specs: ModelSpec[];
  try {
    specs = args.map(parseModelSpec);
  } catch (error) {
    if (error instanceof ModelSpecError) fail(error.message);
    throw error;
  }
  const ids = specs.map((s) => s.modelId);
  const twice = ids.find((id, i) => ids.indexOf(id) !== i);
  if (twice) fail(`${twice} is given twice`);
  return specs;
}

/** Loads every model's engine in turn; if one fails, the ones loaded are closed and the worker exits. */
async function loadEngines(specs: ModelSpec[], options: EngineLoadOptions, out: WorkerConsole): Promise<Map<string, Engine>> {
  const engines = new Map<string, Engine>();
  const onDownloadProgress = out.json ? undefined : progressBar();
  for (const spec of specs) {
    try {
      const engine = await loadEngine(spec.engine, { ...options, ...(onDownloadProgress ? { onDownloadProgress } : {}) });
      engines.set(spec.modelId, engine);
      const contextWindow = engine.contextWindow;
      out.info(`Serving ${spec.modelId} with ${describeEngine(spec.engine)}, context window ${contextWindow} tokens`, { model: spec.modelId, contextWindow });
    } catch (error) {
      await closeEngines(engines);
      if (onDownloadProgress) endProgressLine();
      out.error(`svc worker: could not load ${spec.modelId}: ${(error as Error).message}`, { model: spec.modelId, err: error });
      process.exit(1);
    }
  }
  return engines;
}

function closeEngines(engines: ReadonlyMap<string, Engine>): Promise<unknown> {
  return Promise.allSettled([...engines.values()].map((e) => e.close()));
}

/**
 * Ctrl-C or SIGTERM drains the worker (its running jobs finish) and exits; a second one, a moment
 * later, exits at once. Returns whether a stop has begun.
 */
function stopOnSignals(client: WorkerClient, engines: ReadonlyMap<string, Engine>, drainTimeoutS: number, out: WorkerConsole): () => boolean {
  let stopping = false;
  let stoppingSinceMs = 0;
  const stop = async (signal: string) => {
    if (stopping) {
      // Some supervisors (GNU timeout among them) deliver one stop request twice at once.
      if (Date.now() - stoppingSinceMs < 1_000) return;
      out.info(`${signal} again: stopping without waiting for running jobs`, { signal });
      process.exit(1);
    }
    stopping = true;
    stoppingSinceMs = Date.now();
    const running = client.runningJobs;
    out.info(running > 0 ? `Draining: finishing ${running} running job${running === 1 ? "" : "s"} (up to ${drainTimeoutS} s)...` : "Draining...", { signal, runningJobs: running, drainTimeoutS });
    await client.drain(drainTimeoutS * 1000);
    await closeEngines(engines);
    out.info(`Stopped. Earned this session: ${formatEarnings(client.earnedBaseUnits)}`, { earnedBaseUnits: String(client.earnedBaseUnits) });
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
  return () => stopping;
}

function report(event: WorkerClientEvent, gateway: string, out: WorkerConsole): void {
  switch (event.type) {
    case "connecting":
      out.info(`Connecting to ${gateway}...`, { gateway });
      return;
    case "registered":
      out.info(`Connected to ${gateway} as ${event.address}: serving ${event.models.map((m) => m.id).join(", ")}`, { gateway, models: event.models.map((m) => m.id) });
      for (const r of event.refused) out.info(`  The gateway refused ${r.id}: ${r.reason}`, { model: r.id, reason: r.reason });
      return;
    case "disconnected":
      out.info(
        `${event.wasConnected ? "Disconnected from" : "Could not connect to"} ${gateway}${event.reason ? ` (${event.reason})` : ""}; ` +
          `retrying in ${(event.retryInMs / 1000).toFixed(1)} s`,
        { gateway, wasConnected: event.wasConnected, reason: event.reason, retryInMs: event.retryInMs },
      );
      return;
    case "refused":
      out.error(`The gateway refused this worker: ${event.reason}`, { gateway, code: event.code, reason: event.reason });
      for (const r of event.refused) out.error(`  ${r.id}: ${r.reason}`, { model: r.id, reason: r.reason });
      return;
    case "settled":
      out.info(`Earned ${formatEarnings(event.earnedBaseUnits)} for ${event.jobId} (settlement ${event.settlementTx}); total ${formatEarnings(event.totalBaseUnits)}`, {
        job: event.jobId,
        settlementTx: event.settlementTx,
        earnedBaseUnits: String(event.earnedBaseUnits),
        totalBaseUnits: String(event.totalBaseUnits),
      });
      return;
  }
}

/**
 * Where the worker says what it does: sentences on the console by default, or, with
 * `--log-format json`, one JSON record per line whose message is the same sentence and whose
 * fields carry the worker, job, model and amounts for a log collector to index.
 */
interface WorkerConsole {
  readonly json: boolean;
  info(text: string, fields?: Record<string, unknown>): void;
  error(text: string, fields?: Record<string, unknown>): void;
}

function workerConsole(format: LogFormat): WorkerConsole {
  if (format === "pretty") {
    return { json: false, info: (text) => console.log(text), error: (text) => console.error(text) };
  }
  // The same records as the sentences, whatever LOG_LEVEL asks of the service's debug logging.
  const logger = createLogger({ format: "json", level: "info" });
  return { json: true, info: (text, fields = {}) => logger.info(fields, text), error: (text, fields = {}) => logger.error(fields, text) };
}

/** Base units of the 6-decimal USDC mint, shown in USDC and in credits (10,000 units each). */
export function formatEarnings(units: bigint): string {
  const usdc = `${units / 1_000_000n}.${(units % 1_000_000n).toString().padStart(6, "0")}`;
  const credits = Number(units) / 10_000;
  return `${usdc} USDC (${credits} credits)`;
}

function positiveInteger(flag: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) fail(`${flag} must be a positive whole number, got '${value}'`);
  return n;
}

function fail(message: string): never {
  console.error(`svc worker: ${message}`);
  process.exit(2);
}
