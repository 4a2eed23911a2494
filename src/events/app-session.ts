/**
 * The web app's sign-in, reduced to what managing webhooks needs: the app asks for a challenge
 * for a wallet, the wallet signs the challenge's message (Ed25519, as Solana wallets'
 * `signMessage` does), and a valid signature buys a random session token. API keys never work
 * here: a key may spend credits but not change account settings.
 *
 * A challenge is short-lived and opens at most one session. Asking for a new one leaves earlier
 * ones valid, so nobody can cancel a wallet's sign-in by asking for challenges in its name. Only a
 * SHA-256 of a session token is stored.
 */
import { createHash, createPublicKey, randomBytes, verify } from "node:crypto";
import { base58Decode } from "../chain/base58.ts";
import type { Db } from "../store/db.ts";

export const CHALLENGE_TTL_MS = 5 * 60_000;
export const DEFAULT_SESSION_TTL_MS = 12 * 60 * 60_000;
const TOKEN_PREFIX = "svc_sess_";

export function isWalletAddress(value: unknown): value is string {
  if (typeof value !== "string" || value.length < 32 || value.length > 44) return false;
  try {
    base58Decode(value, 32);
    return true;
  } catch {
    return false;
  }
}

/** The text the wallet signs; it names the app's origin so it cannot be replayed elsewhere. */
export function signInMessage(input: { origin: string; wallet: string; nonce: string; issuedAt: Date; expiresAt: Date }): string {
  return [
    `${input.origin} wants you to sign in with your wallet:`,
    input.wallet,
    "",
    "Sign in to manage webhooks and account settings.",
    "",
    `Nonce: ${input.nonce}`,
    `Issued At: ${input.issuedAt.toISOString()}`,
    `Expiration Time: ${input.expiresAt.toISOString()}`,
  ].join("\n");
}

export async function createChallenge(db: Db, wallet: string, origin: string): Promise<{ nonce: string; message: string; expiresAt: Date }> {
  const nonce = randomBytes(16).toString("hex");
  const issuedAt = new Date();
  const expiresAt = new Date(issuedAt.getTime() + CHALLENGE_TTL_MS);
  const message = signInMessage({ origin, wallet, nonce, issuedAt, expiresAt });
  await db.query("DELETE FROM app_challenges WHERE expires_at < now()");
  await db.query("INSERT INTO app_challenges (nonce, wallet, message, expires_at) VALUES ($1, $2, $3, $4)", [nonce, wallet, message, expiresAt]);
  return { nonce, message, expiresAt };
}

/** A 64-byte signature as base58 (what Solana tooling prints) or base64. */
export function decodeSignature(text: string): Uint8Array | undefined {
  try {
    return base58Decode(text, 64);
  } catch {
    const bytes = Buffer.from(text, "base64");
    return bytes.length === 64 && /^[A-Za-z0-9+/]+={0,2}$/.test(text) ? new Uint8Array(bytes) : undefined;
  }
}

export function verifyWalletSignature(wallet: string, message: string, signature: Uint8Array): boolean {
  const publicKey = createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: Buffer.from(base58Decode(wallet, 32)).toString("base64url") }, format: "jwk" });
  return verify(null, Buffer.from(message, "utf8"), publicKey, signature);
}

function hashToken(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

/** How many of a wallet's live challenges a sign-in without a nonce is checked against. */
const CANDIDATES = 20;

/**
 * Opens a session when `signature` signs the message of a live challenge of this wallet (the one
 * named by `nonce`, or any recent one), using that challenge up. Undefined otherwise.
 */
export async function openSession(
  db: Db,
  wallet: string,
  signature: Uint8Array,
  ttlMs: number,
  nonce?: string,
): Promise<{ token: string; expiresAt: Date } | undefined> {
  const candidates = await db.query<{ nonce: string; message: string }>(
    `SELECT nonce, message FROM app_challenges WHERE wallet = $1 AND expires_at > now() AND ($2::text IS NULL OR nonce = $2)
      ORDER BY expires_at DESC LIMIT ${CANDIDATES}`,
    [wallet, nonce ?? null],
  );
  const signed = candidates.find((c) => verifyWalletSignature(wallet, c.message, signature));
  if (!signed) return undefined;
  // The delete decides between two sign-ins racing with one signature.
  const used = await db.query("DELETE FROM app_challenges WHERE nonce = $1 AND expires_at > now() RETURNING nonce", [signed.nonce]);
  if (used.length === 0) return undefined;
  const token = TOKEN_PREFIX + randomBytes(32).toString("base64url");
  const expiresAt = new Date(Date.now() + ttlMs);
  await db.query("INSERT INTO app_sessions (token_hash, wallet, expires_at) VALUES ($1, $2, $3)", [hashToken(token), wallet, expiresAt]);
  return { token, expiresAt };
}

/** The wallet a live session token belongs to. */
export async function sessionWallet(db: Db, token: string): Promise<string | undefined> {
  if (!token.startsWith(TOKEN_PREFIX)) return undefined;
  const [row] = await db.query<{ wallet: string }>("SELECT wallet FROM app_sessions WHERE token_hash = $1 AND expires_at > now()", [hashToken(token)]);
  return row?.wallet;
}
