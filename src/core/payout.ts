/**
 * The payout rule: how a job's charge is shared between the worker that ran it and the protocol
 * treasury. A worker earns 75% of the charge, 85% while its stake holds at least MIN_ACTIVE_STAKE.
 * Settlement on the chain, the ledger's payout transfers and the escrow program's rules all take
 * their numbers from here.
 */
import { creditsToBaseUnits, NATIVE_BASE_UNITS } from "./units.ts";

/** A worker whose stake holds at least this much of the native token counts as staked. */
export const MIN_ACTIVE_STAKE = 1_000n * NATIVE_BASE_UNITS;

/** Basis points (1/10,000) are what the escrow program stores, so the shares are kept in them. */
export const BASIS_POINTS = 10_000n;
export const WORKER_SHARE_BPS = 7_500n;
export const STAKED_WORKER_SHARE_BPS = 8_500n;

/** Split a charge between the worker and the protocol treasury, in base units. */
export function splitPayout(creditsCharged: number, staked: boolean): { worker: bigint; treasury: bigint } {
  const total = creditsToBaseUnits(creditsCharged);
  const worker = (total * (staked ? STAKED_WORKER_SHARE_BPS : WORKER_SHARE_BPS)) / BASIS_POINTS;
  return { worker, treasury: total - worker };
}
