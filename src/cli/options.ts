/**
 * Option values the service's start commands (`svc dev`, `svc serve`) read alike: each returns
 * the parsed value or a message saying what is wrong, which the command prints before exiting 2.
 */
import { resolve } from "node:path";
import { LOG_FORMATS, type LogFormat, type RateLimitOptions, defaultLogFormat, parseRateLimit, publicKeyOf } from "../core/index.ts";

export type Parsed<T> = { ok: true; value: T } | { ok: false; message: string };

export function portOption(flag: string, text: string): Parsed<number> {
  const port = Number(text);
  return Number.isInteger(port) && port >= 0 && port <= 65535 ? { ok: true, value: port } : { ok: false, message: `${flag} must be a port number, got '${text}'` };
}

/** --rate-limit, else SVC_RATE_LIMIT, else undefined (the service's default). */
export function rateLimitOption(text: string | undefined): Parsed<RateLimitOptions | false | undefined> {
  const given = text ?? process.env.SVC_RATE_LIMIT;
  try {
    return { ok: true, value: given === undefined ? undefined : parseRateLimit(given) };
  } catch (error) {
    return { ok: false, message: `--rate-limit: ${(error as Error).message}` };
  }
}

/** --log-format, else SVC_LOG_FORMAT or what suits the terminal. */
export function logFormatOption(text: string | undefined): Parsed<LogFormat> {
  const format = text ?? defaultLogFormat();
  return LOG_FORMATS.includes(format as LogFormat) ? { ok: true, value: format as LogFormat } : { ok: false, message: `--log-format is pretty or json, got '${format}'` };
}

/** Where the parts a gateway may share with others are: its chain, the chain's keys, the bus. */
export interface SharedPartsOptions {
  chainUrl?: string;
  keysDir?: string;
  natsUrl?: string;
  priorityFeeMicroLamports?: bigint;
  /** Jobs' escrows are slots of their wallets' escrow tables (`--escrow tables`, the default), or records of their own (`--escrow records`). */
  escrowTables?: boolean;
}

/** The flags `svc dev` and `svc serve` both take for them (parseArgs options). */
export const SHARED_PARTS_FLAGS = {
  "chain-url": { type: "string" },
  "keys-dir": { type: "string" },
  "nats-url": { type: "string" },
  "priority-fee": { type: "string" },
  escrow: { type: "string" },
} as const;

/** The shared parts from their flags, else SVC_CHAIN_URL, SVC_KEYS_DIR, SVC_NATS_URL, SVC_PRIORITY_FEE and SVC_ESCROW; only what is given. */
export function sharedPartsOption(values: { [F in keyof typeof SHARED_PARTS_FLAGS]?: string | undefined }): Parsed<SharedPartsOptions> {
  const env = process.env;
  const chainUrl = values["chain-url"] ?? env.SVC_CHAIN_URL;
  const keysDir = values["keys-dir"] ?? env.SVC_KEYS_DIR;
  const natsUrl = values["nats-url"] ?? env.SVC_NATS_URL;
  const fee = values["priority-fee"] ?? env.SVC_PRIORITY_FEE;
  if (fee && !/^\d{1,12}$/.test(fee)) return { ok: false, message: `--priority-fee is a whole number of micro-lamports per compute unit, got '${fee}'` };
  const escrow = values.escrow ?? env.SVC_ESCROW ?? "tables";
  if (escrow !== "records" && escrow !== "tables") return { ok: false, message: `--escrow is records or tables, got '${escrow.slice(0, 64)}'` };
  return {
    ok: true,
    value: {
      ...(chainUrl ? { chainUrl } : {}),
      ...(keysDir ? { keysDir: resolve(keysDir) } : {}),
      ...(natsUrl ? { natsUrl } : {}),
      ...(fee && BigInt(fee) > 0n ? { priorityFeeMicroLamports: BigInt(fee) } : {}),
      escrowTables: escrow === "tables",
    },
  };
}

/** --seed-workers, else SVC_SEED_WORKERS: worker addresses separated by commas (none by default). */
export function seedPoolOption(text: string | undefined): Parsed<string[]> {
  const addresses = (text ?? process.env.SVC_SEED_WORKERS ?? "").split(",").map((a) => a.trim()).filter((a) => a !== "");
  const bad = addresses.find((a) => publicKeyOf(a) === undefined);
  return bad === undefined ? { ok: true, value: addresses } : { ok: false, message: `--seed-workers takes worker addresses (base58 public keys) separated by commas; '${bad.slice(0, 64)}' is not one` };
}
