/** What the web app's server routes are given. */
import type { RateLimitOptions, Signer } from "../core/index.ts";

export interface WebOptions {
  /** Session lifetime. Default 12 h. */
  sessionTtlMs?: number;
  /** The chain id sign-in messages name. Default `localnet` (the embedded chain). */
  chainId?: string;
  /** `svc dev` only: the dev wallet, which "Use the dev wallet" signs in as, server-side. */
  devWallet?: Signer;
  /**
   * Sign-in nonces one client address may ask for, a token bucket (./nonces.ts): by default 10
   * at once, then 5 a minute; false lifts it.
   */
  nonceRateLimit?: RateLimitOptions | false;
  /** Unused, unexpired sign-in nonces this node keeps at most. Default 10,000. */
  maxOutstandingNonces?: number;
}

/** Sign-in nonces and wallet sessions (./sessions.ts), bound to the service's database. */
export interface SessionStore {
  issueNonce(now: Date): Promise<{ nonce: string; expiresAt: Date }>;
  /** The nonce's expiry, once per live nonce; undefined when it was used or is unknown. */
  useNonce(nonce: string): Promise<Date | undefined>;
  /** Deletes expired nonces. */
  sweepNonces(): Promise<void>;
  openSession(wallet: string, ttlMs: number): Promise<{ token: string; expiresAt: Date }>;
  sessionWallet(token: string): Promise<{ wallet: string; expiresAt: Date } | undefined>;
  closeSession(token: string): Promise<void>;
}

/** Hands out sign-in nonces within their limits (./nonces.ts) and uses them up. */
export interface NonceIssuer {
  /** A fresh nonce for `client` (its IP address); 429 rate_limited past the limits. */
  issue(client: string, now?: Date): Promise<{ nonce: string; expiresAt: Date }>;
  /** Uses the nonce up: its expiry once, undefined when it was used or is unknown. */
  use(nonce: string): Promise<Date | undefined>;
}

/** What the sign-in routes and the session guard are given. */
export interface WebContext {
  /** The app's origin; only known once the server listens. */
  appUrl(): string;
  sessions: SessionStore;
  /** The sign-in nonces this node hands out, within their limits. */
  nonces: NonceIssuer;
  options: WebOptions;
}

export const DEFAULT_CHAIN_ID = "localnet";
