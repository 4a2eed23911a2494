/** What the web app's server routes are given. */
import type { Signer } from "../chain/keys.ts";
import type { HttpContext } from "../http/context.ts";

export interface WebOptions {
  /** Session lifetime. Default 12 h. */
  sessionTtlMs?: number;
  /** The chain id sign-in messages name. Default `localnet` (the embedded chain). */
  chainId?: string;
  /** `svc dev` only: the dev wallet, which "Use the dev wallet" signs in as, server-side. */
  devWallet?: Signer;
}

export interface WebContext {
  http: HttpContext;
  options: WebOptions;
}

export const DEFAULT_CHAIN_ID = "localnet";
