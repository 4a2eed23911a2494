/** The audit log: one row per action an operator took with `svc admin`, who took it and why. */
import type { Db } from "../store/index.ts";

export interface AuditEntry {
  /** What was done, e.g. "keys.suspend". */
  action: string;
  /** What it was done to: a wallet, a worker, a model. */
  target: string;
  reason: string | null;
  /** Who did it: `user@host`, or the name given with --by. */
  actor: string;
  at: Date;
}

/** Records an action; call it on the transaction that takes the action. */
export async function recordAction(tx: Db, entry: Omit<AuditEntry, "at">): Promise<void> {
  await tx.query("INSERT INTO admin_actions (action, target, reason, actor) VALUES ($1, $2, $3, $4)", [entry.action, entry.target, entry.reason, entry.actor]);
}

/** The latest `limit` actions, newest first. */
export async function auditLog(db: Db, limit: number): Promise<AuditEntry[]> {
  return db.query<AuditEntry>("SELECT action, target, reason, actor, at FROM admin_actions ORDER BY id DESC LIMIT $1", [limit]);
}
