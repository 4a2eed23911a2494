/**
 * `svc admin`: the operator's command. It reads the configuration `svc serve` reads and acts
 * where the database is: on PostgreSQL (DATABASE_URL) it opens the database itself, and every
 * node hears the change through the database; on the embedded store it asks the node running on
 * the data dir, through its admin socket, or opens the data dir itself when no node runs there.
 */
import { hostname, userInfo } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { AdminRefusal, DEFAULT_LOG_LIMIT, MAX_LOG_LIMIT, TOKENIZERS, adminSocketPath, checkActor, checkOperation, runAdminOperation, runOnNode, type AdminOperation, type AdminOutcome } from "../admin/index.ts";
import { TIERS } from "../core/index.ts";
import { type Db, embeddedEngineIn, migrate, openDb } from "../store/index.ts";

const HELP = `Usage: svc admin <command> [options]

Commands:
  keys suspend --wallet <address> --reason <text>
                      Suspend the wallet's API key: every request with it is refused (403
                      key_suspended) on every node
  keys reinstate --wallet <address> [--reason <text>]
  workers suspend --worker <address> --reason <text>
                      The worker gets no jobs on any node, also when it reconnects
  workers reinstate --worker <address> [--reason <text>]
  workers list        Suspended workers (and, on the embedded store, those connected to the node)
  models approve <id> --owned-by <name> --tier <${Object.keys(TIERS).join("|")}> --parameters <e.g. 8B>
                      --context-window <tokens> --description <text> [--tokenizer <${TOKENIZERS.join("|")}>]
                      [--reason <text>]
  models retire <id> --at <ISO date> --reason <text>
                      Announce the model's retirement; from that moment it is refused
  models list         Approved models, with their retirements
  log [--limit <n>]   The audit log of these actions, newest first (default ${DEFAULT_LOG_LIMIT}, at most ${MAX_LOG_LIMIT})

Options:
  --data-dir <dir>    The embedded store's data dir (SVC_DATA_DIR; default ./.svc). A node running on
                      it takes the action through <dir>/admin.sock; with none running, the data dir
                      is opened here
  --database-url <u>  PostgreSQL instead of the embedded store (DATABASE_URL)
  --by <name>         Who the audit log records as taking the action (default <OS user>@<host>)
  -h, --help          Show this help

Every action is recorded in the audit log with its reason, time and who took it.
Exit status: 0 done, 1 refused (the message says why), 2 a usage error.`;

const COMMON = ["data-dir", "database-url", "by", "help"];

/** Each command: the flags it takes beyond the common ones, and how they make its operation. */
const COMMANDS: Record<string, { flags: string[]; operation: (v: Record<string, string | undefined>, id: string | undefined) => Record<string, unknown> }> = {
  "keys suspend": { flags: ["wallet", "reason"], operation: (v) => ({ action: "keys.suspend", wallet: v.wallet, reason: v.reason }) },
  "keys reinstate": { flags: ["wallet", "reason"], operation: (v) => ({ action: "keys.reinstate", wallet: v.wallet, reason: v.reason }) },
  "workers suspend": { flags: ["worker", "reason"], operation: (v) => ({ action: "workers.suspend", worker: v.worker, reason: v.reason }) },
  "workers reinstate": { flags: ["worker", "reason"], operation: (v) => ({ action: "workers.reinstate", worker: v.worker, reason: v.reason }) },
  "workers list": { flags: [], operation: () => ({ action: "workers.list" }) },
  "models approve": {
    flags: ["owned-by", "tier", "parameters", "context-window", "description", "tokenizer", "reason"],
    operation: (v, id) => ({
      action: "models.approve",
      model: { id, ownedBy: v["owned-by"], tier: v.tier, parameters: v.parameters, contextWindow: v["context-window"], description: v.description, tokenizer: v.tokenizer },
      reason: v.reason,
    }),
  },
  "models retire": { flags: ["at", "reason"], operation: (v, id) => ({ action: "models.retire", id, retiresAt: v.at, reason: v.reason }) },
  "models list": { flags: [], operation: () => ({ action: "models.list" }) },
  log: { flags: ["limit"], operation: (v) => ({ action: "log", limit: v.limit }) },
};

const FLAGS = new Set([...COMMON, ...Object.values(COMMANDS).flatMap((c) => c.flags)]);

interface AdminRequest {
  operation: AdminOperation;
  by: string;
  where: { databaseUrl: string } | { dataDir: string };
}

export async function runAdmin(argv: string[]): Promise<void> {
  const request = parseAdminArgs(argv);
  if (request === undefined) return;
  try {
    const outcome = await execute(request);
    console.log(outcome.lines.join("\n"));
  } catch (error) {
    // A refusal is the operator's to act on; anything else is reported the same way, as a failure.
    console.error(`svc admin: ${error instanceof AdminRefusal ? error.message : `failed: ${(error as Error).message}`}`);
    process.exit(1);
  }
}

function parseAdminArgs(argv: string[]): AdminRequest | undefined {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: Object.fromEntries([...FLAGS].map((f) => [f, f === "help" ? { type: "boolean", short: "h" } : { type: "string" }])), allowPositionals: true, strict: true });
  } catch (error) {
    return usage((error as Error).message);
  }
  const values = parsed.values as Record<string, string | boolean | undefined>;
  if (values.help || parsed.positionals.length === 0) {
    console.log(HELP);
    return undefined;
  }
  const [group, verb, ...more] = parsed.positionals;
  const name = group === "log" ? "log" : `${group} ${verb ?? ""}`.trim();
  const command = COMMANDS[name];
  if (command === undefined) return usage(`unknown command '${parsed.positionals.join(" ").slice(0, 60)}'`);
  const takesId = name === "models approve" || name === "models retire";
  const extra = group === "log" ? [verb, ...more].filter((p) => p !== undefined) : takesId ? more.slice(1) : more;
  if (extra.length > 0) return usage(`'${name}' takes no argument '${extra[0]}'`);
  const stray = Object.keys(values).find((flag) => values[flag] !== undefined && !COMMON.includes(flag) && !command.flags.includes(flag));
  if (stray !== undefined) return usage(`'${name}' takes no --${stray}`);
  const strings = values as Record<string, string | undefined>;
  const operation = checkOperation(command.operation(strings, takesId ? more[0] : undefined));
  if (!operation.ok) return usage(operation.message);
  const by = checkActor(strings.by ?? defaultActor());
  if (!by.ok) return usage(by.message);
  const databaseUrl = strings["database-url"] ?? process.env.DATABASE_URL;
  const where = databaseUrl ? { databaseUrl } : { dataDir: resolve(strings["data-dir"] ?? process.env.SVC_DATA_DIR ?? ".svc") };
  return { operation: operation.value, by: by.value, where };
}

/** The OS user and host running the command, e.g. `ops@gateway-1`. */
function defaultActor(): string {
  let user: string;
  try {
    user = userInfo().username;
  } catch {
    user = process.env.USER ?? "unknown";
  }
  return `${user}@${hostname()}`;
}

async function execute({ operation, by, where }: AdminRequest): Promise<AdminOutcome> {
  if ("databaseUrl" in where) return withDatabase(await openDb({ databaseUrl: where.databaseUrl }), (db) => runAdminOperation(db, operation, by));
  const throughNode = await runOnNode(where.dataDir, operation, by);
  if (throughNode !== undefined) return throughNode;
  if (embeddedEngineIn(where.dataDir) === undefined) {
    throw new AdminRefusal(`no database in ${where.dataDir} (no node runs there either: no ${adminSocketPath(where.dataDir)}); pass the data dir of a gateway with --data-dir, or --database-url`);
  }
  return withDatabase(await openDb({ dataDir: where.dataDir }), (db) => runAdminOperation(db, operation, by));
}

/** Runs `work` on `db` brought up to this version's schema (a node of this version would do the same), then closes it. */
async function withDatabase<T>(db: Db, work: (db: Db) => Promise<T>): Promise<T> {
  try {
    // Loaded only here: the service's modules take a second to load, which a node's socket spares.
    const { SERVICE_MIGRATIONS } = await import("../service.ts");
    await migrate(db, SERVICE_MIGRATIONS);
    return await work(db);
  } finally {
    await db.close();
  }
}

function usage(message: string): never {
  console.error(`svc admin: ${message}\n\n${HELP}`);
  process.exit(2);
}
