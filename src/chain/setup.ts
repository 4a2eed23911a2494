/**
 * The service's own keys and accounts on the chain. Keys are files in the data dir; each on-chain
 * piece is created only when the chain lacks it, so opening is idempotent and a crash during
 * setup is finished by the next open.
 */
import { type Address, type Instruction, createNoopSigner } from "@solana/kit";
import { getCreateAccountInstruction } from "@solana-program/system";
import { getInitializeMint2Instruction } from "@solana-program/token";
import { type Keypair, type Logger, NATIVE_DECIMALS, USDC_DECIMALS, generateKeypair, loadOrCreateKeypair, readKeypair } from "../core/index.ts";
import { MINT_SIZE, TOKEN_PROGRAM, type AssociatedTokenAddresses } from "./addresses.ts";
import type { ChainBackend } from "./backend.ts";
import { DEFAULT_RULES, ESCROW_PROGRAM, configAddress, decodeConfig, escrowInstructions, programDataAddress, type EscrowRules } from "./escrow-program/index.ts";
import { createAssociatedTokenIdempotent, withPriorityFee } from "./instructions.ts";
import { decodeLoaderState } from "./loader-v3.ts";
import { buildTransaction } from "./wire.ts";

export interface ServiceKeys {
  /** Pays for what the service authority does not sign: setup, deposits, vaults, grants, stakes. */
  feePayer: Keypair;
  /** The USDC-style mint's own address (its key signs only the mint's creation). */
  mint: Keypair;
  mintAuthority: Keypair;
  /**
   * The escrow program's service authority: it signs locks, settlements and refunds, and nothing
   * else can move a vault's credits but the wallet's own withdrawal. It pays the fees and rent
   * deposits of what it signs, so each carries one signature. Its file keeps the name
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

/**
 * The escrow program's id on a cluster set up by `svc chain init`: `<keys dir>/escrow-program.json`'s
 * key, if there is one. Read, never created: a new key would name a program that does not exist.
 */
export async function escrowProgramIn(keysDir: string | undefined): Promise<Address | undefined> {
  return keysDir === undefined ? undefined : (await readKeypair(keysDir, "escrow-program"))?.address;
}

/** What setup needs beyond the service's keys on a cluster `svc chain init` sets up. */
export interface SetupOptions {
  /** Where the escrow program lives (default ESCROW_PROGRAM, the embedded chain's). */
  program?: Address;
  /** The program's upgrade authority: `initialize` needs its signature when the program has one. */
  upgradeAuthority?: Keypair;
  /** Offered on each transaction setup sends, in micro-lamports per compute unit. */
  priorityFeeMicroLamports?: bigint;
}

/** Signs and sends `instructions`, paid by the fee payer, with setup's priority fee. */
async function sendSetup(backend: ChainBackend, feePayer: Keypair, instructions: Instruction[], signers: Keypair[], options: SetupOptions): Promise<void> {
  const { bytes } = await backend.latestBlockhash();
  await backend.sendTransaction(buildTransaction(feePayer, withPriorityFee(instructions, options.priorityFeeMicroLamports), bytes, signers).wire);
}

/** Create a mint unless the chain has it. */
async function ensureMint(backend: ChainBackend, feePayer: Keypair, mint: Keypair, decimals: number, authority: Address, options: SetupOptions): Promise<void> {
  if (await backend.getAccount(mint.address)) return;
  const rent = await backend.minimumBalanceForRentExemption(MINT_SIZE);
  await sendSetup(
    backend,
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
    [mint],
    options,
  );
}

export const LAMPORTS_PER_SOL = 1_000_000_000n;
/** Fees are 5,000 lamports per signature and rent ~0.002 SOL per token account: this lasts millions of jobs. */
const TOP_UP = 1_000n * LAMPORTS_PER_SOL;
const MINIMUM = 100n * LAMPORTS_PER_SOL;

/**
 * The key `initialize` needs besides the service's: the program's upgrade authority, when its
 * program data names one (the embedded chain's program has none). Refused here, before a
 * transaction, when that key is not at hand.
 */
async function initializeSigners(backend: ChainBackend, program: Address, options: SetupOptions): Promise<Keypair[]> {
  const state = decodeLoaderState((await backend.getAccount(programDataAddress(program).address))?.data ?? new Uint8Array());
  const authority = state.kind === "programData" ? state.authority : null;
  if (authority === null) return [];
  if (options.upgradeAuthority?.address !== authority) {
    throw new Error(
      `the escrow program ${program}'s config is not initialized yet, and only its upgrade authority ${authority} may do it: ` +
        "run `svc chain init` with the keys dir that holds upgrade-authority.json (docs/deploy.md)",
    );
  }
  return [options.upgradeAuthority];
}

/**
 * Initializes the escrow program's config under the service's rules unless the chain has it.
 * It is a transaction, so the chain's log keeps it. The service keeps every credit in the
 * program, so a chain without it cannot be used: on a cluster `svc chain init` deploys it.
 */
async function ensureEscrowConfig(backend: ChainBackend, keys: ServiceKeys, treasuryAccount: Address, logger: Logger, rules: EscrowRules, options: SetupOptions): Promise<void> {
  const programId = options.program ?? ESCROW_PROGRAM;
  const config = configAddress(programId).address;
  const program = await backend.getAccount(programId);
  if (!program?.executable) {
    throw new Error(
      `the escrow program ${programId} is not deployed on this chain: ` +
        "deploy program/escrow.so there first with `svc chain init --chain-url <url> --keys-dir <dir>` (docs/deploy.md)",
    );
  }
  if (await backend.getAccount(config)) {
    logger.info({ programId }, "escrow program deployed, config in place");
    return;
  }
  const upgradeAuthority = await initializeSigners(backend, programId, options);
  const ix = escrowInstructions.initialize({
    serviceAuthority: keys.custody.address,
    payer: keys.feePayer.address,
    treasury: treasuryAccount,
    usdcMint: keys.mint.address,
    stakeMint: keys.nativeMint.address,
    rules,
    program: programId,
    ...(upgradeAuthority[0] ? { upgradeAuthority: upgradeAuthority[0].address } : {}),
  });
  await sendSetup(backend, keys.feePayer, [ix], [keys.custody, ...upgradeAuthority.filter((k) => k.address !== keys.custody.address && k.address !== keys.feePayer.address)], options);
  logger.info({ programId, config }, "escrow program deployed and its config initialized");
}

/**
 * A development chain tops up the two keys that pay: the fee payer and the service authority. A
 * cluster that gives no SOL (mainnet) is not an error while the key has some: its operator funds
 * it (`svc chain init` says how much).
 */
async function topUp(backend: ChainBackend, who: string, address: Address, logger: Logger): Promise<void> {
  const held = (await backend.getAccount(address))?.lamports ?? 0n;
  if (held >= MINIMUM) return;
  try {
    await backend.requestAirdrop(address, TOP_UP);
  } catch (err) {
    if (held === 0n) throw new Error(`the ${who} ${address} holds no SOL and this chain gives none (${(err as Error).message}): send it SOL first`);
    logger.warn({ key: who, address, lamports: String(held) }, `the ${who} holds less than ${MINIMUM / LAMPORTS_PER_SOL} SOL and the chain gives none: keep it funded`);
  }
}

/**
 * A chain whose escrow program is already configured serves one service authority and one USDC
 * mint: other keys (a gateway given its own instead of the chain's shared ones) could lock
 * nothing, and would only litter the chain with mints of their own.
 */
async function checkKeysFitConfig(backend: ChainBackend, keys: ServiceKeys, program: Address | undefined): Promise<void> {
  const account = await backend.getAccount(configAddress(program).address);
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
  options: SetupOptions = {},
): Promise<{ treasuryAccount: Address }> {
  const { feePayer, mint, mintAuthority, treasury } = keys;
  await checkKeysFitConfig(backend, keys, options.program);
  await topUp(backend, "fee payer", feePayer.address, logger);
  await topUp(backend, "service authority", keys.custody.address, logger);

  await ensureMint(backend, feePayer, mint, USDC_DECIMALS, mintAuthority.address, options);
  await ensureMint(backend, feePayer, keys.nativeMint, NATIVE_DECIMALS, keys.nativeMintAuthority.address, options);

  const treasuryAccount = tokenAccounts.of(treasury.address);
  if (!(await backend.getAccount(treasuryAccount))) {
    const ix = createAssociatedTokenIdempotent({ payer: feePayer.address, ata: treasuryAccount, owner: treasury.address, mint: mint.address });
    await sendSetup(backend, feePayer, [ix], [], options);
  }
  await ensureEscrowConfig(backend, keys, treasuryAccount, logger, { ...DEFAULT_RULES, ...rules }, options);
  return { treasuryAccount };
}
