/** Wallets and their API keys: issue, replace, authenticate. Balances live in the ledger. */
import { ApiError } from "../core/errors.ts";
import type { Db } from "../store/db.ts";
import { generateApiKey, hashApiKey, isWellFormedKey } from "./api-key.ts";

export interface Wallet {
  address: string;
  createdAt: Date;
  lastTopupAt: Date | null;
  creditLowThreshold: number;
}

export interface KeyOwner {
  wallet: string;
  keyCreatedAt: Date;
}

export async function ensureWallet(db: Db, address: string): Promise<void> {
  await db.query("INSERT INTO wallets (address) VALUES ($1) ON CONFLICT (address) DO NOTHING", [address]);
}

export async function getWallet(db: Db, address: string): Promise<Wallet | undefined> {
  const rows = await db.query<{ address: string; created_at: Date; last_topup_at: Date | null; credit_low_threshold: number }>(
    "SELECT address, created_at, last_topup_at, credit_low_threshold FROM wallets WHERE address = $1",
    [address],
  );
  const row = rows[0];
  if (!row) return undefined;
  return { address: row.address, createdAt: row.created_at, lastTopupAt: row.last_topup_at, creditLowThreshold: row.credit_low_threshold };
}

/** Note that the wallet's balance received credits (its first deposit may create the wallet). */
export async function recordTopup(db: Db, address: string, at: Date): Promise<void> {
  await db.query(
    "INSERT INTO wallets (address, last_topup_at) VALUES ($1, $2) ON CONFLICT (address) DO UPDATE SET last_topup_at = EXCLUDED.last_topup_at",
    [address, at],
  );
}

/**
 * Issue a new key for a wallet, revoking the one it had: during beta a wallet has one key, and
 * the old key stops working on the very next request. Returns the full key; it is never stored.
 */
export async function issueApiKey(db: Db, wallet: string): Promise<string> {
  const key = generateApiKey();
  await db.transaction(async (tx) => {
    await ensureWallet(tx, wallet);
    await tx.query("UPDATE api_keys SET revoked_at = now() WHERE wallet = $1 AND revoked_at IS NULL", [wallet]);
    await tx.query("INSERT INTO api_keys (key_hash, wallet) VALUES ($1, $2)", [hashApiKey(key), wallet]);
  });
  return key;
}

/** Whether the wallet was ever issued a key. */
export async function hasApiKey(db: Db, wallet: string): Promise<boolean> {
  const rows = await db.query("SELECT 1 FROM api_keys WHERE wallet = $1 LIMIT 1", [wallet]);
  return rows.length > 0;
}

export async function revokeApiKeys(db: Db, wallet: string): Promise<void> {
  await db.query("UPDATE api_keys SET revoked_at = now() WHERE wallet = $1 AND revoked_at IS NULL", [wallet]);
}

export async function suspendApiKey(db: Db, key: string): Promise<void> {
  await db.query("UPDATE api_keys SET suspended_at = now() WHERE key_hash = $1", [hashApiKey(key)]);
}

/** The wallet behind an `Authorization` header value, or the spec's authentication error. */
export async function authenticate(db: Db, authorization: string | undefined): Promise<KeyOwner> {
  if (authorization === undefined || authorization.trim() === "") {
    throw new ApiError("missing_api_key", "No API key was sent. Send it as 'Authorization: Bearer svc_live_...'.");
  }
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  const key = match?.[1];
  if (key === undefined || !isWellFormedKey(key)) {
    throw new ApiError("invalid_api_key", "The API key is not valid. Keys look like 'svc_live_' followed by 32 letters and digits.");
  }
  // No cache: a revoked key must fail on the next request, on every gateway node.
  const rows = await db.query<{ wallet: string; created_at: Date; revoked_at: Date | null; suspended_at: Date | null }>(
    "SELECT wallet, created_at, revoked_at, suspended_at FROM api_keys WHERE key_hash = $1",
    [hashApiKey(key)],
  );
  const row = rows[0];
  if (!row || row.revoked_at !== null) {
    throw new ApiError("invalid_api_key", "The API key does not exist or was revoked.");
  }
  if (row.suspended_at !== null) {
    throw new ApiError("key_suspended", "This API key was suspended after a policy violation.");
  }
  return { wallet: row.wallet, keyCreatedAt: row.created_at };
}
