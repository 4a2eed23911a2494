/**
 * `svc dev`: the whole service on one machine with embedded defaults (PGlite and LiteSVM under
 * the data dir), a seed-pool worker running the model in this process, and a dev wallet with
 * credits. The seed worker joins through the worker protocol over loopback, exactly as a remote
 * `svc worker` would, so the default path exercises the network.
 */
import { mkdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { hasApiKey, issueApiKey, ensureWallet } from "../accounts/accounts.ts";
import { DEV_MODEL, defaultCatalog } from "../catalog/catalog.ts";
import { loadOrCreateKeypair } from "../chain/keys.ts";
import { createLogger } from "../core/logger.ts";
import { DEFAULT_PORT, startService } from "../service.ts";
import { DEFAULT_MAX_SEQUENCES } from "../inference/llama-engine.ts";
import { WorkerClient } from "../worker/worker-client.ts";
import { loadModelEngine } from "./model-engine.ts";

const HELP = `Usage: svc dev [options]

Starts the gateway at http://127.0.0.1:<port>/v1 with everything embedded.

Options:
  --port <n>          Port to listen on (default ${DEFAULT_PORT})
  --host <addr>       Address to listen on (default 127.0.0.1; 0.0.0.0 lets workers on other machines connect)
  --data-dir <dir>    Where the database, chain and keys are kept (default ./.svc)
  --credits <n>       Credits the dev wallet gets on first start (default 10000)
  --new-key           Replace the dev wallet's API key; the old key stops working at once
  --model <model>     A GGUF file or hf:<user>/<repo>/<file>.gguf (default: the built-in wiring model)
  --database-url <u>  Use this PostgreSQL database instead of the embedded one
  -h, --help          Show this help`;

export async function runDev(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      port: { type: "string", default: String(DEFAULT_PORT) },
      host: { type: "string", default: "127.0.0.1" },
      "data-dir": { type: "string", default: ".svc" },
      credits: { type: "string", default: "10000" },
      "new-key": { type: "boolean", default: false },
      model: { type: "string" },
      "database-url": { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(HELP);
    return;
  }
  const port = Number(values.port);
  const credits = Number(values.credits);
  if (!Number.isInteger(port) || port < 0 || port > 65535) fail(`--port must be a port number, got '${values.port}'`);
  if (!Number.isInteger(credits) || credits < 0) fail(`--credits must be a whole number of credits, got '${values.credits}'`);
  const dataDir = resolve(values["data-dir"]);
  await mkdir(dataDir, { recursive: true });
  const logger = createLogger();

  const catalog = defaultCatalog();
  const { engine, model } = await loadModelEngine({ spec: values.model, dataDir, catalog, logger });
  const workerKey = await loadOrCreateKeypair(join(dataDir, "keys"), "seed-worker");

  const service = await startService({
    dataDir,
    port,
    host: values.host,
    catalog,
    logger,
    webhooks: { allowHttpLocalhost: true },
    ...(values["database-url"] ? { databaseUrl: values["database-url"] } : {}),
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

  const wallet = (await loadOrCreateKeypair(join(dataDir, "keys"), "dev-wallet")).address;
  await ensureWallet(service.db, wallet);
  let apiKey: string | undefined;
  if (!(await hasApiKey(service.db, wallet))) {
    if (credits > 0 && !(await service.actions.hasDeposit(wallet))) await service.actions.deposit(wallet, credits);
    apiKey = await issueApiKey(service.db, wallet);
  } else if (values["new-key"]) {
    apiKey = await issueApiKey(service.db, wallet);
  }

  console.log(`Base URL: ${service.baseUrl}`);
  console.log(`Model: ${model.id}${model.id === DEV_MODEL.id ? " (wiring model for development, not a language model)" : ""}`);
  console.log(`Dev wallet: ${wallet}`);
  if (apiKey) {
    console.log(`API key: ${apiKey}`);
    console.log("  (shown once: only its hash is stored; 'svc dev --new-key' replaces it)");
  } else {
    console.log("API key: shown at first start; 'svc dev --new-key' issues a new one");
  }
  console.log("\nTry it:");
  console.log(
    `  curl ${service.baseUrl}/chat/completions -H "Authorization: Bearer ${apiKey ?? "$SVC_API_KEY"}" ` +
      `-H "Content-Type: application/json" -d '{"model":"${model.id}","messages":[{"role":"user","content":"Hello"}]}'`,
  );
  console.log("\nPress Ctrl-C to stop.");

  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "shutting down");
    await service.close();
    await seedWorker.close();
    await engine.close();
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
}

function fail(message: string): never {
  console.error(`svc dev: ${message}`);
  process.exit(2);
}
