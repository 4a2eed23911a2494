/** What every JSON-RPC method gets: the chain it serves, and the shape of a response that carries the slot it was read at. */
import type { Chain } from "../chain.ts";
import type { Keypair } from "../../core/index.ts";
import type { EmbeddedChainBackend } from "../backend.ts";
import type { AddressIndex } from "./address-index.ts";
import type { Params } from "./params.ts";

export interface RpcContext {
  chain: Chain;
  backend: EmbeddedChainBackend;
  /** Built on first use: it reads the whole journal. */
  addressIndex(): Promise<AddressIndex>;
  /** Pays dev-only SOL airdrops; undefined when airdrops are off. */
  faucet: Keypair | undefined;
}

export type Method = (ctx: RpcContext, params: Params) => Promise<unknown>;

/** The Solana RPC version whose shapes the server writes. */
export const API_VERSION = "2.2.0";

export async function withContext(ctx: RpcContext, value: unknown): Promise<unknown> {
  return { context: { apiVersion: API_VERSION, slot: await ctx.backend.getSlot() }, value };
}
