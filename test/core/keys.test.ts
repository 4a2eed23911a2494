/** Ed25519 signing and verification by address: right answers the first time and from the key cache after. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { base58Encode, generateKeypair, verifyEd25519 } from "../../src/core/index.ts";

test("verifies a signer's signature and refuses everything else, the first time and after", () => {
  const signer = generateKeypair();
  const other = generateKeypair();
  const message = new TextEncoder().encode("job_01 output hash");
  const signature = signer.sign(message);
  // 32 bytes that decode to no point on the curve (y = 2 has no x), and a string that is not base58 of 32 bytes.
  const offCurve = base58Encode(Uint8Array.from({ length: 32 }, (_, i) => (i === 0 ? 2 : 0)));
  // Ed25519 is deterministic: a proof signed again is the same proof.
  assert.deepEqual(signer.sign(message), signature);
  for (let round = 0; round < 2; round++) {
    assert.equal(verifyEd25519(signer.address, message, signature), true);
    assert.equal(verifyEd25519(signer.address, new TextEncoder().encode("job_01 other hash"), signature), false);
    assert.equal(verifyEd25519(other.address, message, signature), false);
    assert.equal(verifyEd25519(signer.address, message, signature.subarray(0, 63)), false);
    assert.equal(verifyEd25519(offCurve, message, signature), false);
    assert.equal(verifyEd25519("not-an-address", message, signature), false);
  }
});
