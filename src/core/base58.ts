/**
 * Base58 (Bitcoin alphabet) for the 32-byte addresses and 64-byte signatures that the chain, the
 * worker protocol and wallet sign-in all handle. kit's codec goes through BigInt and costs 65-135 µs
 * per value, which dominated building a transaction; these do the same conversion in a few
 * microseconds.
 */

const ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
const CODES = Uint8Array.from(ALPHABET, (c) => c.charCodeAt(0));
const ONE = CODES[0]!;
const INDEX = new Int8Array(128).fill(-1);
for (let i = 0; i < ALPHABET.length; i++) INDEX[ALPHABET.charCodeAt(i)] = i;

/** 58^5: each limb of the conversion holds five base58 digits. */
const LIMB = 656_356_768;

/**
 * The conversion works on limbs of five base58 digits and takes the input two bytes at a time: a
 * tenth of the steps of one digit and one byte at a time, and a signature's text in a third of the
 * time (3.3-5.8 against 9.9-12.9 µs here). A limb times 2^16 plus a carry stays below 2^46, exact in
 * a double, and a quotient below 2^17 is never rounded across an integer, since its distance to
 * one is at least 1 / LIMB.
 */
export function base58Encode(bytes: Uint8Array): string {
  let zeros = 0;
  while (zeros < bytes.length && bytes[zeros] === 0) zeros++;
  // log(256) / log(58) < 1.37 digits a byte.
  const limbs = new Float64Array(Math.ceil(((bytes.length - zeros) * 1.37) / 5) + 1);
  let used = 0;
  // An odd count takes one byte first, then the rest go in pairs.
  for (let i = zeros; i < bytes.length; ) {
    const pair = (bytes.length - i) % 2 === 0;
    const scale = pair ? 65_536 : 256;
    let carry = pair ? bytes[i]! * 256 + bytes[i + 1]! : bytes[i]!;
    i += pair ? 2 : 1;
    for (let j = 0; j < used; j++) {
      const x = limbs[j]! * scale + carry;
      carry = Math.floor(x / LIMB);
      limbs[j] = x - carry * LIMB;
    }
    while (carry > 0) {
      const high = Math.floor(carry / LIMB);
      limbs[used++] = carry - high * LIMB;
      carry = high;
    }
  }
  // The digits' characters, written from the end; the top limb's leading zeros are dropped after.
  const chars = new Uint8Array(zeros + used * 5);
  let at = chars.length;
  for (let j = 0; j < used; j++) {
    let limb = limbs[j]!;
    for (let k = 0; k < 5; k++) {
      const high = Math.floor(limb / 58);
      chars[--at] = CODES[limb - high * 58]!;
      limb = high;
    }
  }
  while (at < chars.length && chars[at] === ONE) at++;
  chars.fill(ONE, at - zeros, at);
  return Buffer.from(chars.buffer, at - zeros, chars.length - at + zeros).toString("latin1");
}

/** Decodes `text`; throws unless it is base58 of exactly `size` bytes (when size is given). */
export function base58Decode(text: string, size?: number): Uint8Array {
  let zeros = 0;
  while (zeros < text.length && text.charCodeAt(zeros) === 49 /* "1" */) zeros++;
  const bytes = new Uint8Array(Math.ceil((text.length - zeros) * 0.733) + 1);
  let used = 0;
  for (let i = zeros; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const value = c < 128 ? INDEX[c]! : -1;
    if (value < 0) throw new TypeError(`not base58: ${JSON.stringify(text)}`);
    let carry = value;
    for (let j = 0; j < used; j++) {
      carry += bytes[j]! * 58;
      bytes[j] = carry & 0xff;
      carry >>= 8;
    }
    while (carry > 0) {
      bytes[used++] = carry & 0xff;
      carry >>= 8;
    }
  }
  const out = new Uint8Array(zeros + used);
  for (let j = 0; j < used; j++) out[zeros + j] = bytes[used - 1 - j]!;
  if (size !== undefined && out.length !== size) {
    throw new TypeError(`expected base58 of ${size} bytes, got ${out.length}: ${JSON.stringify(text)}`);
  }
  return out;
}
