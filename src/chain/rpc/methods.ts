/**
 * The JSON-RPC methods over the embedded chain. Everything the chain holds is final (each change
 * is on disk before it is acknowledged), so every commitment level sees the same state and
 * signature statuses say `finalized`.
 */
import { createHash, randomBytes } from "node:crypto";
import type { Address } from "@solana/kit";
import { TOKEN_PROGRAM, addressBytes } from "../addresses.ts";
import { MAX_ACCOUNTS_PER_REQUEST, type AccountInfo } from "../backend.ts";
import { type Keypair, base58Encode } from "../../core/index.ts";
import * as ix from "../instructions.ts";
import { LAMPORTS_PER_SIGNATURE, transactionFee } from "../tx-meta.ts";
import { buildTransaction, parseTransaction } from "../wire.ts";
import { API_VERSION, withContext, type Method, type RpcContext } from "./context.ts";
import {
  accountBytes,
  checkAccountEncoding,
  encodeAccount,
  isTokenAccount,
  mintDecimals,
  tokenAccountFields,
  outcomeError,
  uiTokenAmount,
  type AccountEncoding,
} from "./encoding.ts";
import { METHOD_NOT_FOUND, RpcError, invalidParams } from "./errors.ts";
import * as p from "./params.ts";
import { sendTransaction, simulateTransaction } from "./send.ts";
import { checkTransactionEncoding, encodeTransaction, type TransactionConfig } from "./transactions.ts";

export const SLOTS_PER_EPOCH = 432_000n;
const MAX_SIGNATURE_STATUSES = 256;
const MAX_SIGNATURES_FOR_ADDRESS = 1000;

async function accountsView(ctx: RpcContext, accounts: (AccountInfo | null)[], config: AccountEncoding): Promise<unknown[]> {
  checkAccountEncoding(config);
  ctx.budget?.take(accounts.reduce((sum, a) => sum + (a ? accountBytes(a, config).length : 0), 0));
  // Mint decimals for jsonParsed token amounts, read once per call.
  const mints = new Map<string, number>();
  for (const a of accounts) {
    if (a && isTokenAccount(a) && config.encoding === "jsonParsed") {
      const mint = tokenAccountFields(a.data).mint;
      if (!mints.has(mint)) mints.set(mint, mintDecimals(await ctx.backend.getAccount(mint as Address)) ?? 0);
    }
  }
  return accounts.map((a) => (a ? encodeAccount(a, config, (mint) => mints.get(mint) ?? 0) : null));
}

const accountMethods: Record<string, Method> = {
  async getAccountInfo(ctx, params) {
    const account = await ctx.backend.getAccount(p.address(params, 0));
    return withContext(ctx, (await accountsView(ctx, [account], p.config<AccountEncoding>(params, 1)))[0]);
  },
  async getMultipleAccounts(ctx, params) {
    const addresses = p.addressList(params, 0, MAX_ACCOUNTS_PER_REQUEST);
    // Each account is read from the chain once, however often the list names it.
    const unique = [...new Set(addresses)];
    const found = new Map((await ctx.backend.getAccounts(unique)).map((account, i) => [unique[i]!, account]));
    return withContext(ctx, await accountsView(ctx, addresses.map((a) => found.get(a) ?? null), p.config<AccountEncoding>(params, 1)));
  },
  async getBalance(ctx, params) {
    const account = await ctx.backend.getAccount(p.address(params, 0));
    return withContext(ctx, account?.lamports ?? 0n);
  },
  async getTokenAccountBalance(ctx, params) {
    const account = await ctx.backend.getAccount(p.address(params, 0));
    if (!account || !isTokenAccount(account)) throw invalidParams("not a Token account");
    const { mint, amount } = tokenAccountFields(account.data);
    const decimals = mintDecimals(await ctx.backend.getAccount(mint as Address)) ?? 0;
    return withContext(ctx, uiTokenAmount(amount, decimals));
  },
  async getTokenAccountsByOwner(ctx, params) {
    const owner = p.address(params, 0, "owner");
    const filter = p.config<{ mint: string; programId: string }>(params, 1);
    if ((filter.mint === undefined) === (filter.programId === undefined)) throw invalidParams("give exactly one of mint or programId");
    if (filter.programId !== undefined && p.address([filter.programId], 0, "programId") !== TOKEN_PROGRAM) {
      throw invalidParams(`unrecognized token program: ${filter.programId}`);
    }
    const mint = filter.mint === undefined ? undefined : p.address([filter.mint], 0, "mint");
    const owned = (await ctx.backend.programAccounts(TOKEN_PROGRAM)).filter((a) => {
      if (!isTokenAccount(a)) return false;
      const fields = tokenAccountFields(a.data);
      return fields.owner === owner && (mint === undefined || fields.mint === mint);
    });
    const views = await accountsView(ctx, owned, p.config<AccountEncoding>(params, 2));
    return withContext(ctx, owned.map((a, i) => ({ pubkey: a.address, account: views[i] })));
  },
  async getMinimumBalanceForRentExemption(ctx, params) {
    const space = params[0] === undefined ? 0n : p.u64(params, 0, "data length");
    return ctx.backend.minimumBalanceForRentExemption(Number(space));
  },
};

const transactionMethods: Record<string, Method> = {
  async getTransaction(ctx, params) {
    const config = p.config<TransactionConfig>(params, 1);
    checkTransactionEncoding(config);
    const stored = await ctx.backend.getTransaction(p.signature(params[0]));
    if (!stored) return null;
    return encodeTransaction({ kind: "tx", ...stored }, config);
  },
  async getSignatureStatuses(ctx, params) {
    const list = params[0];
    if (!Array.isArray(list)) throw invalidParams("expected an array of signatures");
    if (list.length > MAX_SIGNATURE_STATUSES) throw invalidParams(`too many signatures: ${list.length} > ${MAX_SIGNATURE_STATUSES}`);
    const statuses = await Promise.all(list.map((s) => ctx.backend.getTransactionStatus(p.signature(s))));
    return withContext(
      ctx,
      statuses.map((s) => {
        if (!s) return null;
        const err = outcomeError(s);
        return { slot: s.slot, confirmations: null, err, status: s.ok ? { Ok: null } : { Err: err }, confirmationStatus: "finalized" };
      }),
    );
  },
  async getSignaturesForAddress(ctx, params) {
    const target = p.address(params, 0);
    const config = p.config<{ limit: number; before: string; until: string }>(params, 1);
    const limit = config.limit ?? MAX_SIGNATURES_FOR_ADDRESS;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_SIGNATURES_FOR_ADDRESS) throw invalidParams(`limit must be 1-${MAX_SIGNATURES_FOR_ADDRESS}`);
    const query = { limit, ...(config.before ? { before: p.signature(config.before) } : {}), ...(config.until ? { until: p.signature(config.until) } : {}) };
    return (await ctx.addressIndex()).signaturesFor(target, query);
  },
  sendTransaction,
  simulateTransaction,
  async getFeeForMessage(ctx, params) {
    const bytes = p.encodedBytes(params[0], "base64", "message");
    let tx: ReturnType<typeof parseTransaction>;
    try {
      // A message is a transaction without its signature list: prefix an empty one.
      tx = parseTransaction(new Uint8Array([0, ...bytes]));
    } catch {
      throw invalidParams("not a transaction message");
    }
    return withContext(ctx, (await ctx.backend.isBlockhashValid(tx.blockhash)) ? transactionFee(tx) : null);
  },
};

const clusterMethods: Record<string, Method> = {
  async getLatestBlockhash(ctx) {
    const { blockhash, lastValidBlockHeight } = await ctx.backend.latestBlockhash();
    return withContext(ctx, { blockhash, lastValidBlockHeight });
  },
  async isBlockhashValid(ctx, params) {
    return withContext(ctx, await ctx.backend.isBlockhashValid(p.blockhashBytes(params, 0)));
  },
  // Every slot has a block on this chain, so heights equal slots.
  getSlot: (ctx) => ctx.backend.getSlot(),
  getBlockHeight: (ctx) => ctx.backend.getBlockHeight(),
  async getEpochInfo(ctx) {
    const slot = await ctx.backend.getSlot();
    return { absoluteSlot: slot, blockHeight: slot, epoch: slot / SLOTS_PER_EPOCH, slotIndex: slot % SLOTS_PER_EPOCH, slotsInEpoch: SLOTS_PER_EPOCH, transactionCount: null };
  },
  getVersion: async () => ({ "solana-core": API_VERSION, "feature-set": 0 }),
  getHealth: async () => "ok",
  async getGenesisHash(ctx) {
    // Stable for a data dir (its mint key is), different between chains.
    return base58Encode(createHash("sha256").update("svc embedded chain").update(addressBytes(ctx.chain.mint)).digest());
  },
  async requestAirdrop(ctx, params) {
    if (!ctx.faucet) throw new RpcError(METHOD_NOT_FOUND, "requestAirdrop is available on development chains only");
    return airdropSol(ctx, ctx.faucet, p.address(params, 0), p.u64(params, 1, "lamports"));
  },
  async requestUsdcAirdrop(ctx, params) {
    if (!ctx.faucet) throw new RpcError(METHOD_NOT_FOUND, "requestUsdcAirdrop is available on development chains only");
    const amount = p.u64(params, 1, "amount");
    if (amount === 0n) throw invalidParams("amount must be positive");
    return (await ctx.chain.grantUsdc({ to: p.address(params, 0), amount })).signature;
  },
};

/**
 * A real transfer from a faucet key (funded by the chain's own airdrop just before), so the
 * airdrop has a signature that statuses, history and subscriptions know.
 */
async function airdropSol(ctx: RpcContext, faucet: Keypair, to: Address, lamports: bigint): Promise<string> {
  if (lamports === 0n) throw invalidParams("lamports must be positive");
  await ctx.backend.requestAirdrop(faucet.address, lamports + LAMPORTS_PER_SIGNATURE);
  const { bytes } = await ctx.backend.latestBlockhash();
  // The nonce keeps two equal airdrops in one slot distinct transactions.
  const nonce = base58Encode(randomBytes(8));
  const instructions = [ix.systemTransfer({ from: faucet.address, to, lamports }), ix.memo(`svc:airdrop ${nonce}`)];
  const { signature, wire } = buildTransaction(faucet, instructions, bytes, []);
  await ctx.backend.sendTransaction(wire);
  return signature;
}

const METHODS: Record<string, Method> = { ...accountMethods, ...transactionMethods, ...clusterMethods };

export function methodNamed(name: string): Method | undefined {
  return Object.hasOwn(METHODS, name) ? METHODS[name] : undefined;
}
