/**
 * `svc verify <job_id>`: the receipt a caller checks without trusting the service. The chain is
 * read over its JSON-RPC; the service is asked only what it claims (with SVC_API_KEY), and those
 * claims are checked against the chain too. Exits 0 when every check passes, 1 on any mismatch,
 * 2 when it could not check (bad arguments, an endpoint it could not reach).
 */
import { readFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { ChargeReader, DEFAULT_RPC_PORT, ESCROW_PROGRAM, toAddress } from "../chain/index.ts";
import { checkCharge, formatReceipt, type ServiceClaims } from "../verify/index.ts";

const HELP = `Usage: svc verify <job_id> [--base-url <url>] [--rpc <url>] [--output <file>]
                  [--escrow-tx <signature>] [--settlement-tx <signature>] [--program <id>]

Checks a job's charge on the chain: the program's escrow record, the lock (amount, tier, job id),
the settlement's Ed25519 check of the worker's signature over the proof, the split between worker
and treasury, and the unused credits returned. With SVC_API_KEY set, what the service says about
the job (GET /jobs/{id}) is checked against the chain as well; without it, the chain alone is read.

Options:
  --base-url <url>         The API (default http://127.0.0.1:8080/v1)
  --rpc <url>              The chain's JSON-RPC (default http://127.0.0.1:${DEFAULT_RPC_PORT}, as 'svc dev' serves it)
  --output <file>          The text you received: its SHA-256 must be the worker's proof hash
  --escrow-tx <sig>        The lock transaction (default: found from the job's escrow address)
  --settlement-tx <sig>    The settlement transaction (likewise)
  --program <id>           The escrow program's id on a cluster set up by 'svc chain init' (the id it
                           printed; default: the embedded chain's fixed id)
  -h, --help               Show this help

Exit status: 0 every check passed, 1 a check failed, 2 the receipt could not be checked.`;

function usage(message: string): never {
  console.error(`svc verify: ${message}\n\n${HELP}`);
  process.exit(2);
}

function parse(argv: string[]) {
  try {
    return parseArgs({
      args: argv,
      options: {
        "base-url": { type: "string", default: "http://127.0.0.1:8080/v1" },
        rpc: { type: "string", default: `http://127.0.0.1:${DEFAULT_RPC_PORT}` },
        output: { type: "string" },
        "escrow-tx": { type: "string" },
        "settlement-tx": { type: "string" },
        program: { type: "string", default: ESCROW_PROGRAM },
        help: { type: "boolean", short: "h", default: false },
      },
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    return usage((error as Error).message);
  }
}

/** What the service says about the job; throws with the API's own message when it says no. */
async function claimsOf(baseUrl: string, jobId: string, apiKey: string): Promise<ServiceClaims> {
  const res = await fetch(`${baseUrl.replace(/\/$/, "")}/jobs/${encodeURIComponent(jobId)}`, { headers: { authorization: `Bearer ${apiKey}` } });
  const body = (await res.json()) as Record<string, unknown> & { error?: { message: string }; on_chain?: Record<string, string | null> };
  if (!res.ok) throw new Error(`the service answered ${res.status}: ${body.error?.message ?? "no message"}`);
  return {
    tier: String(body.tier),
    status: String(body.status),
    creditsCharged: Number(body.credits_charged),
    workerAddress: (body.worker_address as string | null) ?? null,
    escrowAddress: body.on_chain?.escrow_address ?? null,
    proofHash: body.on_chain?.proof_hash ?? null,
  };
}

export async function runVerify(argv: string[]): Promise<void> {
  const { values, positionals } = parse(argv);
  if (values.help) return void console.log(HELP);
  const [jobId] = positionals;
  if (positionals.length !== 1 || !/^job_[\x21-\x7e]{1,28}$/.test(jobId!)) usage("give one job id (job_...)");
  const apiKey = process.env.SVC_API_KEY;
  let report: string;
  let failed: number;
  try {
    const claims = apiKey ? await claimsOf(values["base-url"]!, jobId!, apiKey) : undefined;
    const outputText = values.output === undefined ? undefined : await readFile(values.output, "utf8");
    const facts = await new ChargeReader(values.rpc!, toAddress(values.program!)).read(jobId!, { lock: values["escrow-tx"], settlement: values["settlement-tx"] });
    const checks = checkCharge(facts, { ...(claims ? { claims } : {}), ...(outputText !== undefined ? { outputText } : {}) });
    report = formatReceipt(facts, checks);
    failed = checks.filter((c) => !c.ok).length;
  } catch (error) {
    console.error(`svc verify: could not check ${jobId}: ${(error as Error).message} (chain: ${values.rpc}${apiKey ? `, API: ${values["base-url"]}` : ""})`);
    process.exit(2);
  }
  console.log(report);
  if (!apiKey) console.log("(SVC_API_KEY not set: the service's own claims were not checked.)");
  process.exit(failed === 0 ? 0 : 1);
}
