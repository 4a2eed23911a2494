/** What every JSON-RPC method gets: the chain it serves, and the shape of a response that carries the slot it was read at. */
import type { Address } from "@solana/kit";
import type { Keypair } from "../../core/index.ts";
import type { ChainBackend, EmbeddedChainBackend } from "../backend.ts";
import type { AddressIndex } from "./address-index.ts";
import type { ResponseBudget } from "./limits.ts";
import type { Params } from "./params.ts";

/**
 * What the server needs of the service's chain (the Chain class is one): its backend, the
 * service's USDC mint (the genesis hash names it) and, for the development faucet, minting.
 */
export interface RpcChain {
  readonly backend: ChainBackend;
  readonly mint: Address;
  grantUsdc(input: { to: string; amount: bigint }): Promise<{ signature: string }>;
}

/** Where the server reports what failed inside it (a pino logger is one). */
export interface RpcLogger {
  error(details: object, message: string): void;
  warn(details: object, message: string): void;
}

export interface RpcContext {
  chain: RpcChain;
  backend: EmbeddedChainBackend;
  /** Built on first use: it reads the whole journal. */
  addressIndex(): Promise<AddressIndex>;
  /** Pays dev-only SOL airdrops; undefined when airdrops are off. */
  faucet: Keypair | undefined;
  /** The account data an HTTP request's answers may still carry (none for subscriptions' own reads). */
  budget?: ResponseBudget;
}

export type Method = (ctx: RpcContext, params: Params) => Promise<unknown>;

/** The Solana RPC version whose shapes the server writes. */
export const API_VERSION = "2.2.0";

export async function withContext(ctx: RpcContext, value: unknown): Promise<unknown> {
  return { context: { apiVersion: API_VERSION, slot: await ctx.backend.getSlot() }, value };
}
