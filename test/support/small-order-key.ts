/**
 * A forgery a lax Ed25519 check lets through: the curve's identity point as the public key A, and
 * one signature that fits every message under it. The check is [S]B = R + [k]A, k the hash of the
 * message, and with A the identity that is [S]B = R whatever k is. R is a real key's public point
 * and S its secret scalar, so it holds. Node's OpenSSL accepted it (test/core/keys.test.ts).
 */
import { createHash } from "node:crypto";
import { base58Encode, generateKeypair } from "../../src/core/index.ts";

/** L, the order of Ed25519's base point. */
export const GROUP_ORDER = 2n ** 252n + 27742317777372353535851937790883648493n;

/** The identity point's address, and a signature that fits every message under it. */
export function smallOrderForgery(): { address: string; signature: Uint8Array } {
  const real = generateKeypair();
  const digest = createHash("sha512").update(real.secretKey.subarray(0, 32)).digest();
  // The secret scalar is the digest's first half, clamped as Ed25519 clamps it.
  const clamped = Uint8Array.from(digest.subarray(0, 32));
  clamped[0]! &= 248;
  clamped[31]! &= 127;
  clamped[31]! |= 64;
  let scalar = 0n;
  for (let i = 31; i >= 0; i--) scalar = (scalar << 8n) | BigInt(clamped[i]!);
  scalar %= GROUP_ORDER;
  const signature = new Uint8Array(64);
  signature.set(real.publicKey, 0);
  for (let i = 32; i < 64; i++, scalar >>= 8n) signature[i] = Number(scalar & 0xffn);
  return { address: base58Encode(Uint8Array.from({ length: 32 }, (_, i) => (i === 0 ? 1 : 0))), signature };
}
