/**
 * What finding a job's escrow address costs: the curve check alone, kit's (`isOffCurveAddress`,
 * from an address string as it takes it) against chain/curve.ts's (from the hash's bytes), and a
 * whole escrow-address search, which makes about two tries. Interleaved rounds on the same
 * random inputs; prints each round's mean.
 *
 * Run: node --import tsx bench/curve.ts [rounds=5]
 */
import { randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";
import { isOffCurveAddress, type Address } from "@solana/kit";
import { findProgramAddressAndBump } from "../src/chain/addresses.ts";
import { isOnCurve } from "../src/chain/curve.ts";
import { ESCROW_PROGRAM } from "../src/chain/escrow-program/index.ts";
import { base58Encode } from "../src/core/base58.ts";
import { newId } from "../src/core/ids.ts";

const ROUNDS = Number(process.argv[2] ?? 5);
const PER_ROUND = 1_000;
const encoder = new TextEncoder();

function microsEach<T>(inputs: readonly T[], fn: (input: T) => unknown): number {
  const start = performance.now();
  for (const input of inputs) fn(input);
  return ((performance.now() - start) * 1000) / inputs.length;
}

console.log("µs each:     kit's check   ours   escrow address (tries)");
for (let round = 0; round <= ROUNDS; round++) {
  const points = Array.from({ length: PER_ROUND }, () => new Uint8Array(randomBytes(32)));
  const kit = microsEach(points, (bytes) => isOffCurveAddress(base58Encode(bytes) as Address));
  const ours = microsEach(points, isOnCurve);
  const jobs = Array.from({ length: PER_ROUND }, () => [encoder.encode("escrow"), encoder.encode(newId("job"))]);
  let tries = 0;
  const search = microsEach(jobs, (seeds) => (tries += 256 - findProgramAddressAndBump(seeds, ESCROW_PROGRAM).bump));
  // Round 0 warms the JIT up and is not shown.
  if (round > 0) console.log(`round ${round}:   ${kit.toFixed(1).padStart(11)} ${ours.toFixed(1).padStart(6)} ${search.toFixed(1).padStart(10)} (${(tries / PER_ROUND).toFixed(2)})`);
}
