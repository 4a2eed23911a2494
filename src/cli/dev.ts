/**
 * `svc dev`: the whole service on one machine with embedded defaults (SQLite and LiteSVM under
 * the data dir), a seed-pool worker running the model in this process, and a dev wallet with
 * credits. The seed worker joins through the worker protocol over loopback, exactly as a remote
 * `svc worker` would, so the default path exercises the network.
 */
import { mkdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { hasApiKey, issueApiKey, ensureWallet } from "../accounts/index.ts";
import { defaultCatalog, WIRING_MODEL, type CatalogModel } from "../catalog/index.ts";
import { DEFAULT_RPC_PORT, startChainRpcThread } from "../chain/index.ts";
import { type LogFormat, type Logger, type RateLimitOptions, createLogger, loadOrCreateKeypair } from "../core/index.ts";
import { availableCredits } from "../jobs/index.ts";
import { DEFAULT_PORT, startService, type Service } from "../service.ts";
import { DEFAULT_MAX_SEQUENCES, ModelSourceError } from "../inference/index.ts";
import { WorkerClient } from "../worker/index.ts";
import { loadModelEngine } from "./model-engine.ts";
import { SHARED_PARTS_FLAGS, logFormatOption, portOption, rateLimitOption, seedPoolOption, sharedPartsOption, type Parsed, type SharedPartsOptions } from "./options.ts";
import { endProgressLine } from "./progress-bar.ts";

const DEFAULT_CREDITS = 10_000;

const HELP = `Usage: svc dev [options]

Starts the gateway at http://127.0.0.1:<port>/v1 with everything embedded.

Options:
  --port <n>          Port to listen on (default ${DEFAULT_PORT})
  --host <addr>       Address to listen on (default 127.0.0.1; 0.0.0.0 lets workers on other machines connect)
  --data-dir <dir>    Where the database, chain and keys are kept (default ./.svc)
  --credits <n>       Credits for the dev wallet: its funding on first start (default ${DEFAULT_CREDITS}),
                      a top-up by n when the data dir already has a wallet
  --new-key           Replace the dev wallet's API key; the old key stops working at once
  --model <model>     A GGUF file or hf:<user>/<repo>/<file>.gguf (default: the built-in wiring model)
  --database-url <u>  Use this PostgreSQL database instead of the embedded one
  --chain-url <u>     Use this Solana cluster's JSON-RPC (e.g. 'svc chain serve') instead of the
                      embedded chain; the dev wallet is funded there (SVC_CHAIN_URL sets it too)
  --keys-dir <dir>    The service's chain keys (default <data dir>/keys; SVC_KEYS_DIR sets it too)
  --priority-fee <n>  Micro-lamports per compute unit offered on each chain transaction (default 0;
                      SVC_PRIORITY_FEE sets it too)
  --escrow <design>   tables (default): each job's credits are locked in a slot of its wallet's
                      escrow table, locked and settled many jobs to a transaction; records: in an
                      escrow record of its own (SVC_ESCROW sets it too; docs/program.md)
  --nats-url <u>      NATS shared with other gateways ('svc serve'), so requests here can run on
                      their workers and theirs on this one's (SVC_NATS_URL sets it too)
  --rpc-port <n>      Port of the chain's Solana JSON-RPC server (default ${DEFAULT_RPC_PORT}, another if taken; 0 picks one)
  --rate-limit <r:b>  Requests a second and burst each client IP may send, e.g. 500:1000, or off
                      (default 50:100; SVC_RATE_LIMIT sets it too). 429 rate_limited above it
  --metrics-port <n>  Serve Prometheus metrics at http://<host>:<n>/metrics (default: none served)
  --seed-workers <a,b>
                      Addresses of more workers of your own, comma-separated, vouched for like the
                      built-in one: sold at once, no probation (SVC_SEED_WORKERS sets it too)
  --log-format <f>    pretty (one line per record) or json; default pretty on a terminal, json
                      otherwise (SVC_LOG_FORMAT sets it too)
  -h, --help          Show this help

An hf: model is downloaded once into <data dir>/models. HF_ENDPOINT points at a mirror, HF_TOKEN
reads gated models, and a download that gets no data for SVC_DOWNLOAD_STALL_S seconds (default 20)
fails.`;

interface DevOptions {
  port: number;
  host: string;
  dataDir: string;
  /** Given on the command line, or undefined for the first-start default. */
  credits: number | undefined;
  newKey: boolean;
  model: string | undefined;
  databaseUrl: string | undefined;
  shared: SharedPartsOptions;
  /** Undefined: the default port, or a free one when it is taken. */
  rpcPort: number | undefined;
  logFormat: LogFormat;
  /** Undefined: the default limit. */
  rateLimit: RateLimitOptions | false | undefined;
  /** More workers of the developer's own, vouched for beside the built-in one. */
  seedPool: string[];
  /** Undefined: no metrics served. */
  metricsPort: number | undefined;
}

export async function runDev(argv: string[]): Promise<void> {
  const options = parseDevArgs(argv);
  if (options === undefined) return;
  await mkdir(options.dataDir, { recursive: true });
  const logger = createLogger({ format: options.logFormat });

  const catalog = defaultCatalog();
  const { engine, model } = await loadModelEngine({ spec: options.model, dataDir: options.dataDir, catalog, logger }).catch((error: unknown) => {
    endProgressLine();
    // One line a person can act on: ModelSourceError says what was tried and what to do instead.
    fail(error instanceof ModelSourceError ? error.message : `could not load the model ${options.model}: ${(error as Error).message}`, 1);
  });
  const workerKey = await loadOrCreateKeypair(join(options.dataDir, "keys"), "seed-worker");

  const service = await startService({
    dataDir: options.dataDir,
    port: options.port,
    host: options.host,
    catalog,
    logger,
    // Its own worker is the one this gateway can vouch for.
    seedPool: [workerKey.address, ...options.seedPool],
    webhooks: { allowHttpLocalhost: true },
    ...(options.databaseUrl ? { databaseUrl: options.databaseUrl } : {}),
    ...options.shared,
    ...(options.rateLimit !== undefined ? { rateLimit: options.rateLimit } : {}),
    ...(options.metricsPort !== undefined ? { metrics: { port: options.metricsPort, host: options.host } } : {}),
  });
  // A cluster has its own RPC; the embedded chain is served here.
  const { chainUrl } = options.shared;
  const chainRpc = chainUrl
    ? undefined
    : await startChainRpcThread({
        chain: service.chain, port: options.rpcPort ?? DEFAULT_RPC_PORT, orFreePort: options.rpcPort === undefined, host: options.host, faucet: true, logger,
      });
  let stopping = false;
  const seedWorker = new WorkerClient({
    gateway: service.origin,
    signer: workerKey,
    engines: new Map([[model.id, engine]]),
    concurrency: DEFAULT_MAX_SEQUENCES,
    onEvent: (event) => {
      // Its connection ends with the gateway's on shutdown, which is no news.
      if (event.type === "disconnected" && !stopping) logger.info({ code: event.code, reason: event.reason, retryInMs: event.retryInMs }, "seed worker disconnected");
      else if (event.type === "refused") logger.error({ code: event.code, reason: event.reason, refused: event.refused }, "seed worker refused");
    },
  }).start();
  await seedWorker.registered();

  const wallet = await fundDevWallet(service, options);
  printBanner(service, model, wallet, chainRpc?.url ?? chainUrl!);

  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "shutting down");
    await chainRpc?.close();
    await service.close((step, fields) => logger.info(fields ?? {}, step));
    logger.info("stopping the seed worker and unloading the model");
    await seedWorker.close();
    await engine.close();
    logger.info("stopped");
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
}

function parseDevArgs(argv: string[]): DevOptions | undefined {
  const { values } = parseArgs({
    args: argv,
    options: {
      port: { type: "string", default: String(DEFAULT_PORT) },
      host: { type: "string", default: "127.0.0.1" },
      "data-dir": { type: "string", default: ".svc" },
      credits: { type: "string" },
      "new-key": { type: "boolean", default: false },
      model: { type: "string" },
      "database-url": { type: "string" },
      ...SHARED_PARTS_FLAGS,
      "log-format": { type: "string" },
      "rpc-port": { type: "string" },
      "rate-limit": { type: "string" },
      "seed-workers": { type: "string" },
      "metrics-port": { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(HELP);
    return undefined;
  }
  const port = valueOf(portOption("--port", values.port));
  const credits = values.credits === undefined ? undefined : Number(values.credits);
  const logFormat = valueOf(logFormatOption(values["log-format"]));
  const rpcPort = values["rpc-port"] === undefined ? undefined : valueOf(portOption("--rpc-port", values["rpc-port"]));
  if (credits !== undefined && (!Number.isInteger(credits) || credits < 0)) fail(`--credits must be a whole number of credits, got '${values.credits}'`);
  const rateLimit = valueOf(rateLimitOption(values["rate-limit"]));
  return {
    port,
    host: values.host,
    dataDir: resolve(values["data-dir"]),
    credits,
    newKey: values["new-key"],
    model: values.model,
    databaseUrl: values["database-url"],
    shared: valueOf(sharedPartsOption(values)),
    rpcPort,
    logFormat,
    rateLimit,
    seedPool: valueOf(seedPoolOption(values["seed-workers"])),
    metricsPort: values["metrics-port"] === undefined ? undefined : valueOf(portOption("--metrics-port", values["metrics-port"])),
  };
}

interface DevWallet {
  address: string;
  /** Set when a key was issued on this start (first start or --new-key): shown once. */
  apiKey: string | undefined;
  /** Credits deposited on this start: the first funding or a top-up. */
  creditsDeposited: number;
  firstStart: boolean;
  creditsAvailable: number;
}

/**
 * The dev wallet with its key and credits. Credits arrive as a real deposit (a chain transaction
 * and a `credit.topup` event), the way any wallet is funded: on first start the default amount or
 * --credits; on a later start only when --credits asks for a top-up.
 */
async function fundDevWallet(service: Service, options: DevOptions): Promise<DevWallet> {
  const keypair = await loadOrCreateKeypair(join(options.dataDir, "keys"), "dev-wallet");
  service.enableDevSignIn(keypair);
  const address = keypair.address;
  await ensureWallet(service.db, address);
  const firstStart = !(await hasApiKey(service.db, address));
  let creditsDeposited = 0;
  // A first start that crashed after its deposit but before its key must not fund twice.
  const fundNow = firstStart ? !(await service.deposits.hasDeposit(address)) : options.credits !== undefined;
  const credits = options.credits ?? (firstStart ? DEFAULT_CREDITS : 0);
  if (fundNow && credits > 0) {
    await service.deposits.deposit(address, credits);
    creditsDeposited = credits;
  }
  const apiKey = firstStart || options.newKey ? await issueApiKey(service.db, address) : undefined;
  return { address, apiKey, creditsDeposited, firstStart, creditsAvailable: await availableCredits(service.db, address) };
}

function printBanner(service: Service, model: CatalogModel, wallet: DevWallet, rpcUrl: string): void {
  const lines = [
    "",
    `Base URL: ${service.baseUrl}`,
    `App: ${service.origin}/ (sign in with "Use the dev wallet")`,
    `Model: ${model.id}${model.id === WIRING_MODEL.id ? " (wiring model for development, not a language model)" : ""}`,
    `Dev wallet: ${wallet.address}`,
    `Solana RPC: ${rpcUrl}`,
    ...(service.metrics ? [`Metrics: ${service.metrics.url}`] : []),
    `Credits: ${wallet.creditsAvailable}${fundingNote(wallet)}`,
  ];
  if (wallet.apiKey) {
    lines.push(`API key: ${wallet.apiKey}`, "  (shown once: only its hash is stored; 'svc dev --new-key' replaces it)");
  } else {
    lines.push("API key: shown at first start; 'svc dev --new-key' issues a new one");
  }
  lines.push(
    "",
    "Try it:",
    `  curl ${service.baseUrl}/chat/completions -H "Authorization: Bearer ${wallet.apiKey ?? "$SVC_API_KEY"}" ` +
      `-H "Content-Type: application/json" -d '{"model":"${model.id}","messages":[{"role":"user","content":"Hello"}]}'`,
    "",
    "Press Ctrl-C to stop.",
    "",
  );
  console.log(lines.join("\n"));
}

function fundingNote(wallet: DevWallet): string {
  if (wallet.creditsDeposited === 0) return wallet.firstStart ? "" : " ('svc dev --credits <n>' tops it up)";
  return wallet.firstStart ? ` (funded with ${wallet.creditsDeposited} by an on-chain deposit)` : ` (topped up by ${wallet.creditsDeposited} with an on-chain deposit)`;
}

function valueOf<T>(parsed: Parsed<T>): T {
  return parsed.ok ? parsed.value : fail(parsed.message);
}

function fail(message: string, exitCode = 2): never {
  console.error(`svc dev: ${message}`);
  process.exit(exitCode);
}
