/**
 * What an Ed25519 signature and its check cost, with libsodium (src/core/keys.ts) against Node's
 * OpenSSL (node:crypto, with the key objects made once, so only signing and checking count): the
 * gateway checks a worker's proof and signs a chain transaction or two for every job, and the
 * worker signs every proof. Interleaved rounds on the same messages; prints each round's means.
 *
 * Run: node --import tsx bench/ed25519.ts [rounds=5]
 */
import { createPrivateKey, createPublicKey, sign, verify } from "node:crypto";
import { performance } from "node:perf_hooks";
import { generateKeypair, verifyEd25519 } from "../src/core/index.ts";

const ROUNDS = Number(process.argv[2] ?? 5);
const PER_ROUND = 2_000;

const signer = generateKeypair();
const der = (prefix: string, key: Uint8Array) => Buffer.concat([Buffer.from(prefix, "hex"), key]);
const privateKey = createPrivateKey({ key: der("302e020100300506032b657004220420", signer.secretKey.subarray(0, 32)), format: "der", type: "pkcs8" });
const publicKey = createPublicKey({ key: der("302a300506032b6570032100", signer.publicKey), format: "der", type: "spki" });
// A proof's message is about this long: a job id and an output hash.
const messages = Array.from({ length: PER_ROUND }, (_, i) => new TextEncoder().encode(`job_${i.toString().padStart(26, "0")}:${"ab".repeat(32)}`));
const signatures = messages.map((m) => signer.sign(m));

function microsEach(fn: (i: number) => unknown): number {
  const start = performance.now();
  for (let i = 0; i < PER_ROUND; i++) fn(i);
  return ((performance.now() - start) * 1000) / PER_ROUND;
}

console.log("µs each:   sign: OpenSSL  libsodium   check: OpenSSL  libsodium");
for (let round = 0; round <= ROUNDS; round++) {
  const signOpenSsl = microsEach((i) => sign(null, messages[i]!, privateKey));
  const signSodium = microsEach((i) => signer.sign(messages[i]!));
  const checkOpenSsl = microsEach((i) => verify(null, messages[i]!, publicKey, signatures[i]!) || process.exit(1));
  const checkSodium = microsEach((i) => verifyEd25519(signer.address, messages[i]!, signatures[i]!) || process.exit(1));
  // Round 0 warms up.
  if (round === 0) continue;
  const cell = (us: number) => us.toFixed(1).padStart(9);
  console.log(`round ${round}:   ${cell(signOpenSsl)}  ${cell(signSodium)}          ${cell(checkOpenSsl)}  ${cell(checkSodium)}`);
}
