/**
 * `svc worker stake` and `svc worker unstake`: a worker's stake in the escrow program, signed with
 * its own keypair and sent over the chain's JSON-RPC (what `svc dev` prints as `Solana RPC:`).
 * Without an amount, `stake` shows the stake: active, unstaking and when it can be withdrawn,
 * and whether it was ever slashed.
 */
import { basename, dirname } from "node:path";
import { parseArgs } from "node:util";
import { DEFAULT_RPC_PORT, ESCROW_PROGRAM, StakeClient, formatNative, nativeUnits, toAddress, type StakeStatus } from "../chain/index.ts";
import { loadOrCreateKeypair } from "../core/index.ts";

const HELP = `Usage: svc worker stake [<tokens>] --keypair <file.json> [--rpc <url>] [--program <id>]
       svc worker unstake <tokens> --keypair <file.json> [--rpc <url>]
       svc worker unstake --withdraw --keypair <file.json> [--rpc <url>]

Stakes native tokens from the worker's own token account (85% of each charge instead of 75% from
the minimum on), asks to unstake some (they stop counting at once and can be withdrawn after the
cooldown, which outlasts disputes and their arbitration), or withdraws what the cooldown freed.
Without <tokens>, 'stake' shows the stake. The worker signs and pays the network fee itself.

Options:
  --keypair <file.json>  The worker's keypair (the one 'svc worker' serves with)
  --rpc <url>            The chain's JSON-RPC (default http://127.0.0.1:${DEFAULT_RPC_PORT}, as 'svc dev' serves it)
  --withdraw             With unstake: withdraw everything whose cooldown has passed
  --program <id>         The escrow program's id on a cluster set up by 'svc chain init' (the id it
                         printed; default: the embedded chain's fixed id)
  -h, --help             Show this help`;

function describe(s: StakeStatus): string {
  const lines = [
    `Worker ${s.worker}`,
    `  active stake:   ${formatNative(s.active)} (the staked share needs ${formatNative(s.minActiveStake)}; ${s.earnsStakedShare ? "earned" : "not earned"})`,
    `  unstaking:      ${formatNative(s.unstaking)}${s.withdrawableAt ? `, withdrawable from ${s.withdrawableAt.toISOString()}` : ""}`,
  ];
  if (s.slashed) lines.push(`  SLASHED:        ${formatNative(s.slashedTotal)} taken for fraudulent proofs; this stake never earns the staked share again`);
  return lines.join("\n");
}

function parse(argv: string[], fail: (message: string) => never) {
  try {
    return parseArgs({
      args: argv,
      options: {
        keypair: { type: "string" },
        rpc: { type: "string", default: `http://127.0.0.1:${DEFAULT_RPC_PORT}` },
        withdraw: { type: "boolean", default: false },
        program: { type: "string", default: ESCROW_PROGRAM },
        help: { type: "boolean", short: "h", default: false },
      },
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    return fail((error as Error).message);
  }
}

export async function runWorkerStake(command: "stake" | "unstake", argv: string[]): Promise<void> {
  const fail = (message: string): never => {
    console.error(`svc worker ${command}: ${message}\n\n${HELP}`);
    process.exit(2);
  };
  const { values, positionals } = parse(argv, fail);
  if (values.help) return void console.log(HELP);
  if (!values.keypair) fail("--keypair is required");
  if (positionals.length > 1 || (command === "unstake" && positionals.length === 0 && !values.withdraw)) fail("give one amount of tokens");
  let amount: bigint | undefined;
  try {
    amount = positionals[0] === undefined ? undefined : nativeUnits(positionals[0]);
  } catch (error) {
    fail((error as Error).message);
  }
  const worker = await loadOrCreateKeypair(dirname(values.keypair!), basename(values.keypair!, ".json"));
  let program;
  try {
    program = toAddress(values.program!);
  } catch {
    fail(`--program is not an address: ${values.program}`);
  }
  const client = new StakeClient(values.rpc!, program);
  try {
    if (command === "stake" && amount !== undefined) console.log(`Staked ${formatNative(amount)}: ${await client.stake(worker, amount)}`);
    if (command === "unstake" && amount !== undefined) console.log(`Unstaking ${formatNative(amount)}: ${await client.requestUnstake(worker, amount)}`);
    if (command === "unstake" && values.withdraw) console.log(`Withdrawn: ${await client.withdrawStake(worker)}`);
    console.log(describe(await client.status(worker.address)));
  } catch (error) {
    console.error(`svc worker ${command}: ${(error as Error).message} (chain: ${values.rpc})`);
    process.exit(1);
  }
}
