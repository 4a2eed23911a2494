/**
 * Whether 32 bytes are a compressed Ed25519 point: what makes a program address valid (it must
 * not be one, so no private key can sign for it). kit answers by computing the point's x, an
 * exponentiation of 252 BigInt squarings, about 200 µs here; a program address search makes two
 * tries on average, once per job for its escrow. Only whether x exists matters, and that is a
 * quadratic-residue test, which the Jacobi symbol answers in about 25 µs (bench/curve.ts).
 * test/chain/curve.test.ts checks it agrees with kit.
 */

const P = 2n ** 255n - 19n;
/** The curve's d: -121665/121666 mod P. */
const D = 37095705934669439343138083508754565189542113879843219016388785533085940283555n;

/** The Jacobi symbol (a/n) for odd n > 0, by the binary algorithm: 1, -1, or 0 when they share a factor. */
function jacobi(a: bigint, n: bigint): number {
  let result = 1;
  a %= n;
  while (a !== 0n) {
    while ((a & 1n) === 0n) {
      a >>= 1n;
      const r = n & 7n;
      if (r === 3n || r === 5n) result = -result;
    }
    [a, n] = [n, a];
    if ((a & 3n) === 3n && (n & 3n) === 3n) result = -result;
    a %= n;
  }
  return n === 1n ? result : 0;
}

/**
 * As curve25519-dalek's decompression (and kit's check) decide it: y is the low 255 bits, little
 * endian, taken mod P; x² = (y² - 1) / (d·y² + 1) must have a root, and x = 0 may not carry the
 * sign bit. d·y² + 1 is never 0 mod P (-1/d is not a square), so the quotient is a square exactly
 * when the product is.
 */
export function isOnCurve(bytes: Uint8Array): boolean {
  if (bytes.length !== 32) return false;
  let y = 0n;
  for (let i = 31; i >= 0; i--) y = (y << 8n) | BigInt(i === 31 ? bytes[i]! & 0x7f : bytes[i]!);
  const y2 = (y * y) % P;
  const u = (y2 + P - 1n) % P;
  const v = (D * y2 + 1n) % P;
  if (u === 0n) return (bytes[31]! & 0x80) === 0;
  return jacobi((u * v) % P, P) === 1;
}
