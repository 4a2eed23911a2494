/**
 * Sign-in and the session guard of /app/api. The page asks for a nonce, has the wallet sign the
 * standard Sign In With Solana message and posts it; a valid one sets an HttpOnly, SameSite=Strict
 * session cookie scoped to /app/api (so it is never even sent to /v1). API keys never open these
 * routes, and a request that changes anything must come from the app's own origin.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { ApiError, base58Decode } from "../core/index.ts";
import { DEFAULT_CHAIN_ID, type WebContext } from "./context.ts";
import { ERROR_RESPONSES, maybe, object, str } from "../http/index.ts";
import { DEFAULT_SESSION_TTL_MS } from "./sessions.ts";
import { formatSignInMessage, SIGN_IN_STATEMENT, SIGN_IN_VERSION, signedFields, signInRefusal, type SignInFields } from "./siws.ts";

export const SESSION_COOKIE = "svc_session";
const COOKIE_PATH = "/app/api";
const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

export function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? "").split(";")) {
    const [key, ...value] = part.trim().split("=");
    if (key === name) return value.join("=");
  }
  return undefined;
}

/** Bytes sent as base64 (what the page sends) or base58 (what Solana tools print). */
function decodeBytes(value: unknown, field: string): Uint8Array {
  if (typeof value === "string" && value !== "") {
    if (/^[A-Za-z0-9+/]+={0,2}$/.test(value) && value.length % 4 === 0) return new Uint8Array(Buffer.from(value, "base64"));
    try {
      return base58Decode(value);
    } catch {
      /* neither: refused below */
    }
  }
  throw new ApiError("invalid_request", `${field} is required: base64 bytes.`, field);
}

/** Origin checks, then the session cookie; sets request.appWallet. */
export function guardAppRequests(app: FastifyInstance, web: WebContext): void {
  app.addHook("preHandler", async (request) => {
    if (!SAFE_METHODS.has(request.method)) checkOrigin(request, web.appUrl());
    if ((request.routeOptions.config as { public?: boolean } | undefined)?.public) return;
    const token = cookieValue(request.headers.cookie, SESSION_COOKIE);
    const session = token ? await web.sessions.sessionWallet(token) : undefined;
    if (session) {
      request.appWallet = session.wallet;
      return;
    }
    if (token) throw new ApiError("invalid_api_key", "The session has expired or was signed out; sign in again.");
    if (request.headers.authorization) {
      throw new ApiError("invalid_api_key", "API keys cannot open the app's routes; sign in with the wallet instead.");
    }
    throw new ApiError("missing_api_key", "Sign in with your wallet first.");
  });
}

function checkOrigin(request: FastifyRequest, appUrl: string): void {
  const origin = request.headers.origin;
  if (origin !== new URL(appUrl).origin) {
    throw new ApiError("invalid_request", `This request must come from the app at ${new URL(appUrl).origin}, not from ${origin ?? "an unnamed origin"}.`, "origin");
  }
}

function setSessionCookie(reply: FastifyReply, appUrl: string, token: string, expiresAt: Date): void {
  const secure = new URL(appUrl).protocol === "https:" ? "; Secure" : "";
  const maxAge = Math.max(0, Math.floor((expiresAt.getTime() - Date.now()) / 1000));
  reply.header("set-cookie", `${SESSION_COOKIE}=${token}; Path=${COOKIE_PATH}; Max-Age=${maxAge}; HttpOnly; SameSite=Strict${secure}`);
}

/**
 * The Sign In With Solana input for a fresh nonce (what `solana:signIn` is given). `client`, the
 * asker's address, is held to the nonce limits (./nonces.ts).
 */
async function signInInput(web: WebContext, client: string): Promise<Omit<SignInFields, "address">> {
  const origin = new URL(web.appUrl());
  const now = new Date();
  const { nonce, expiresAt } = await web.nonces.issue(client, now);
  return {
    domain: origin.host,
    statement: SIGN_IN_STATEMENT,
    uri: `${origin.origin}/`,
    version: SIGN_IN_VERSION,
    chainId: web.options.chainId ?? DEFAULT_CHAIN_ID,
    nonce,
    issuedAt: now.toISOString(),
    expirationTime: expiresAt.toISOString(),
  };
}

async function signIn(web: WebContext, reply: FastifyReply, signed: { address: string; message: Uint8Array; signature: Uint8Array }) {
  const refusal = signInRefusal(signed, { origin: web.appUrl(), chainId: web.options.chainId ?? DEFAULT_CHAIN_ID, now: new Date() });
  if (refusal) throw new ApiError("invalid_api_key", refusal);
  const fields = signedFields(signed.message)!;
  const nonceExpiry = await web.nonces.use(fields.nonce);
  if (!nonceExpiry) throw new ApiError("invalid_api_key", "This sign-in message was already used or its nonce is unknown; sign in again.");
  // The message may not outlive the nonce it names: a signature valid "until 2099" is refused even though the nonce would stop it.
  if (Date.parse(fields.expirationTime) > nonceExpiry.getTime()) {
    throw new ApiError("invalid_api_key", `The message's expiration time is later than its nonce's (${nonceExpiry.toISOString()}); sign the message the app gave.`);
  }
  const session = await web.sessions.openSession(signed.address, web.options.sessionTtlMs ?? DEFAULT_SESSION_TTL_MS);
  setSessionCookie(reply, web.appUrl(), session.token, session.expiresAt);
  return { object: "session", wallet: signed.address, expires_at: session.expiresAt.toISOString() };
}

const bytes = { type: "string", description: "base64 bytes (base58 is accepted too)" };
const signInBody = {
  type: "object",
  required: ["address", "message", "signature"],
  properties: { address: { type: "string", description: "the signing wallet's address" }, message: bytes, signature: bytes },
};

const response = (body: unknown) => ({ response: { 200: body, ...ERROR_RESPONSES } });
const appConfig = object({ object: { const: "app_config" }, dev_wallet: maybe("string"), chain_id: str });
const signInInputBody = object({
  object: { const: "sign_in_input" },
  domain: str,
  statement: str,
  uri: str,
  version: str,
  chainId: str,
  nonce: str,
  issuedAt: str,
  expirationTime: str,
});
const session = object({ object: { const: "session" }, wallet: str, expires_at: str }, ["object", "wallet"]);
const sessionClosed = object({ object: { const: "session" }, wallet: str, deleted: { const: true } });

export async function sessionRoutes(app: FastifyInstance, web: WebContext): Promise<void> {
  const open = { config: { public: true } };
  app.get("/config", { ...open, schema: response(appConfig) }, async () => ({ object: "app_config", dev_wallet: web.options.devWallet?.address ?? null, chain_id: web.options.chainId ?? DEFAULT_CHAIN_ID }));

  app.post("/session/nonce", { ...open, schema: response(signInInputBody) }, async (request) => ({ object: "sign_in_input", ...(await signInInput(web, request.ip)) }));

  app.post("/session", { ...open, schema: { body: signInBody, ...response(session) } }, async (request, reply) => {
    const body = request.body as { address: string; message: string; signature: string };
    return signIn(web, reply, { address: body.address, message: decodeBytes(body.message, "message"), signature: decodeBytes(body.signature, "signature") });
  });

  // Development only: sign in as the dev wallet without an extension, through the same checks.
  // Its nonce counts against the same limits: each sign-in also keeps a session row for hours.
  app.post("/session/dev", { ...open, schema: response(session) }, async (request, reply) => {
    const dev = web.options.devWallet;
    if (!dev) throw new ApiError("not_found", "The dev wallet is only offered by 'svc dev'.");
    const message = new TextEncoder().encode(formatSignInMessage({ ...(await signInInput(web, request.ip)), address: dev.address }));
    return signIn(web, reply, { address: dev.address, message, signature: dev.sign(message) });
  });

  app.get("/session", { schema: response(session) }, async (request) => ({ object: "session", wallet: request.appWallet }));

  app.delete("/session", { schema: response(sessionClosed) }, async (request, reply) => {
    const token = cookieValue(request.headers.cookie, SESSION_COOKIE);
    if (token) await web.sessions.closeSession(token);
    reply.header("set-cookie", `${SESSION_COOKIE}=; Path=${COOKIE_PATH}; Max-Age=0; HttpOnly; SameSite=Strict`);
    return { object: "session", wallet: request.appWallet, deleted: true };
  });
}
