/**
 * The escrow program's id and the program addresses it derives. Seeds match program/src; each
 * derivation returns the canonical (highest viable) bump, which the program also insists on.
 */
import type { Address } from "@solana/kit";
import { BoundedMap } from "../../core/index.ts";
import { addressBytes, findProgramAddressAndBump, type ProgramAddress } from "../addresses.ts";

export type { ProgramAddress };

/**
 * The fixed id under which the embedded chain deploys program/escrow.so, and every helper's
 * default. On a cluster the program lives where `svc chain init` deployed it (the public key of
 * `<keys dir>/escrow-program.json`), and the service passes that id to each helper.
 */
export const ESCROW_PROGRAM = "SvcEscrow1111111111111111111111111111111111" as Address;
export const INSTRUCTIONS_SYSVAR = "Sysvar1nstructions1111111111111111111111111" as Address;
/** The loader programs are deployed through on a cluster; its program data names the upgrade authority. */
export const UPGRADEABLE_LOADER = "BPFLoaderUpgradeab1e11111111111111111111111" as Address;

const text = (s: string) => new TextEncoder().encode(s);

/** A job's addresses are derived several times in its life (lock, settlement, its record's reads): each costs ~50 µs. */
const derived = new BoundedMap<ProgramAddress>(100_000);

/** `find_program_address`, keeping the bump (the instructions carry some bumps); cached. */
export function deriveAddress(seeds: readonly Uint8Array[], program: Address = ESCROW_PROGRAM): ProgramAddress {
  const key = `${program}:${seeds.map((s) => Buffer.from(s).toString("hex")).join(":")}`;
  let found = derived.get(key);
  if (found === undefined) {
    found = findProgramAddressAndBump(seeds, program);
    derived.set(key, found);
  }
  return found;
}

/** The upgradeable loader's program-data account of `program`: its bytes and its upgrade authority. */
export const programDataAddress = (program: Address = ESCROW_PROGRAM) => deriveAddress([addressBytes(program)], UPGRADEABLE_LOADER);

export const configAddress = (program?: Address) => deriveAddress([text("config")], program);
/** Token authority of every vault and both pools; only the program signs for it. */
export const vaultAuthorityAddress = (program?: Address) => deriveAddress([text("authority")], program);
export const escrowPoolAddress = (program?: Address) => deriveAddress([text("pool")], program);
export const stakePoolAddress = (program?: Address) => deriveAddress([text("stake_pool")], program);

export function vaultAddress(wallet: Address, program?: Address): ProgramAddress {
  return deriveAddress([text("vault"), addressBytes(wallet)], program);
}

/** A job's escrow record. Job ids are 1-32 printable ASCII bytes (the service's are `job_` + ULID). */
export function escrowAddress(jobId: string, program?: Address): ProgramAddress {
  return deriveAddress([text("escrow"), text(jobId)], program);
}

export function stakeAddress(worker: Address, program?: Address): ProgramAddress {
  return deriveAddress([text("stake"), addressBytes(worker)], program);
}

/** A dispute of a job, created by `dispute`. */
export function disputeAddress(jobId: string, program?: Address): ProgramAddress {
  return deriveAddress([text("dispute"), text(jobId)], program);
}

/** A wallet's escrow table `tableId` (the service numbers each wallet's tables). */
export function tableAddress(wallet: Address, tableId: bigint, program?: Address): ProgramAddress {
  const id = new Uint8Array(8);
  new DataView(id.buffer).setBigUint64(0, tableId, true);
  return deriveAddress([text("table"), addressBytes(wallet), id], program);
}

/** A dispute of a table's slot, created by `dispute_slot`. */
export function slotDisputeAddress(table: Address, slot: number, program?: Address): ProgramAddress {
  return deriveAddress([text("dispute"), addressBytes(table), Uint8Array.of(slot)], program);
}
