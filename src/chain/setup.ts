/**
 * The service's own keys and accounts on the chain. Keys are files in the data dir; each on-chain
 * piece is created only when the chain lacks it, so opening is idempotent and a crash during
 * setup is finished by the next open.
 */
import { type Address, createNoopSigner } from "@solana/kit";
import { getCreateAccountInstruction } from "@solana-program/system";
import { getInitializeMint2Instruction } from "@solana-program/token";
import { type Keypair, type Logger, NATIVE_DECIMALS, USDC_DECIMALS, generateKeypair, loadOrCreateKeypair } from "../core/index.ts";
import { MINT_SIZE, TOKEN_PROGRAM, type AssociatedTokenAddresses } from "./addresses.ts";
import type { ChainBackend } from "./backend.ts";
import { DEFAULT_RULES, ESCROW_PROGRAM, configAddress, decodeConfig, escrowInstructions, type EscrowRules } from "./escrow-program/index.ts";
import { createAssociatedTokenIdempotent } from "./instructions.ts";
import { buildTransaction } from "./wire.ts";

export interface ServiceKeys {
  /** Pays every fee and every rent deposit. */
  feePayer: Keypair;
  /** The USDC-style mint's own address (its key signs only the mint's creation). */
  mint: Keypair;
  mintAuthority: Keypair;
  /**
   * The escrow program's service authority: it signs locks, settlements and refunds, and nothing
   * else can move a vault's credits but the wallet's own withdrawal. Its file keeps the name
   * `custody` from before the program held the credits, so existing data dirs keep their key.
   */
  custody: Keypair;
  /** Owns the protocol treasury's token account. */
  treasury: Keypair;
  /** The network's native token, which workers stake. */
  nativeMint: Keypair;
  nativeMintAuthority: Keypair;
}

const KEY_NAMES = ["fee-payer", "mint", "mint-authority", "custody", "treasury", "native-mint", "native-mint-authority"] as const;

export async function loadServiceKeys(dir: string | undefined): Promise<ServiceKeys> {
  const [feePayer, mint, mintAuthority, custody, treasury, nativeMint, nativeMintAuthority] = await Promise.all(
    KEY_NAMES.map((name) => (dir === undefined ? Promise.resolve(generateKeypair()) : loadOrCreateKeypair(dir, name))),
  );
  return {
    feePayer: feePayer!,
    mint: mint!,
    mintAuthority: mintAuthority!,
    custody: custody!,
    treasury: treasury!,
    nativeMint: nativeMint!,
    nativeMintAuthority: nativeMintAuthority!,
  };
}

/** Create a mint unless the chain has it. */
async function ensureMint(backend: ChainBackend, feePayer: Keypair, mint: Keypair, decimals: number, authority: Address): Promise<void> {
  if (await backend.getAccount(mint.address)) return;
  const { bytes } = await backend.latestBlockhash();
  const rent = await backend.minimumBalanceForRentExemption(MINT_SIZE);
  const tx = buildTransaction(
    feePayer,
    [
      getCreateAccountInstruction({
        payer: createNoopSigner(feePayer.address),
        newAccount: createNoopSigner(mint.address),
        lamports: rent,
        space: MINT_SIZE,
        programAddress: TOKEN_PROGRAM,
      }),
      getInitializeMint2Instruction({ mint: mint.address, decimals, mintAuthority: authority }),
    ],
    bytes,
    [mint],
  );
  await backend.sendTransaction(tx.wire);
}

const LAMPORTS_PER_SOL = 1_000_000_000n;
/** Fees are 5,000 lamports per signature and rent ~0.002 SOL per token account: this lasts millions of jobs. */
const FEE_PAYER_TOP_UP = 1_000n * LAMPORTS_PER_SOL;
const FEE_PAYER_MINIMUM = 100n * LAMPORTS_PER_SOL;

/**
 * Initializes the escrow program's config under the service's rules unless the chain has it.
 * It is a transaction, so the chain's log keeps it; the program itself is loaded at every open.
 * The service keeps every credit in the program, so a chain without it cannot be used.
 */
async function ensureEscrowConfig(backend: ChainBackend, keys: ServiceKeys, treasuryAccount: Address, logger: Logger, rules: EscrowRules): Promise<void> {
  const program = await backend.getAccount(ESCROW_PROGRAM);
  if (!program?.executable) {
    throw new Error(`the escrow program ${ESCROW_PROGRAM} is not deployed on this chain: deploy program/escrow.so there first (docs/program.md)`);
  }
  if (await backend.getAccount(configAddress().address)) {
    logger.info({ programId: ESCROW_PROGRAM }, "escrow program deployed, config in place");
    return;
  }
  const { bytes } = await backend.latestBlockhash();
  const ix = escrowInstructions.initialize({
    serviceAuthority: keys.custody.address,
    payer: keys.feePayer.address,
    treasury: treasuryAccount,
    usdcMint: keys.mint.address,
    stakeMint: keys.nativeMint.address,
    rules,
  });
  await backend.sendTransaction(buildTransaction(keys.feePayer, [ix], bytes, [keys.custody]).wire);
  logger.info({ programId: ESCROW_PROGRAM, config: configAddress().address }, "escrow program deployed and its config initialized");
}

/**
 * A chain whose escrow program is already configured serves one service authority and one USDC
 * mint: other keys (a gateway given its own instead of the chain's shared ones) could lock
 * nothing, and would only litter the chain with mints of their own.
 */
async function checkKeysFitConfig(backend: ChainBackend, keys: ServiceKeys): Promise<void> {
  const account = await backend.getAccount(configAddress().address);
  if (!account) return;
  const config = decodeConfig(account.data);
  if (config.serviceAuthority !== keys.custody.address || config.usdcMint !== keys.mint.address) {
    throw new Error(
      `this chain's escrow program is set up for other service keys (authority ${config.serviceAuthority}, mint ${config.usdcMint}): ` +
        "give this gateway the keys the chain was set up with (--keys-dir; `svc chain serve` keeps them in <its data dir>/keys)",
    );
  }
}

export async function ensureOnChainSetup(
  backend: ChainBackend,
  keys: ServiceKeys,
  tokenAccounts: AssociatedTokenAddresses,
  logger: Logger,
  /** Only where the config is initialized, i.e. on a new chain: tests shorten the clocks. */
  rules: Partial<EscrowRules> = {},
): Promise<{ treasuryAccount: Address }> {
  const { feePayer, mint, mintAuthority, treasury } = keys;
  await checkKeysFitConfig(backend, keys);
  const payer = await backend.getAccount(feePayer.address);
  if ((payer?.lamports ?? 0n) < FEE_PAYER_MINIMUM) await backend.requestAirdrop(feePayer.address, FEE_PAYER_TOP_UP);

  await ensureMint(backend, feePayer, mint, USDC_DECIMALS, mintAuthority.address);
  await ensureMint(backend, feePayer, keys.nativeMint, NATIVE_DECIMALS, keys.nativeMintAuthority.address);

  const treasuryAccount = tokenAccounts.of(treasury.address);
  if (!(await backend.getAccount(treasuryAccount))) {
    const { bytes } = await backend.latestBlockhash();
    const ix = createAssociatedTokenIdempotent({ payer: feePayer.address, ata: treasuryAccount, owner: treasury.address, mint: mint.address });
    await backend.sendTransaction(buildTransaction(feePayer, [ix], bytes, []).wire);
  }
  await ensureEscrowConfig(backend, keys, treasuryAccount, logger, { ...DEFAULT_RULES, ...rules });
  return { treasuryAccount };
}
