/** Base58 against @solana/kit's codec, which converts through BigInt: the same text, and back. */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { getBase58Decoder } from "@solana/kit";
import { base58Decode, base58Encode } from "../../src/core/index.ts";

const kitText = (bytes: Uint8Array) => getBase58Decoder().decode(bytes);

test("base58 of edge values is kit's, and decodes back", () => {
  const cases = [
    new Uint8Array(0),
    new Uint8Array(1),
    new Uint8Array(32),
    Uint8Array.of(0, 0, 1),
    Uint8Array.of(57),
    Uint8Array.of(58),
    Uint8Array.of(255),
    Uint8Array.of(1, 0),
    new Uint8Array(32).fill(255),
    new Uint8Array(64).fill(255),
    Uint8Array.from({ length: 33 }, (_, i) => (i < 3 ? 0 : 255)),
  ];
  for (const bytes of cases) {
    const text = base58Encode(bytes);
    assert.equal(text, kitText(bytes), `bytes ${Buffer.from(bytes).toString("hex")}`);
    assert.deepEqual(base58Decode(text, bytes.length), bytes);
  }
});

test("base58 of random values of every length up to 80 bytes is kit's, and decodes back", () => {
  for (let length = 0; length <= 80; length++) {
    for (let n = 0; n < 20; n++) {
      const bytes = new Uint8Array(randomBytes(length));
      // Some with leading zero bytes, which base58 writes as leading "1"s.
      if (n % 4 === 0) bytes.fill(0, 0, Math.min(length, n % 3));
      const text = base58Encode(bytes);
      assert.equal(text, kitText(bytes), `bytes ${Buffer.from(bytes).toString("hex")}`);
      assert.deepEqual(base58Decode(text, length), bytes);
    }
  }
});
