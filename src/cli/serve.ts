/**
 * `svc serve`: the production start of a gateway. Unlike `svc dev` it runs no worker of its own
 * (workers join with `svc worker`), creates no dev wallet and no dev sign-in, refuses webhooks to
 * plain-HTTP localhost, and its chain's JSON-RPC server has no faucet. Configuration comes from
 * flags or the environment, so a process manager can start it without arguments.
 *
 * The chain is the embedded one under the data dir, or with --chain-url a Solana cluster that
 * several gateways share (each with the same service keys, --keys-dir).
 */
import { mkdir } from "node:fs/promises";
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { DEFAULT_RPC_PORT, startChainRpcThread } from "../chain/index.ts";
import { createLogger, type LogFormat, type RateLimitOptions } from "../core/index.ts";
import { DEFAULT_PORT, startService } from "../service.ts";
import { SHARED_PARTS_FLAGS, logFormatOption, portOption, rateLimitOption, seedPoolOption, sharedPartsOption, type Parsed, type SharedPartsOptions } from "./options.ts";

const HELP = `Usage: svc serve [options]

Starts a gateway for production: workers connect to it with 'svc worker', wallet owners add
credits in its app. It runs no worker and no dev wallet of its own.

Options (each also read from the environment variable named after it):
  --port <n>          Port to listen on (SVC_PORT; default ${DEFAULT_PORT})
  --host <addr>       Address to listen on (SVC_HOST; default 127.0.0.1; 0.0.0.0 behind a TLS proxy)
  --data-dir <dir>    Where the database, chain and service keys are kept (SVC_DATA_DIR; default ./.svc)
  --database-url <u>  PostgreSQL instead of the embedded database (DATABASE_URL)
  --chain-url <u>     A Solana cluster's JSON-RPC address instead of the embedded chain, e.g. one
                      'svc chain serve' runs (SVC_CHAIN_URL)
  --keys-dir <dir>    The service's chain keys (SVC_KEYS_DIR; default <data dir>/keys); gateways
                      sharing a chain share them
  --priority-fee <n>  Micro-lamports per compute unit offered on each transaction, for a busy
                      cluster (SVC_PRIORITY_FEE; default 0)
  --escrow <design>   tables (default): each job's credits are locked in a slot of its wallet's
                      escrow table, locked and settled many jobs to a transaction; records: in an
                      escrow record of its own (SVC_ESCROW; docs/program.md)
  --nats-url <u>      NATS shared with the other gateways (SVC_NATS_URL): requests here run on
                      workers connected to any of them
  --node-id <id>      This gateway's name among those sharing the database (SVC_NODE_ID; default
                      one kept in the data dir). A node's unfinished jobs are finished or refunded
                      by the others when it stops renewing its lease (10 s)
  --rpc-port <n>      Port of the embedded chain's read-only Solana JSON-RPC server, so anyone can
                      check a charge with 'svc verify' (SVC_RPC_PORT; default ${DEFAULT_RPC_PORT}; 'off'
                      serves none; a cluster has its own)
  --rate-limit <r:b>  Requests a second and burst each client IP may send, or off (SVC_RATE_LIMIT;
                      default 50:100)
  --trust-proxy <a,b> Addresses or CIDR ranges of the proxies in front of this gateway, comma-
                      separated (SVC_TRUST_PROXY): their X-Forwarded-For names the client, whom the
                      per-IP limits then count; without it every client behind a proxy shares one
  --metrics-port <n>  Serve Prometheus metrics at http://<metrics host>:<n>/metrics, a port of their
                      own (SVC_METRICS_PORT; default: none served; docs/deploy.md lists them)
  --metrics-host <a>  Address the metrics port listens on (SVC_METRICS_HOST; default 127.0.0.1)
  --seed-workers <a,b>
                      Addresses of the operator's own workers, comma-separated (SVC_SEED_WORKERS):
                      their outputs outweigh any stake when workers disagree (docs/workers.md)
  --log-format <f>    pretty or json (SVC_LOG_FORMAT; default json unless on a terminal)
  -h, --help          Show this help`;

interface ServeOptions {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | undefined;
  shared: SharedPartsOptions;
  nodeId: string | undefined;
  rpcPort: number | "off";
  /** Undefined: the default limit. */
  rateLimit: RateLimitOptions | false | undefined;
  trustProxy: string[];
  seedPool: string[];
  logFormat: LogFormat;
  metrics: { port: number; host: string } | undefined;
}

export async function runServe(argv: string[]): Promise<void> {
  const options = parseServeArgs(argv);
  if (options === undefined) return;
  await mkdir(options.dataDir, { recursive: true });
  const logger = createLogger({ format: options.logFormat });
  const service = await startService({
    dataDir: options.dataDir,
    port: options.port,
    host: options.host,
    logger,
    ...(options.databaseUrl ? { databaseUrl: options.databaseUrl } : {}),
    ...options.shared,
    ...(options.nodeId ? { nodeId: options.nodeId } : {}),
    ...(options.rateLimit !== undefined ? { rateLimit: options.rateLimit } : {}),
    trustProxy: options.trustProxy,
    seedPool: options.seedPool,
    ...(options.metrics ? { metrics: options.metrics } : {}),
  });
  const { chainUrl } = options.shared;
  const chainRpc = options.rpcPort === "off" || chainUrl
    ? undefined
    : await startChainRpcThread({ chain: service.chain, port: options.rpcPort, host: options.host, faucet: false, logger });
  console.log(
    [
      "",
      `Base URL: ${service.baseUrl}`,
      `Node: ${service.nodeId}`,
      `App: ${service.origin}/`,
      ...(chainRpc || chainUrl ? [`Solana RPC: ${chainRpc?.url ?? chainUrl}`] : []),
      ...(service.metrics ? [`Metrics: ${service.metrics.url}`] : []),
      `Workers join with: svc worker --gateway ${service.origin} --keypair <file.json> --model <catalog-id>=<engine>`,
      "",
    ].join("\n"),
  );
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "shutting down");
    await chainRpc?.close();
    await service.close((step, fields) => logger.info(fields ?? {}, step));
    logger.info("stopped");
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
}

function parseServeArgs(argv: string[]): ServeOptions | undefined {
  const env = process.env;
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        port: { type: "string", default: env.SVC_PORT ?? String(DEFAULT_PORT) },
        host: { type: "string", default: env.SVC_HOST ?? "127.0.0.1" },
        "data-dir": { type: "string", default: env.SVC_DATA_DIR ?? ".svc" },
        "database-url": { type: "string" },
        ...SHARED_PARTS_FLAGS,
        "node-id": { type: "string" },
        "rpc-port": { type: "string", default: env.SVC_RPC_PORT ?? String(DEFAULT_RPC_PORT) },
        "rate-limit": { type: "string" },
        "trust-proxy": { type: "string", default: env.SVC_TRUST_PROXY ?? "" },
        "seed-workers": { type: "string" },
        "metrics-port": { type: "string", ...(env.SVC_METRICS_PORT ? { default: env.SVC_METRICS_PORT } : {}) },
        "metrics-host": { type: "string", default: env.SVC_METRICS_HOST ?? "127.0.0.1" },
        "log-format": { type: "string" },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
    }));
  } catch (error) {
    return fail((error as Error).message);
  }
  if (values.help) {
    console.log(HELP);
    return undefined;
  }
  const rpc = values["rpc-port"]!;
  return {
    port: valueOf(portOption("--port", values.port!)),
    host: values.host!,
    dataDir: resolve(values["data-dir"]!),
    databaseUrl: values["database-url"] ?? env.DATABASE_URL,
    shared: valueOf(sharedPartsOption(values)),
    nodeId: values["node-id"] ?? env.SVC_NODE_ID,
    rpcPort: rpc === "off" ? "off" : valueOf(portOption("--rpc-port", rpc)),
    rateLimit: valueOf(rateLimitOption(values["rate-limit"])),
    trustProxy: values["trust-proxy"]!.split(",").map((a) => a.trim()).filter((a) => a !== ""),
    seedPool: valueOf(seedPoolOption(values["seed-workers"])),
    logFormat: valueOf(logFormatOption(values["log-format"])),
    metrics: values["metrics-port"] === undefined ? undefined : { port: valueOf(portOption("--metrics-port", values["metrics-port"])), host: values["metrics-host"]! },
  };
}

function valueOf<T>(parsed: Parsed<T>): T {
  return parsed.ok ? parsed.value : fail(parsed.message);
}

function fail(message: string): never {
  console.error(`svc serve: ${message}\n\n${HELP}`);
  process.exit(2);
}
