/**
 * Money units. 1 credit = 0.01 USDC = 10,000 base units of a 6-decimal USDC mint, so the
 * worker's shares of any whole-credit charge (core/payout.ts) are exact in base units.
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
