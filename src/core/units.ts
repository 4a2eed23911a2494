/**
 * Money units. 1 credit = 0.01 USDC = 10,000 base units of a 6-decimal USDC mint, so the
 * worker's 75% / 85% shares of any whole-credit charge are exact in base units.
 */

export const USDC_DECIMALS = 6;
export const BASE_UNITS_PER_CREDIT = 10_000n;

export function creditsToBaseUnits(credits: number | bigint): bigint {
  return BigInt(credits) * BASE_UNITS_PER_CREDIT;
}

/** Whole credits in an amount of base units (rounds down). */
export function baseUnitsToCredits(units: bigint): number {
  return Number(units / BASE_UNITS_PER_CREDIT);
}

/** Stablecoin value of a credit amount, as the API reports it (credits x 0.01). */
export function usdcValue(credits: number): number {
  return Math.round(credits) / 100;
}

/** The network's native token (staked by workers) has 9 decimals, like SOL. */
export const NATIVE_DECIMALS = 9;
export const NATIVE_BASE_UNITS = 10n ** BigInt(NATIVE_DECIMALS);
/** A worker whose stake holds at least this much of the native token counts as staked. */
export const MIN_ACTIVE_STAKE = 1_000n * NATIVE_BASE_UNITS;

export const WORKER_SHARE_PERCENT = 75n;
export const STAKED_WORKER_SHARE_PERCENT = 85n;

/** Split a charge between the worker and the protocol treasury, in base units. */
export function splitPayout(chargedCredits: number, staked: boolean): { worker: bigint; treasury: bigint } {
  const total = creditsToBaseUnits(chargedCredits);
  const worker = (total * (staked ? STAKED_WORKER_SHARE_PERCENT : WORKER_SHARE_PERCENT)) / 100n;
  return { worker, treasury: total - worker };
}
