/** What the web app's server routes are given. */
import type { Signer } from "../core/index.ts";

export interface WebOptions {
  /** Session lifetime. Default 12 h. */
  sessionTtlMs?: number;
  /** The chain id sign-in messages name. Default `localnet` (the embedded chain). */
  chainId?: string;
  /** `svc dev` only: the dev wallet, which "Use the dev wallet" signs in as, server-side. */
  devWallet?: Signer;
}

/** Sign-in nonces and wallet sessions (./sessions.ts), bound to the service's database. */
export interface SessionStore {
  issueNonce(now: Date): Promise<{ nonce: string; expiresAt: Date }>;
  useNonce(nonce: string): Promise<boolean>;
  openSession(wallet: string, ttlMs: number): Promise<{ token: string; expiresAt: Date }>;
  sessionWallet(token: string): Promise<{ wallet: string; expiresAt: Date } | undefined>;
  closeSession(token: string): Promise<void>;
}

/** What the sign-in routes and the session guard are given. */
export interface WebContext {
  /** The app's origin; only known once the server listens. */
  appUrl(): string;
  sessions: SessionStore;
  options: WebOptions;
}

export const DEFAULT_CHAIN_ID = "localnet";
