/**
 * What `svc chain init` does to a fresh Solana cluster: the service's keys in the keys dir, the
 * escrow program (program/escrow.so, deployed through the upgradeable loader at the public key of
 * `escrow-program.json`), then the setup every gateway start checks (mints, treasury, the
 * program's config, initialized with the upgrade authority's signature). Each piece is made only
 * when the chain lacks it, so a second run sends nothing and an interrupted one is finished by
 * the next. Every transaction goes through the cluster backend: retries, confirmation, expiry.
 */
import { rm } from "node:fs/promises";
import { join } from "node:path";
import type { Address } from "@solana/kit";
import { type Keypair, loadOrCreateKeypair, readKeypair, silentLogger } from "../core/index.ts";
import { AssociatedTokenAddresses, MINT_SIZE, TOKEN_ACCOUNT_SIZE } from "./addresses.ts";
import type { ChainBackend } from "./backend.ts";
import { ClusterBackend } from "./cluster/index.ts";
import { type DeployEvent, chunkSize, deployProgram, deployRent, holdsElf, programOnChain } from "./deploy.ts";
import { CONFIG_SIZE, configAddress, escrowProgramImage } from "./escrow-program/index.ts";
import { LAMPORTS_PER_SOL, ensureOnChainSetup, loadServiceKeys, type ServiceKeys } from "./setup.ts";

export interface InitChainOptions {
  chainUrl: string;
  keysDir: string;
  priorityFeeMicroLamports?: bigint;
  /** Another backend (tests); by default the cluster backend on `chainUrl`. */
  backend?: ChainBackend;
  /** Where each step is told, a line at a time. */
  say?: (line: string) => void;
  /** The deploy's long part: chunks the buffer holds of the total. */
  progress?: (written: number, total: number) => void;
}

export interface InitChainResult {
  program: Address;
  config: Address;
  upgradeAuthority: Address | null;
  /** Whether this run sent anything. */
  changed: boolean;
}

/** Lamports as SOL, to 4 decimals. */
const sol = (lamports: bigint) => `${(Number(lamports) / Number(LAMPORTS_PER_SOL)).toFixed(4).replace(/\.?0+$/, "")}`;

/** A fee payer's worst case per transaction: two signatures, and the priority fee on the default 200,000 compute units. */
function feePerTransaction(priorityFee: bigint | undefined): bigint {
  return 10_000n + ((priorityFee ?? 0n) * 200_000n + 999_999n) / 1_000_000n;
}

async function reachable(backend: ChainBackend, url: string): Promise<void> {
  try {
    await backend.getSlot();
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    throw new Error(`cannot reach the Solana RPC at ${url}: ${(err as Error).message}${cause ? ` (${cause.code ?? cause.message})` : ""}`);
  }
}

/** The pieces of the service's setup this chain lacks, by name. */
async function missingSetup(backend: ChainBackend, keys: ServiceKeys, program: Address): Promise<string[]> {
  const treasury = new AssociatedTokenAddresses(keys.mint.address).of(keys.treasury.address);
  const pieces: [string, Address][] = [
    ["the USDC mint", keys.mint.address],
    ["the native (stake) mint", keys.nativeMint.address],
    ["the treasury's USDC account", treasury],
    ["the escrow program's config", configAddress(program).address],
  ];
  const found = await Promise.all(pieces.map(([, address]) => backend.getAccount(address)));
  return pieces.filter((_, i) => !found[i]).map(([name]) => name);
}

/** Lamports the rest of the run may spend: the deploy's rent and writes, the setup's accounts, every fee. */
async function lamportsNeeded(backend: ChainBackend, options: InitChainOptions, deploy: { keys: Parameters<typeof chunkSize>[0]; bufferExists: boolean } | null, setup: string[]): Promise<bigint> {
  const elf = escrowProgramImage().bytes;
  const rent = (size: number) => backend.minimumBalanceForRentExemption(size);
  let transactions = BigInt(setup.length);
  let lamports = 0n;
  if (deploy) {
    lamports += await deployRent(backend, elf.length, deploy.bufferExists);
    transactions += 2n + BigInt(Math.ceil(elf.length / chunkSize(deploy.keys, options.priorityFeeMicroLamports)));
  }
  // Two mints, the treasury's account, the config and its two pools: an upper bound when some exist.
  if (setup.length > 0) lamports += 2n * (await rent(MINT_SIZE)) + 3n * (await rent(TOKEN_ACCOUNT_SIZE)) + (await rent(CONFIG_SIZE));
  return lamports + transactions * feePerTransaction(options.priorityFeeMicroLamports);
}

/** Who pays, what for and how much. */
interface Payer {
  who: "fee payer" | "service authority";
  address: Address;
  needed: bigint;
  /** Who needs it ("this run"), and what for. */
  by: string;
  for: string;
}

/**
 * What the service authority starts with: it pays the fees of the locks, settlements and refunds
 * it signs, and each open job's escrow-record rent until the record is closed.
 */
const AUTHORITY_FLOAT = LAMPORTS_PER_SOL;

/** Funds a key from the chain's faucet where there is one (a development cluster); otherwise says who needs how much. */
async function ensureFunded(backend: ChainBackend, payer: Payer, say: (line: string) => void): Promise<void> {
  const { who, address, needed } = payer;
  const held = (await backend.getAccount(address))?.lamports ?? 0n;
  if (held >= needed) return;
  // At least 1 SOL: a faucet may refuse amounts below an account's rent-exempt minimum.
  const asked = needed - held > LAMPORTS_PER_SOL ? needed - held : LAMPORTS_PER_SOL;
  try {
    await backend.requestAirdrop(address, asked);
    say(`${who[0]!.toUpperCase()}${who.slice(1)} ${address}: held ${sol(held)} SOL, airdropped ${sol(asked)} SOL`);
  } catch (err) {
    throw new Error(
      `the ${who} ${address} holds ${sol(held)} SOL and ${payer.by} needs about ${sol(needed)} SOL (${payer.for}); ` +
        `this chain gave none (${(err as Error).message.split("\n")[0]}). Send ${address} at least ${sol(needed - held)} SOL ` +
        "(e.g. `solana transfer <it> <amount> --allow-unfunded-recipient`) and run `svc chain init` again",
    );
  }
}

function reportDeploy(say: (line: string) => void, progress: InitChainOptions["progress"]): (event: DeployEvent) => void {
  return (event) => {
    if (event.step === "buffer") say(event.created ? `Created the deploy buffer ${event.address}` : `Resuming with the deploy buffer ${event.address}`);
    else if (event.step === "write") progress?.(event.written, event.total);
    else say(`Deployed the escrow program at ${event.program} (transaction ${event.signature})`);
  };
}

/** Sets up a fresh cluster for the service; a cluster already set up is left as it is. */
export async function initChain(options: InitChainOptions): Promise<InitChainResult> {
  const say = options.say ?? (() => {});
  const backend = options.backend ?? new ClusterBackend({ url: options.chainUrl });
  try {
    await reachable(backend, options.chainUrl);
    const keys = await loadServiceKeys(options.keysDir);
    const programKey = await loadOrCreateKeypair(options.keysDir, "escrow-program");
    const program = programKey.address;
    const config = configAddress(program).address;
    say(`Fee payer ${keys.feePayer.address}, service authority ${keys.custody.address}, escrow program id ${program}`);
    const onChain = await programOnChain(backend, program);
    const setup = await missingSetup(backend, keys, program);
    if (onChain.kind === "deployed") reportDeployed(onChain, program, say);
    const fundAuthority = () => ensureFunded(backend, { who: "service authority", address: keys.custody.address, needed: AUTHORITY_FLOAT, by: "a gateway", for: "its transactions' fees, and each open job's escrow rent" }, say);
    if (onChain.kind === "deployed" && setup.length === 0) {
      // A deployment set up before the authority paid for its own transactions needs this too.
      await fundAuthority();
      say(`Nothing to do: the program, mints, treasury and config (${config}) are in place for the keys in ${options.keysDir}`);
      return { program, config, upgradeAuthority: onChain.authority, changed: false };
    }
    const authority = onChain.kind === "absent" ? await loadOrCreateKeypair(options.keysDir, "upgrade-authority") : await readKeypair(options.keysDir, "upgrade-authority");
    const deployKeys = onChain.kind === "absent" ? { feePayer: keys.feePayer, program: programKey, buffer: await loadOrCreateKeypair(options.keysDir, "escrow-program-buffer"), authority: authority! } : null;
    const bufferExists = deployKeys !== null && (await backend.getAccount(deployKeys.buffer.address)) !== null;
    const needed = await lamportsNeeded(backend, options, deployKeys && { keys: deployKeys, bufferExists }, setup);
    await ensureFunded(backend, { who: "fee payer", address: keys.feePayer.address, needed, by: "this run", for: "rent of the program and its accounts, and fees" }, say);
    await fundAuthority();
    if (deployKeys) await deployAndForgetBuffer(backend, deployKeys, options, say);
    await setUp(backend, keys, program, authority, options, setup, say);
    return { program, config, upgradeAuthority: onChain.kind === "absent" ? authority!.address : onChain.authority, changed: true };
  } finally {
    await backend.close();
  }
}

function reportDeployed(onChain: Extract<Awaited<ReturnType<typeof programOnChain>>, { kind: "deployed" }>, program: Address, say: (line: string) => void): void {
  const same = holdsElf(onChain.bytes, escrowProgramImage().bytes);
  say(
    same
      ? `The escrow program is deployed at ${program} with this build's program/escrow.so (upgrade authority ${onChain.authority ?? "none"})`
      : `Note: the program at ${program} holds other bytes than this build's program/escrow.so; svc chain init does not upgrade it`,
  );
}

async function deployAndForgetBuffer(backend: ChainBackend, keys: Parameters<typeof deployProgram>[1], options: InitChainOptions, say: (line: string) => void): Promise<void> {
  const elf = escrowProgramImage().bytes;
  say(`Deploying program/escrow.so (${elf.length} bytes) through the upgradeable loader, upgrade authority ${keys.authority.address}`);
  await deployProgram(backend, keys, elf, { ...(options.priorityFeeMicroLamports ? { priorityFeeMicroLamports: options.priorityFeeMicroLamports } : {}), report: reportDeploy(say, options.progress) });
  // The deploy emptied the buffer into the program data; its key has nothing left to sign for.
  await rm(join(options.keysDir, "escrow-program-buffer.json"), { force: true });
}

async function setUp(backend: ChainBackend, keys: ServiceKeys, program: Address, authority: Keypair | undefined, options: InitChainOptions, missing: string[], say: (line: string) => void): Promise<void> {
  if (missing.length === 0) return;
  await ensureOnChainSetup(backend, keys, new AssociatedTokenAddresses(keys.mint.address), silentLogger(), {}, {
    program,
    ...(authority ? { upgradeAuthority: authority } : {}),
    ...(options.priorityFeeMicroLamports ? { priorityFeeMicroLamports: options.priorityFeeMicroLamports } : {}),
  });
  say(`Created ${missing.join(", ")} (config ${configAddress(program).address})`);
}
