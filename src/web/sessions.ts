/**
 * Sign-in nonces and wallet sessions in the database. A nonce is single-use: the DELETE that
 * uses it up decides between two sign-ins racing with the same signed message. A session is a
 * random token sent as an HttpOnly cookie; only its hash is kept.
 */
import { createHash, randomBytes } from "node:crypto";
import type { Db } from "../store/index.ts";

export const NONCE_TTL_MS = 10 * 60_000;
export const DEFAULT_SESSION_TTL_MS = 12 * 60 * 60_000;

function hashToken(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

export async function issueNonce(db: Db, now = new Date()): Promise<{ nonce: string; expiresAt: Date }> {
  const nonce = randomBytes(16).toString("hex");
  const expiresAt = new Date(now.getTime() + NONCE_TTL_MS);
  await db.query("INSERT INTO web_sign_in_nonces (nonce, expires_at) VALUES ($1, $2)", [nonce, expiresAt]);
  return { nonce, expiresAt };
}

/** Expired nonces can never be used; the caller decides how often they are deleted (./nonces.ts). */
export async function sweepNonces(db: Db): Promise<void> {
  await db.query("DELETE FROM web_sign_in_nonces WHERE expires_at < now()");
}

/** The nonce's expiry, once per live nonce: a replayed or unknown nonce is undefined. */
export async function useNonce(db: Db, nonce: string): Promise<Date | undefined> {
  const [used] = await db.query<{ expires_at: Date }>("DELETE FROM web_sign_in_nonces WHERE nonce = $1 AND expires_at > now() RETURNING expires_at", [nonce]);
  return used ? new Date(used.expires_at) : undefined;
}

export async function openSession(db: Db, wallet: string, ttlMs: number): Promise<{ token: string; expiresAt: Date }> {
  const token = randomBytes(32).toString("base64url");
  const expiresAt = new Date(Date.now() + ttlMs);
  await db.query("DELETE FROM web_sessions WHERE expires_at < now()");
  await db.query("INSERT INTO web_sessions (token_hash, wallet, expires_at) VALUES ($1, $2, $3)", [hashToken(token), wallet, expiresAt]);
  return { token, expiresAt };
}

export async function sessionWallet(db: Db, token: string): Promise<{ wallet: string; expiresAt: Date } | undefined> {
  const [row] = await db.query<{ wallet: string; expires_at: Date }>(
    "SELECT wallet, expires_at FROM web_sessions WHERE token_hash = $1 AND expires_at > now()",
    [hashToken(token)],
  );
  return row ? { wallet: row.wallet, expiresAt: row.expires_at } : undefined;
}

export async function closeSession(db: Db, token: string): Promise<void> {
  await db.query("DELETE FROM web_sessions WHERE token_hash = $1", [hashToken(token)]);
}
