/**
 * The operator's actions, each a function of a Db: the same code runs in `svc admin` on a
 * database it opened and in a running node behind its admin socket. Every action that changes
 * something writes its audit row in its own transaction; one that cannot be taken (a wallet with
 * no key, a worker not suspended) throws AdminRefusal and leaves nothing.
 */
import { reinstateWalletKey, suspendWalletKey } from "../accounts/index.ts";
import { approveModel, listGovernedModels, retireModel } from "../catalog/index.ts";
import { listWorkerSuspensions, reinstateWorker, suspendWorker } from "../network/index.ts";
import { type Db, sqlState } from "../store/index.ts";
import { auditLog, recordAction } from "./audit.ts";
import type { AdminOperation } from "./operation.ts";

/** An action that cannot be taken as asked; its message says why. */
export class AdminRefusal extends Error {
  override readonly name = "AdminRefusal";
}

/** What the node an operation runs on can tell about itself (the embedded case: through its socket). */
export interface NodeView {
  /** Workers connected now and sold or on probation, with their vetting. */
  connectedWorkers(): { address: string; vetting: string }[];
  /** Suspended workers that are connected still. */
  suspendedConnected(): string[];
}

/** What to print. */
export interface AdminOutcome {
  lines: string[];
}

/** Runs `operation` on `db` as `actor`; `node`, when it runs inside one, adds what only that node knows. */
export async function runAdminOperation(db: Db, operation: AdminOperation, actor: string, node?: NodeView): Promise<AdminOutcome> {
  switch (operation.action) {
    case "keys.suspend":
    case "keys.reinstate":
      return changeKey(db, operation, actor);
    case "workers.suspend":
    case "workers.reinstate":
      return changeWorker(db, operation, actor);
    case "workers.list":
      return listWorkers(db, node);
    case "models.approve":
    case "models.retire":
      return changeModel(db, operation, actor);
    case "models.list":
      return listModels(db);
    case "log":
      return log(db, operation.limit);
  }
}

async function changeKey(db: Db, op: Extract<AdminOperation, { action: "keys.suspend" | "keys.reinstate" }>, actor: string): Promise<AdminOutcome> {
  const suspending = op.action === "keys.suspend";
  return db.transaction(async (tx) => {
    const result = suspending ? await suspendWalletKey(tx, op.wallet) : await reinstateWalletKey(tx, op.wallet);
    if (result === undefined) throw new AdminRefusal(`no API key for wallet ${op.wallet}`);
    if (!result.changed) {
      throw new AdminRefusal(suspending ? `the API key of wallet ${op.wallet} is suspended already (since ${iso(result.key.suspendedAt!)})` : `the API key of wallet ${op.wallet} is not suspended`);
    }
    await recordAction(tx, { action: op.action, target: op.wallet, reason: op.reason ?? null, actor });
    return { lines: [suspending ? `Suspended the API key of wallet ${op.wallet}: every request with it is refused (403 key_suspended).` : `Reinstated the API key of wallet ${op.wallet}.`] };
  });
}

async function changeWorker(db: Db, op: Extract<AdminOperation, { action: "workers.suspend" | "workers.reinstate" }>, actor: string): Promise<AdminOutcome> {
  return db.transaction(async (tx) => {
    if (op.action === "workers.suspend") {
      const { suspension, created } = await suspendWorker(tx, op.worker, op.reason);
      if (!created) throw new AdminRefusal(`worker ${op.worker} is suspended already (since ${iso(suspension.suspendedAt)}: ${suspension.reason})`);
    } else if ((await reinstateWorker(tx, op.worker)) === undefined) {
      throw new AdminRefusal(`worker ${op.worker} is not suspended`);
    }
    await recordAction(tx, { action: op.action, target: op.worker, reason: op.reason ?? null, actor });
    return { lines: [op.action === "workers.suspend" ? `Suspended worker ${op.worker}: it gets no jobs on any node.` : `Reinstated worker ${op.worker}.`] };
  });
}

async function listWorkers(db: Db, node: NodeView | undefined): Promise<AdminOutcome> {
  const suspensions = await listWorkerSuspensions(db);
  const lines = suspensions.length === 0 ? ["No worker is suspended."] : ["Suspended workers:", ...suspensions.map((s) => `  ${s.address}  since ${iso(s.suspendedAt)}  ${s.reason}`)];
  if (node === undefined) return { lines };
  const connected = node.connectedWorkers();
  const parked = node.suspendedConnected();
  lines.push("", connected.length === 0 ? "No worker is connected to this node." : "Connected to this node:", ...connected.map((w) => `  ${w.address}  ${w.vetting}`));
  if (parked.length > 0) lines.push("Connected to this node and suspended:", ...parked.map((address) => `  ${address}`));
  return { lines };
}

/** Model governance is the catalog part's; this records who did what. */
async function changeModel(db: Db, op: Extract<AdminOperation, { action: "models.approve" | "models.retire" }>, actor: string): Promise<AdminOutcome> {
  return db.transaction(async (tx) => {
    if (op.action === "models.approve") {
      await catalogSays(() => approveModel(tx, op.model));
      await recordAction(tx, { action: op.action, target: op.model.id, reason: op.reason ?? null, actor });
      return { lines: [`Approved model ${op.model.id} (${op.model.tier}, ${op.model.parameters}, context window ${op.model.contextWindow}).`] };
    }
    await catalogSays(() => retireModel(tx, op.id, new Date(op.retiresAt), op.reason));
    await recordAction(tx, { action: op.action, target: op.id, reason: op.reason, actor });
    return { lines: [`Model ${op.id} retires at ${op.retiresAt}.`] };
  });
}

/** The catalog refuses in words (a model not approved, a field it cannot serve); a database error is no refusal. */
async function catalogSays(change: () => Promise<void>): Promise<void> {
  try {
    await change();
  } catch (error) {
    if (error instanceof Error && sqlState(error) === undefined) throw new AdminRefusal(error.message);
    throw error;
  }
}

async function listModels(db: Db): Promise<AdminOutcome> {
  const models = await listGovernedModels(db);
  if (models.length === 0) return { lines: ["No model is approved."] };
  return {
    lines: models.map((m) => {
      const retiring = m.retiresAt === null ? "" : `  retires ${iso(m.retiresAt)}${m.retirementReason ? `: ${m.retirementReason}` : ""}`;
      return `${m.id}  ${m.tier}  ${m.parameters}  ctx ${m.contextWindow}  approved ${iso(m.approvedAt)}${retiring}`;
    }),
  };
}

async function log(db: Db, limit: number): Promise<AdminOutcome> {
  const entries = await auditLog(db, limit);
  if (entries.length === 0) return { lines: ["No admin action yet."] };
  return { lines: entries.map((e) => `${iso(e.at)}  ${e.actor}  ${e.action}  ${e.target}${e.reason ? `  reason: ${e.reason}` : ""}`) };
}

function iso(at: Date): string {
  return at.toISOString();
}
