/**
 * Sign In With Solana, server side: the rule that decides whether a signed message may open a
 * session. Pure: the nonce's liveness and the session itself are the caller's business.
 */
import { verifyEd25519 } from "../core/index.ts";
import { parseSignInMessage, SIGN_IN_STATEMENT, SIGN_IN_VERSION, type SignInFields } from "./siws-message.ts";
import { NONCE_TTL_MS } from "./sessions.ts";

export { formatSignInMessage, parseSignInMessage, SIGN_IN_STATEMENT, SIGN_IN_VERSION, type SignInFields } from "./siws-message.ts";

/** How far a wallet's clock may run ahead of ours. */
const CLOCK_SKEW_MS = 60_000;

export interface SignInExpectation {
  /** The app's origin, e.g. `https://app.example`: gives the domain and the URI. */
  origin: string;
  chainId: string;
  now: Date;
  /** The longest a message may be valid, issue to expiry: a nonce's lifetime (the default). */
  lifetimeMs?: number;
}

/**
 * Why the signed message cannot open a session, or undefined when it can (the nonce still has to
 * be used up). Every field is checked against what this app asked for.
 */
export function signInRefusal(
  signed: { address: string; message: Uint8Array; signature: Uint8Array },
  expected: SignInExpectation,
): string | undefined {
  const fields = parseSignInMessage(new TextDecoder("utf-8", { fatal: false }).decode(signed.message));
  if (!fields) return "The signed message is not a Sign In With Solana message.";
  const origin = new URL(expected.origin);
  if (fields.domain !== origin.host) return `The message signs in to '${fields.domain}', not to ${origin.host}.`;
  if (fields.address !== signed.address) return "The message names another account than the one that signed it.";
  if (fields.statement !== SIGN_IN_STATEMENT) return "The message's statement is not this app's.";
  if (!sameOrigin(fields.uri, origin)) return `The message's URI is not ${origin.origin}.`;
  if (fields.version !== SIGN_IN_VERSION) return `The message's version is not ${SIGN_IN_VERSION}.`;
  if (fields.chainId !== expected.chainId) return `The message's chain is '${fields.chainId}', not ${expected.chainId}.`;
  const timing = timingRefusal(fields, expected);
  if (timing) return timing;
  if (!verifyEd25519(signed.address, signed.message, signed.signature)) return "The signature does not match the message and account.";
  return undefined;
}

/**
 * A message is valid from its issue to its expiry, which may be no longer than a nonce lives: the
 * nonce stops a late use anyway, but a signature the wallet showed as good "until 2099" would
 * promise more than the app keeps, and a far-future or stale issue time is no app's message.
 */
function timingRefusal(fields: SignInFields, expected: SignInExpectation): string | undefined {
  const now = expected.now.getTime();
  const lifetimeMs = expected.lifetimeMs ?? NONCE_TTL_MS;
  const issuedAt = Date.parse(fields.issuedAt);
  const expiresAt = Date.parse(fields.expirationTime);
  if (Number.isNaN(issuedAt) || Number.isNaN(expiresAt)) return "The message's times are not ISO 8601 dates.";
  if (expiresAt <= now) return "The sign-in message has expired; sign in again.";
  if (issuedAt > now + CLOCK_SKEW_MS) return "The message was issued in the future.";
  if (issuedAt < now - lifetimeMs - CLOCK_SKEW_MS) return `The message was issued more than ${lifetimeMs / 60_000} minutes ago; sign in again.`;
  if (expiresAt <= issuedAt) return "The message expires before it was issued.";
  if (expiresAt - issuedAt > lifetimeMs) return `The message is valid for longer than a sign-in's ${lifetimeMs / 60_000} minutes; sign the message the app gave.`;
  return undefined;
}

function sameOrigin(uri: string, origin: URL): boolean {
  try {
    return new URL(uri).origin === origin.origin;
  } catch {
    return false;
  }
}

/** The signed message's fields: its nonce is checked for liveness and used up by the session store. */
export function signedFields(message: Uint8Array): SignInFields | undefined {
  return parseSignInMessage(new TextDecoder().decode(message));
}
