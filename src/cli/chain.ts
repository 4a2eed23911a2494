/**
 * `svc chain init` (chain-init.ts) sets up a Solana cluster for the service.
 *
 * `svc chain serve`: the embedded chain on its own, with the escrow program, the service's mints
 * and the program's config set up, served over Solana's JSON-RPC and WebSocket API (the same
 * server `svc dev` runs beside the gateway). Wallets, explorers and kit's client can use it as a
 * local cluster. Ctrl-C checkpoints the chain and exits 0.
 */
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { DEFAULT_RPC_PORT, openChain, startChainRpc } from "../chain/index.ts";
import { createLogger, defaultLogFormat, type LogFormat } from "../core/index.ts";

const HELP = `Usage: svc chain serve [--port <n>] [--host <addr>] [--data-dir <dir>] [--slot-ms <n>]
       svc chain init --chain-url <url> --keys-dir <dir> [--priority-fee <n>]   (svc chain init --help)

Runs the embedded Solana chain (LiteSVM, with the escrow program and its config) on its own and
serves its JSON-RPC and WebSocket API. State, keys and the transaction log live in the data dir and
survive restarts and kill -9.

Options:
  --port <n>        Port of the JSON-RPC server (default ${DEFAULT_RPC_PORT}; 0 picks a free one)
  --host <addr>     Address to listen on (default 127.0.0.1)
  --data-dir <dir>  Where the chain and its keys are kept (default ./.svc-chain). Gateways
                    using this chain (--chain-url) take the same keys: --keys-dir <dir>/keys
  --slot-ms <n>     Length of a slot in ms (default 400); a blockhash lives 150 slots
  -h, --help        Show this help`;

function usage(message: string): never {
  console.error(`svc chain: ${message}\n\n${HELP}`);
  process.exit(2);
}

export async function runChain(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  if (sub === "--help" || sub === "-h" || sub === undefined) return void console.log(HELP);
  if (sub === "init") return (await import("./chain-init.ts")).runChainInit(rest);
  if (sub !== "serve") usage(`unknown subcommand '${sub}'`);
  let values;
  try {
    ({ values } = parseArgs({
      args: rest,
      options: {
        port: { type: "string", default: String(DEFAULT_RPC_PORT) },
        host: { type: "string", default: "127.0.0.1" },
        "data-dir": { type: "string", default: ".svc-chain" },
        "slot-ms": { type: "string", default: "400" },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
    }));
  } catch (error) {
    return usage((error as Error).message);
  }
  if (values.help) return void console.log(HELP);
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) usage(`--port must be a port number, got '${values.port}'`);
  const slotMs = Number(values["slot-ms"]);
  if (!Number.isInteger(slotMs) || slotMs < 1) usage(`--slot-ms must be a whole number of milliseconds, got '${values["slot-ms"]}'`);
  const logger = createLogger({ format: (process.env.SVC_LOG_FORMAT as LogFormat | undefined) ?? defaultLogFormat() });
  const chain = await openChain({ dataDir: resolve(values["data-dir"]!), slotMs, logger });
  const server = await startChainRpc({ chain, port, host: values.host!, faucet: true, logger });
  console.log(`Solana RPC: ${server.url}`);
  console.log(`Solana WebSocket: ${server.wsUrl}`);
  console.log(`Data dir: ${resolve(values["data-dir"]!)}`);
  console.log(`Service keys: ${resolve(values["data-dir"]!, "keys")} (gateways on this chain: --chain-url ${server.url} --keys-dir <that dir>)`);
  console.log("Press Ctrl-C to stop.");
  const stop = async () => {
    await server.close();
    await chain.close();
    process.exit(0);
  };
  process.once("SIGINT", () => void stop());
  process.once("SIGTERM", () => void stop());
}
