/** Ed25519 signing and verification by address: right answers the first time and from the key cache after, on the event loop and on the thread pool alike. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { base58Encode, generateKeypair, verifyEd25519, verifyEd25519InBackground } from "../../src/core/index.ts";

test("verifies a signer's signature and refuses everything else, the first time and after", async () => {
  const signer = generateKeypair();
  const other = generateKeypair();
  const message = new TextEncoder().encode("job_01 output hash");
  const signature = signer.sign(message);
  // 32 bytes that decode to no point on the curve (y = 2 has no x), and a string that is not base58 of 32 bytes.
  const offCurve = base58Encode(Uint8Array.from({ length: 32 }, (_, i) => (i === 0 ? 2 : 0)));
  // Ed25519 is deterministic: the thread pool's signature is the event loop's.
  assert.deepEqual(await signer.signInBackground(message), signature);
  for (let round = 0; round < 2; round++) {
    for (const check of [verifyEd25519, verifyEd25519InBackground]) {
      assert.equal(await check(signer.address, message, signature), true);
      assert.equal(await check(signer.address, new TextEncoder().encode("job_01 other hash"), signature), false);
      assert.equal(await check(other.address, message, signature), false);
      assert.equal(await check(signer.address, message, signature.subarray(0, 63)), false);
      assert.equal(await check(offCurve, message, signature), false);
      assert.equal(await check("not-an-address", message, signature), false);
    }
  }
});
