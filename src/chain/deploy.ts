/**
 * Deploys a program through the BPF upgradeable loader, as `solana program deploy` does, in steps
 * the chain itself records, so a run stopped anywhere is finished by the next one:
 *
 * 1. a buffer account (its key a file in the keys dir, so a rerun finds it) is created and
 *    initialized with the upgrade authority as its authority;
 * 2. the ELF is written into it in chunks that each fit a transaction; a rerun reads the buffer
 *    back and writes only the chunks it does not hold yet;
 * 3. one transaction creates the program account and deploys the buffer into it
 *    (`DeployWithMaxDataLen`), which moves the buffer's rent back to the payer.
 *
 * Everything goes through a ChainBackend (on a cluster its retrying, confirming sender).
 */
import { type Address, type Instruction, createNoopSigner } from "@solana/kit";
import { getCreateAccountInstruction } from "@solana-program/system";
import type { Keypair } from "../core/index.ts";
import type { ChainBackend } from "./backend.ts";
import { UPGRADEABLE_LOADER } from "./escrow-program/index.ts";
import { withPriorityFee } from "./instructions.ts";
import * as loader from "./loader-v3.ts";
import { MAX_TRANSACTION_SIZE, buildTransaction } from "./wire.ts";

export interface DeployKeys {
  feePayer: Keypair;
  /** The program's id: its key signs only the program account's creation. */
  program: Keypair;
  /** The buffer the ELF is written into before the deploy. */
  buffer: Keypair;
  /** Writes the buffer and becomes the program's upgrade authority. */
  authority: Keypair;
}

export type DeployEvent =
  | { step: "buffer"; address: Address; created: boolean }
  | { step: "write"; written: number; total: number }
  | { step: "deployed"; program: Address; signature: string };

export interface DeployOptions {
  priorityFeeMicroLamports?: bigint;
  /** Writes in flight at once. */
  concurrency?: number;
  report?: (event: DeployEvent) => void;
}

/** What a program id holds on the chain: nothing yet, or a deployed program with its ELF and upgrade authority. */
export type ProgramOnChain = { kind: "absent" } | { kind: "deployed"; programData: Address; bytes: Uint8Array; authority: Address | null };

export async function programOnChain(backend: ChainBackend, program: Address): Promise<ProgramOnChain> {
  const account = await backend.getAccount(program);
  if (!account) return { kind: "absent" };
  const state = loader.decodeLoaderState(account.data);
  if (account.owner !== UPGRADEABLE_LOADER || !account.executable || state.kind !== "program") {
    throw new Error(`${program} is already an account that is not an upgradeable program (owner ${account.owner}): it cannot be the escrow program's id`);
  }
  const data = loader.decodeLoaderState((await backend.getAccount(state.programData))?.data ?? new Uint8Array());
  if (data.kind !== "programData") throw new Error(`the program ${program} has no program data at ${state.programData}`);
  return { kind: "deployed", programData: state.programData, bytes: data.bytes, authority: data.authority };
}

/** Whether the deployed ELF is `elf` (program data may be longer, zero-filled, when deployed with room to grow). */
export function holdsElf(deployed: Uint8Array, elf: Uint8Array): boolean {
  return Buffer.from(deployed.subarray(0, elf.length)).equals(elf) && deployed.subarray(elf.length).every((b) => b === 0);
}

/** Lamports a deploy of `length` bytes still needs the payer to hold: rent of the program, its program data and (unless it exists) the buffer. */
export async function deployRent(backend: ChainBackend, length: number, bufferExists: boolean): Promise<bigint> {
  const rent = (size: number) => backend.minimumBalanceForRentExemption(size);
  const [program, programData, buffer] = await Promise.all([
    rent(loader.PROGRAM_ACCOUNT_SIZE),
    rent(loader.PROGRAMDATA_METADATA_SIZE + length),
    bufferExists ? 0n : rent(loader.BUFFER_METADATA_SIZE + length),
  ]);
  return program + programData + buffer;
}

async function send(backend: ChainBackend, keys: DeployKeys, instructions: Instruction[], signers: Keypair[], options: DeployOptions): Promise<string> {
  const { bytes } = await backend.latestBlockhash();
  const tx = buildTransaction(keys.feePayer, withPriorityFee(instructions, options.priorityFeeMicroLamports), bytes, signers);
  return (await backend.sendTransaction(tx.wire)).signature;
}

function createAccount(payer: Address, account: Address, lamports: bigint, space: number): Instruction {
  return getCreateAccountInstruction({ payer: createNoopSigner(payer), newAccount: createNoopSigner(account), lamports, space, programAddress: UPGRADEABLE_LOADER });
}

/** The buffer's current ELF part: created and initialized when missing; refused when it is someone else's or sized for other bytes. */
async function ensureBuffer(backend: ChainBackend, keys: DeployKeys, elf: Uint8Array, options: DeployOptions): Promise<Uint8Array> {
  const address = keys.buffer.address;
  const account = await backend.getAccount(address);
  if (!account) {
    const size = loader.BUFFER_METADATA_SIZE + elf.length;
    const rent = await backend.minimumBalanceForRentExemption(size);
    const create = createAccount(keys.feePayer.address, address, rent, size);
    await send(backend, keys, [create, loader.initializeBuffer({ buffer: address, authority: keys.authority.address })], [keys.buffer], options);
    options.report?.({ step: "buffer", address, created: true });
    return new Uint8Array(elf.length);
  }
  const state = loader.decodeLoaderState(account.data);
  if (account.owner !== UPGRADEABLE_LOADER || state.kind !== "buffer" || state.authority !== keys.authority.address || state.bytes.length !== elf.length) {
    throw new Error(
      `the deploy buffer ${address} (escrow-program-buffer.json in the keys dir) is not a buffer of ${elf.length} bytes written by ${keys.authority.address}: ` +
        "move that file away to start a new buffer (`solana program close` recovers the old one's rent)",
    );
  }
  options.report?.({ step: "buffer", address, created: false });
  return state.bytes;
}

/** The most ELF bytes one `Write` carries: what is left of a transaction after everything else it holds. */
export function chunkSize(keys: DeployKeys, priorityFeeMicroLamports: bigint | undefined): number {
  const empty = loader.write({ buffer: keys.buffer.address, authority: keys.authority.address, offset: 0, bytes: new Uint8Array() });
  const size = buildTransaction(keys.feePayer, withPriorityFee([empty], priorityFeeMicroLamports), new Uint8Array(32), [keys.authority]).wire.length;
  // The data's length prefix (compact-u16) takes a second byte once the data passes 127 bytes.
  return MAX_TRANSACTION_SIZE - size - 1;
}

/** Writes every chunk the buffer does not hold yet, `concurrency` at a time, reporting chunks held of the total. */
async function writeBuffer(backend: ChainBackend, keys: DeployKeys, elf: Uint8Array, held: Uint8Array, options: DeployOptions): Promise<void> {
  const size = chunkSize(keys, options.priorityFeeMicroLamports);
  const offsets: number[] = [];
  for (let at = 0; at < elf.length; at += size) offsets.push(at);
  const missing = offsets.filter((at) => !Buffer.from(held.subarray(at, at + size)).equals(elf.subarray(at, at + size)));
  let written = offsets.length - missing.length;
  options.report?.({ step: "write", written, total: offsets.length });
  const writeOne = async (offset: number) => {
    const ix = loader.write({ buffer: keys.buffer.address, authority: keys.authority.address, offset, bytes: elf.subarray(offset, offset + size) });
    await send(backend, keys, [ix], [keys.authority], options);
    options.report?.({ step: "write", written: ++written, total: offsets.length });
  };
  const queue = [...missing];
  const worker = async () => {
    for (let next = queue.shift(); next !== undefined; next = queue.shift()) await writeOne(next);
  };
  await Promise.all(Array.from({ length: Math.min(options.concurrency ?? 8, queue.length) }, worker));
}

/**
 * Deploys `elf` at `keys.program` unless it is there. Returns the deploy's signature, or null
 * when the program was already deployed (the caller checks its bytes with `programOnChain`).
 */
export async function deployProgram(backend: ChainBackend, keys: DeployKeys, elf: Uint8Array, options: DeployOptions = {}): Promise<string | null> {
  if ((await programOnChain(backend, keys.program.address)).kind === "deployed") return null;
  const held = await ensureBuffer(backend, keys, elf, options);
  await writeBuffer(backend, keys, elf, held, options);
  const buffer = loader.decodeLoaderState((await backend.getAccount(keys.buffer.address))?.data ?? new Uint8Array());
  if (buffer.kind !== "buffer" || !Buffer.from(buffer.bytes).equals(elf)) throw new Error(`the buffer ${keys.buffer.address} does not hold the program's bytes after writing them`);
  const rent = await backend.minimumBalanceForRentExemption(loader.PROGRAM_ACCOUNT_SIZE);
  const signature = await send(
    backend,
    keys,
    [
      createAccount(keys.feePayer.address, keys.program.address, rent, loader.PROGRAM_ACCOUNT_SIZE),
      // Room for exactly this ELF: an upgrade to a larger one extends the program data first (ExtendProgram).
      loader.deployWithMaxDataLen({ payer: keys.feePayer.address, program: keys.program.address, buffer: keys.buffer.address, authority: keys.authority.address, maxDataLen: elf.length }),
    ],
    [keys.program, keys.authority],
    options,
  );
  options.report?.({ step: "deployed", program: keys.program.address, signature });
  return signature;
}
