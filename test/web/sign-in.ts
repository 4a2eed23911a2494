/**
 * Signing in to the web app from a test, as the page does: ask for a nonce, build the standard
 * Sign In With Solana message, sign it with a real Ed25519 key, post it; the answer's cookie is
 * the session. Requests carry the app's Origin, as a browser's would.
 */
import type { Signer } from "../../src/core/keys.ts";
import { formatSignInMessage, SESSION_COOKIE, type SignInFields } from "../../src/web/index.ts";

export interface AppCall {
  status: number;
  body: Record<string, any>;
  headers: Headers;
}

/** A call to /app/api; `cookie` is the session (or "" for none). */
export async function appCall(origin: string, cookie: string, method: string, path: string, body?: unknown, extra: Record<string, string> = {}): Promise<AppCall> {
  const res = await fetch(`${origin}/app/api${path}`, {
    method,
    headers: { origin, ...(cookie ? { cookie } : {}), ...(body === undefined ? {} : { "content-type": "application/json" }), ...extra },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, any>, headers: res.headers };
}

export async function signInInput(origin: string): Promise<Omit<SignInFields, "address">> {
  const { body } = await appCall(origin, "", "POST", "/session/nonce");
  const { object: _object, ...input } = body;
  return input as Omit<SignInFields, "address">;
}

/** Posts a signed message; the session cookie ("svc_session=...") when it was accepted. */
export async function postSignIn(origin: string, signer: Signer, message: string): Promise<AppCall & { cookie?: string }> {
  const bytes = new TextEncoder().encode(message);
  const answer = await appCall(origin, "", "POST", "/session", {
    address: signer.address,
    message: Buffer.from(bytes).toString("base64"),
    signature: Buffer.from(signer.sign(bytes)).toString("base64"),
  });
  const set = answer.headers.get("set-cookie") ?? "";
  const cookie = new RegExp(`^${SESSION_COOKIE}=[^;]+`).exec(set)?.[0];
  return { ...answer, ...(cookie ? { cookie } : {}) };
}

/** A session cookie for the signer's wallet. */
export async function signInAs(origin: string, signer: Signer): Promise<string> {
  const message = formatSignInMessage({ ...(await signInInput(origin)), address: signer.address });
  const answer = await postSignIn(origin, signer, message);
  if (!answer.cookie) throw new Error(`sign-in refused: ${JSON.stringify(answer.body)}`);
  return answer.cookie;
}
