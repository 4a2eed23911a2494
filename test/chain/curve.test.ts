/**
 * The program-address check (chain/curve.ts) decides as kit's does, which Solana's runtime
 * agrees with: on random bytes (half of them points), and on the edges of the field and of the
 * sign bit.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { isOffCurveAddress, type Address } from "@solana/kit";
import { isOnCurve } from "../../src/chain/curve.ts";
import { findProgramAddressAndBump } from "../../src/chain/addresses.ts";
import { ESCROW_PROGRAM } from "../../src/chain/escrow-program/index.ts";
import { base58Encode } from "../../src/core/base58.ts";

const P = 2n ** 255n - 19n;

function littleEndian(value: bigint, signBit = false): Uint8Array {
  const bytes = new Uint8Array(32);
  for (let i = 0; i < 32; i++, value >>= 8n) bytes[i] = Number(value & 255n);
  if (signBit) bytes[31]! |= 0x80;
  return bytes;
}

const kitSaysOnCurve = (bytes: Uint8Array) => !isOffCurveAddress(base58Encode(bytes) as Address);

test("random bytes: the same answer as kit for each of 5,000, about half of them on the curve", () => {
  let onCurve = 0;
  for (let i = 0; i < 5_000; i++) {
    const bytes = new Uint8Array(randomBytes(32));
    const expected = kitSaysOnCurve(bytes);
    assert.equal(isOnCurve(bytes), expected, `bytes ${Buffer.from(bytes).toString("hex")}`);
    if (expected) onCurve++;
  }
  assert.ok(onCurve > 2_200 && onCurve < 2_800, `${onCurve} of 5,000 on the curve`);
});

test("edges: y = 0, 1 and P - 1, y at or past P (read mod P), with and without the sign bit", () => {
  const ys = [0n, 1n, 2n, P - 1n, P, P + 1n, P + 2n, 2n ** 255n - 1n];
  for (const y of ys) {
    for (const sign of [false, true]) {
      const bytes = littleEndian(y, sign);
      assert.equal(isOnCurve(bytes), kitSaysOnCurve(bytes), `y = ${y}, sign bit ${sign}`);
    }
  }
  assert.equal(isOnCurve(littleEndian(1n)), true, "the identity point");
  assert.equal(isOnCurve(littleEndian(1n, true)), false, "x = 0 may not carry the sign bit");
  assert.equal(isOnCurve(new Uint8Array(31)), false, "not 32 bytes");
});

test("a program address found with it is the one kit derives, with the same bump", async () => {
  const { getProgramDerivedAddress } = await import("@solana/kit");
  const encoder = new TextEncoder();
  for (let i = 0; i < 50; i++) {
    const seeds = [encoder.encode("escrow"), encoder.encode(`job_${i}_${randomBytes(6).toString("hex")}`)];
    const ours = findProgramAddressAndBump(seeds, ESCROW_PROGRAM);
    const [address, bump] = await getProgramDerivedAddress({ programAddress: ESCROW_PROGRAM, seeds });
    assert.deepEqual(ours, { address, bump });
  }
});
