/**
 * What an operator can ask of `svc admin`, as data: the command line builds one, the admin socket
 * receives one, and both check it here, with the same rules and the same messages. Pure.
 */
import type { ModelApproval } from "../catalog/index.ts";
import { TIERS, type Tier, publicKeyOf } from "../core/index.ts";

export const TOKENIZERS = ["llama3", "qwen", "mistral", "gemma3"] as const;

export type AdminOperation =
  | { action: "keys.suspend"; wallet: string; reason: string }
  | { action: "keys.reinstate"; wallet: string; reason?: string }
  | { action: "workers.suspend"; worker: string; reason: string }
  | { action: "workers.reinstate"; worker: string; reason?: string }
  | { action: "workers.list" }
  | { action: "models.approve"; model: ModelApproval; reason?: string }
  | { action: "models.retire"; id: string; retiresAt: string; reason: string }
  | { action: "models.list" }
  | { action: "log"; limit: number };

export type AdminAction = AdminOperation["action"];

export const ADMIN_ACTIONS: readonly AdminAction[] = ["keys.suspend", "keys.reinstate", "workers.suspend", "workers.reinstate", "workers.list", "models.approve", "models.retire", "models.list", "log"];

export const MAX_REASON_CHARS = 500;
export const MAX_ACTOR_CHARS = 200;
export const MAX_LOG_LIMIT = 1000;
export const DEFAULT_LOG_LIMIT = 20;
/** A worker names a model as `<id>=<engine>`: no spaces, no '='. */
const MODEL_ID = /^[^\s=]{1,200}$/;

export type Checked<T> = { ok: true; value: T } | { ok: false; message: string };

class Invalid extends Error {}

/** `value` as an operation, or what is wrong with it. */
export function checkOperation(value: unknown): Checked<AdminOperation> {
  try {
    return { ok: true, value: operationOf(record(value, "the operation")) };
  } catch (error) {
    if (error instanceof Invalid) return { ok: false, message: error.message };
    throw error;
  }
}

/** Who an action is recorded as taken by, or what is wrong with the name. */
export function checkActor(value: unknown): Checked<string> {
  return typeof value === "string" && value.trim() !== "" && value.length <= MAX_ACTOR_CHARS
    ? { ok: true, value: value.trim() }
    : { ok: false, message: `--by is a name of at most ${MAX_ACTOR_CHARS} characters` };
}

function operationOf(o: Record<string, unknown>): AdminOperation {
  const action = o.action;
  switch (action) {
    case "keys.suspend":
      return { action, wallet: address(o.wallet, "--wallet", "wallet"), reason: reason(o.reason, true)! };
    case "keys.reinstate":
      return { action, wallet: address(o.wallet, "--wallet", "wallet"), ...optionalReason(o.reason) };
    case "workers.suspend":
      return { action, worker: address(o.worker, "--worker", "worker"), reason: reason(o.reason, true)! };
    case "workers.reinstate":
      return { action, worker: address(o.worker, "--worker", "worker"), ...optionalReason(o.reason) };
    case "models.approve":
      return { action, model: approval(record(o.model, "the model")), ...optionalReason(o.reason) };
    case "models.retire":
      return { action, id: modelId(o.id), retiresAt: date(o.retiresAt), reason: reason(o.reason, true)! };
    case "log":
      return { action, limit: whole(o.limit ?? DEFAULT_LOG_LIMIT, "--limit", 1, MAX_LOG_LIMIT) };
    case "workers.list":
    case "models.list":
      return { action };
    default:
      throw new Invalid(`unknown operation '${String(action).slice(0, 40)}'`);
  }
}

function approval(m: Record<string, unknown>): ModelApproval {
  const tier = m.tier;
  if (typeof tier !== "string" || !Object.hasOwn(TIERS, tier)) throw new Invalid(`--tier is one of ${Object.keys(TIERS).join(", ")}`);
  const tokenizer = m.tokenizer;
  if (tokenizer !== undefined && !TOKENIZERS.includes(tokenizer as never)) throw new Invalid(`--tokenizer is one of ${TOKENIZERS.join(", ")}`);
  return {
    id: modelId(m.id),
    ownedBy: text(m.ownedBy, "--owned-by", 100),
    tier: tier as Tier,
    parameters: text(m.parameters, "--parameters", 20),
    contextWindow: whole(m.contextWindow, "--context-window", 1, 10_000_000),
    description: text(m.description, "--description", MAX_REASON_CHARS),
    ...(tokenizer !== undefined ? { tokenizer: tokenizer as (typeof TOKENIZERS)[number] } : {}),
  };
}

function record(value: unknown, what: string): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new Invalid(`${what} is missing`);
  return value as Record<string, unknown>;
}

function text(value: unknown, flag: string, maxChars: number): string {
  if (typeof value !== "string" || value.trim() === "") throw new Invalid(`${flag} is required`);
  if (value.length > maxChars) throw new Invalid(`${flag} is at most ${maxChars} characters`);
  return value.trim();
}

function reason(value: unknown, required: boolean): string | undefined {
  return value === undefined && !required ? undefined : text(value, "--reason", MAX_REASON_CHARS);
}

function optionalReason(value: unknown): { reason?: string } {
  const given = reason(value, false);
  return given === undefined ? {} : { reason: given };
}

function address(value: unknown, flag: string, what: string): string {
  const given = text(value, flag, 64);
  if (publicKeyOf(given) === undefined) throw new Invalid(`${flag} takes a ${what} address (a base58 public key); '${given}' is not one`);
  return given;
}

function modelId(value: unknown): string {
  const id = text(value, "the model id", 200);
  if (!MODEL_ID.test(id)) throw new Invalid(`'${id.slice(0, 60)}' is not a model id (no spaces, no '=')`);
  return id;
}

function whole(value: unknown, flag: string, min: number, max: number): number {
  const n = typeof value === "string" && /^\d{1,12}$/.test(value) ? Number(value) : value;
  if (typeof n !== "number" || !Number.isInteger(n) || n < min || n > max) throw new Invalid(`${flag} is a whole number from ${min} to ${max}`);
  return n;
}

function date(value: unknown): string {
  const given = text(value, "--at", 40);
  const at = /^\d{4}-\d{2}-\d{2}/.test(given) ? new Date(given) : new Date(Number.NaN);
  if (Number.isNaN(at.getTime())) throw new Invalid(`--at takes an ISO 8601 date, e.g. 2027-01-31 or 2027-01-31T12:00:00Z; got '${given}'`);
  return at.toISOString();
}
