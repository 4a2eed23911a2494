/**
 * POST /app/api/session/challenge and POST /app/api/session: the web app's wallet sign-in, and
 * the hook that makes every other /app/api route require its session token.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import { createChallenge, decodeSignature, isWalletAddress, openSession, sessionWallet } from "../../events/app-session.ts";
import type { Webhooks } from "../../events/index.ts";
import { ApiError } from "../../core/errors.ts";

function walletOf(body: unknown): string {
  const wallet = typeof body === "object" && body !== null ? (body as Record<string, unknown>).wallet : undefined;
  if (!isWalletAddress(wallet)) throw new ApiError("invalid_request", "wallet is required: a base58 wallet address.", "wallet");
  return wallet;
}

/** `origin`: what the signed message names as the app asking, e.g. `https://app.example`. */
export function registerAppSession(app: FastifyInstance, webhooks: Webhooks, origin: () => string): void {
  app.post("/session/challenge", { config: { public: true } }, async (request) => {
    const challenge = await createChallenge(webhooks.db, walletOf(request.body), origin());
    return { object: "sign_in_challenge", nonce: challenge.nonce, message: challenge.message, expires_at: challenge.expiresAt.toISOString() };
  });

  app.post("/session", { config: { public: true } }, async (request) => {
    const wallet = walletOf(request.body);
    const raw = (request.body as Record<string, unknown>).signature;
    const signature = typeof raw === "string" ? decodeSignature(raw) : undefined;
    if (!signature) throw new ApiError("invalid_request", "signature is required: the wallet's 64-byte Ed25519 signature of the challenge message, base58 or base64.", "signature");
    const nonce = (request.body as Record<string, unknown>).nonce;
    if (nonce !== undefined && typeof nonce !== "string") throw new ApiError("invalid_request", "nonce must be the challenge's nonce.", "nonce");
    const session = await openSession(webhooks.db, wallet, signature, webhooks.sessionTtlMs, nonce);
    if (!session) {
      throw new ApiError("invalid_api_key", "The signature does not sign a live challenge for this wallet. Ask for a new challenge and sign its message.");
    }
    return { object: "session", token: session.token, wallet, expires_at: session.expiresAt.toISOString() };
  });
}

/** Sets request.appWallet from `Authorization: Bearer <session token>`; API keys are refused. */
export async function requireAppSession(webhooks: Webhooks, request: FastifyRequest): Promise<void> {
  const header = request.headers.authorization;
  if (header === undefined || header.trim() === "") {
    throw new ApiError("missing_api_key", "Sign in first: send the session token from POST /app/api/session as 'Authorization: Bearer <token>'.");
  }
  const token = /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1] ?? "";
  const wallet = await sessionWallet(webhooks.db, token);
  if (wallet === undefined) {
    throw new ApiError(
      "invalid_api_key",
      token.startsWith("svc_live_")
        ? "API keys cannot manage account settings; sign in to the web app with the wallet instead."
        : "The session token is unknown or expired; sign in again.",
    );
  }
  request.appWallet = wallet;
}
