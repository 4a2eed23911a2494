/**
 * `svc verify <job_id>`: the receipt a caller checks without trusting the service. The chain is
 * read over its JSON-RPC; the service is asked only what it claims (with SVC_API_KEY), and those
 * claims are checked against the chain too. Exits 0 when every check passes, 1 on any mismatch,
 * 2 when it could not check (bad arguments, an endpoint it could not reach).
 */
import { readFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { ChargeReader, DEFAULT_RPC_PORT, ESCROW_PROGRAM, readTableCharge, toAddress, type TableReceipt } from "../chain/index.ts";
import { checkCharge, checkTableCharge, formatReceipt, formatTableReceipt, type ServiceClaims } from "../verify/index.ts";

const HELP = `Usage: svc verify <job_id> [--base-url <url>] [--rpc <url>] [--output <file>]
                  [--escrow-tx <signature>] [--settlement-tx <signature>] [--program <id>]
                  [--receipt <file>]

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
  --receipt <file>         For a job kept in an escrow table: its receipt as JSON (table, slot,
                           leaf_index, tree_size, path, prompt_tokens, completion_tokens,
                           proof_hash, and optionally escrow_tx, settlement_tx): its leaf must lead
                           up its path to the root the worker signed for the settlement. With
                           SVC_API_KEY set, the receipt the job object carries is used when none is
                           given
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
        receipt: { type: "string" },
        help: { type: "boolean", short: "h", default: false },
      },
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    return usage((error as Error).message);
  }
}

/**
 * What the service says about the job, and a table job's receipt as it gives it (checked like one
 * given with --receipt: the chain decides); throws with the API's own message when it says no.
 */
async function claimsOf(baseUrl: string, jobId: string, apiKey: string): Promise<{ claims: ServiceClaims; receipt?: string }> {
  const res = await fetch(`${baseUrl.replace(/\/$/, "")}/jobs/${encodeURIComponent(jobId)}`, { headers: { authorization: `Bearer ${apiKey}` } });
  const body = (await res.json()) as Record<string, unknown> & { error?: { message: string }; on_chain?: Record<string, string | null> & { receipt?: unknown } };
  if (!res.ok) throw new Error(`the service answered ${res.status}: ${body.error?.message ?? "no message"}`);
  const receipt = body.on_chain?.receipt;
  const claims = {
    tier: String(body.tier),
    status: String(body.status),
    creditsCharged: Number(body.credits_charged),
    workerAddress: (body.worker_address as string | null) ?? null,
    escrowAddress: body.on_chain?.escrow_address ?? null,
    proofHash: body.on_chain?.proof_hash ?? null,
  };
  return { claims, ...(receipt !== undefined && receipt !== null ? { receipt: JSON.stringify(receipt) } : {}) };
}

/** A table job's receipt from its JSON (the field names of the API); throws naming what is wrong. */
export function parseReceipt(text: string): TableReceipt {
  const r = JSON.parse(text) as Record<string, unknown>;
  const int = (key: string, max: number) => {
    const v = r[key];
    if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > max) throw new TypeError(`receipt.${key} must be an integer from 0 to ${max}`);
    return v;
  };
  const hex = /^[0-9a-f]{64}$/;
  if (!Array.isArray(r.path) || !r.path.every((p) => typeof p === "string" && hex.test(p))) throw new TypeError("receipt.path must be a list of 32-byte hashes in hex");
  if (typeof r.proof_hash !== "string" || !/^sha256:[0-9a-f]{64}$/.test(r.proof_hash)) throw new TypeError("receipt.proof_hash must be sha256:<64 hex>");
  const optional = (key: string) => (typeof r[key] === "string" ? { [key === "escrow_tx" ? "escrowTx" : "settlementTx"]: r[key] as string } : {});
  return {
    table: toAddress(String(r.table)),
    slot: int("slot", 254),
    leafIndex: int("leaf_index", 254),
    treeSize: int("tree_size", 255),
    path: (r.path as string[]).map((p) => new Uint8Array(Buffer.from(p, "hex"))),
    promptTokens: int("prompt_tokens", 2 ** 32 - 1),
    completionTokens: int("completion_tokens", 2 ** 32 - 1),
    proofHash: r.proof_hash,
    ...optional("escrow_tx"),
    ...optional("settlement_tx"),
  };
}

/** The report and how many checks failed, for a job of a table or one escrowed on its own. */
async function checkJob(values: ReturnType<typeof parse>["values"], jobId: string, service: Awaited<ReturnType<typeof claimsOf>> | undefined, outputText: string | undefined) {
  const reader = new ChargeReader(values.rpc!, toAddress(values.program!));
  const claims = service?.claims;
  const options = { ...(claims ? { claims } : {}), ...(outputText !== undefined ? { outputText } : {}) };
  const receiptText = values.receipt !== undefined ? await readFile(values.receipt, "utf8") : service?.receipt;
  if (receiptText !== undefined) {
    const receipt = parseReceipt(receiptText);
    const facts = await readTableCharge(reader, jobId, receipt);
    const checks = checkTableCharge(facts, receipt, options);
    return { report: formatTableReceipt(facts, receipt, checks), failed: checks.filter((c) => !c.ok).length };
  }
  const facts = await reader.read(jobId, { lock: values["escrow-tx"], settlement: values["settlement-tx"] });
  const checks = checkCharge(facts, options);
  return { report: formatReceipt(facts, checks), failed: checks.filter((c) => !c.ok).length };
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
    const service = apiKey ? await claimsOf(values["base-url"]!, jobId!, apiKey) : undefined;
    const outputText = values.output === undefined ? undefined : await readFile(values.output, "utf8");
    ({ report, failed } = await checkJob(values, jobId!, service, outputText));
  } catch (error) {
    console.error(`svc verify: could not check ${jobId}: ${(error as Error).message} (chain: ${values.rpc}${apiKey ? `, API: ${values["base-url"]}` : ""})`);
    process.exit(2);
  }
  console.log(report);
  if (!apiKey) console.log("(SVC_API_KEY not set: the service's own claims were not checked.)");
  process.exit(failed === 0 ? 0 : 1);
}
