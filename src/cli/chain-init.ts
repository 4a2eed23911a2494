/**
 * `svc chain init`: sets up a fresh Solana cluster for the service (src/chain/chain-init.ts):
 * keys, the escrow program through the upgradeable loader, mints, treasury and the program's
 * config. Safe to run again: what is there is left alone, and an interrupted run is finished.
 */
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { initChain } from "../chain/index.ts";
import { sharedPartsOption } from "./options.ts";

export const INIT_HELP = `Usage: svc chain init --chain-url <url> --keys-dir <dir> [--priority-fee <n>]

Sets up a Solana cluster for the service: creates the service's keys in the keys dir (or uses
those there), deploys program/escrow.so through the upgradeable loader at the key
escrow-program.json, then creates the mints, the treasury's account and the program's config.
Each step is skipped when the chain has it: a second run changes nothing, and a run that was
interrupted (even mid-write) is finished by the next. On a development cluster the fee payer is
funded from its faucet; elsewhere send it the SOL the command asks for.

Options:
  --chain-url <url>     The cluster's JSON-RPC (SVC_CHAIN_URL)
  --keys-dir <dir>      Where the service's keys are kept (SVC_KEYS_DIR); gateways take the same
  --priority-fee <n>    Micro-lamports per compute unit offered on each transaction (SVC_PRIORITY_FEE)
  -h, --help            Show this help`;

function usage(message: string): never {
  console.error(`svc chain init: ${message}\n\n${INIT_HELP}`);
  process.exit(2);
}

function parse(argv: string[]) {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        "chain-url": { type: "string" },
        "keys-dir": { type: "string" },
        "priority-fee": { type: "string" },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
    }));
  } catch (error) {
    return usage((error as Error).message);
  }
  if (values.help) {
    console.log(INIT_HELP);
    process.exit(0);
  }
  const parsed = sharedPartsOption(values);
  if (!parsed.ok) return usage(parsed.message);
  const { chainUrl, keysDir, priorityFeeMicroLamports } = parsed.value;
  if (!chainUrl) return usage("--chain-url is required (or SVC_CHAIN_URL)");
  if (!keysDir) return usage("--keys-dir is required (or SVC_KEYS_DIR)");
  return { chainUrl, keysDir: resolve(keysDir), ...(priorityFeeMicroLamports ? { priorityFeeMicroLamports } : {}) };
}

/** Chunks written of the total: one line rewritten on a terminal, a line per tenth otherwise. */
function progressLine(): (written: number, total: number) => void {
  let lastTenth = -1;
  return (written, total) => {
    const line = `Writing the program: ${written}/${total} chunks`;
    if (process.stdout.isTTY) return void process.stdout.write(`\r${line}${written === total ? "\n" : ""}`);
    const tenth = Math.floor((written * 10) / total);
    if (tenth === lastTenth && written !== total) return;
    lastTenth = tenth;
    console.log(line);
  };
}

export async function runChainInit(argv: string[]): Promise<void> {
  const options = parse(argv);
  try {
    const result = await initChain({ ...options, say: (line) => console.log(line), progress: progressLine() });
    console.log(`Escrow program: ${result.program}`);
    console.log(`Config: ${result.config}`);
    if (result.upgradeAuthority) console.log(`Upgrade authority: ${result.upgradeAuthority} (upgrade-authority.json: keep it off the gateways, docs/deploy.md)`);
    console.log(`Gateways on this chain: --chain-url ${options.chainUrl} --keys-dir ${options.keysDir}`);
    // The backend is closed; its last rebroadcast timers (2 s) would only hold the exit back.
    process.exit(0);
  } catch (error) {
    console.error(`svc chain init: ${(error as Error).message}`);
    console.error("What was done so far stays on the chain and in the keys dir: run the same command again to finish.");
    process.exit(1);
  }
}
