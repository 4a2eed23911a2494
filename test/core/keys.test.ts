/**
 * Ed25519 signing and verification by address: right answers the first time and from the key cache
 * after, the same signatures as OpenSSL's, and the forgeries a lax check would let through refused.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { createPrivateKey, createPublicKey, sign, verify } from "node:crypto";
import { base58Encode, generateKeypair, keypairFromSecretKey, verifyEd25519 } from "../../src/core/index.ts";
import { GROUP_ORDER, smallOrderForgery } from "../support/small-order-key.ts";

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

test("signatures are plain Ed25519: OpenSSL checks ours, and ours checks OpenSSL's", () => {
  const signer = generateKeypair();
  const message = new TextEncoder().encode("settlement of job_02");
  const der = (prefix: string, key: Uint8Array) => Buffer.concat([Buffer.from(prefix, "hex"), key]);
  const publicKey = createPublicKey({ key: der("302a300506032b6570032100", signer.publicKey), format: "der", type: "spki" });
  assert.equal(verify(null, message, publicKey, signer.sign(message)), true);
  const privateKey = createPrivateKey({ key: der("302e020100300506032b657004220420", signer.secretKey.subarray(0, 32)), format: "der", type: "pkcs8" });
  assert.equal(verifyEd25519(signer.address, message, new Uint8Array(sign(null, message, privateKey))), true);
});

test("a keypair read from the CLI's 64 bytes signs as the one written, and a mismatched half is refused", () => {
  const written = generateKeypair();
  const read = keypairFromSecretKey(written.secretKey);
  assert.equal(read.address, written.address);
  const message = new TextEncoder().encode("proof");
  assert.deepEqual(read.sign(message), written.sign(message));
  const mismatched = Uint8Array.from(written.secretKey);
  mismatched.set(generateKeypair().publicKey, 32);
  assert.throws(() => keypairFromSecretKey(mismatched), /does not match its public key/);
});

test("a signature whose scalar is not reduced (S + L, the same point equation) is refused", () => {
  const signer = generateKeypair();
  const message = new TextEncoder().encode("job_03 output hash");
  const signature = signer.sign(message);
  // The group order added to S (the signature's last 32 bytes, little-endian).
  let s = 0n;
  for (let i = 63; i >= 32; i--) s = (s << 8n) | BigInt(signature[i]!);
  let raised = s + GROUP_ORDER;
  const malleated = Uint8Array.from(signature);
  for (let i = 32; i < 64; i++, raised >>= 8n) malleated[i] = Number(raised & 0xffn);
  assert.equal(verifyEd25519(signer.address, message, signature), true);
  assert.equal(verifyEd25519(signer.address, message, malleated), false);
});

test("a small-order key verifies nothing, though under it one signature fits every message", () => {
  // A worker registered with such a key could claim any output as the one it signed.
  const { address, signature } = smallOrderForgery();
  for (const text of ["output one", "output two"]) assert.equal(verifyEd25519(address, new TextEncoder().encode(text), signature), false);
});
