/**
 * Ed25519 keypairs. Files use the Solana CLI layout (a JSON array of the 32-byte seed followed by
 * the 32-byte public key) so `solana-keygen` and wallets can read them; mode 0600.
 *
 * Signatures are made and checked with libsodium (sodium-native), not Node's OpenSSL: libsodium
 * takes about half of OpenSSL 3.0's time for both (`npm run bench:ed25519` measures each on the
 * same messages: on this machine about 45 µs against 95 a check). A loaded gateway checks a
 * worker's proof and signs a chain transaction or two for every job, on its busiest thread.
 * libsodium's check is also the stricter one: it refuses small-order keys, under which OpenSSL
 * accepted one signature for every message (test/core/keys.test.ts), so a worker registered with
 * such a key could claim any output as the one it signed.
 */
import { mkdir, open, readFile, rename } from "node:fs/promises";
import { join } from "node:path";
import type { Address } from "@solana/kit";
import sodium from "sodium-native";
import { base58Decode, base58Encode } from "./base58.ts";
import { BoundedMap } from "./bounded-map.ts";

export interface Signer {
  readonly address: Address;
  readonly publicKey: Uint8Array;
  /**
   * On the calling thread. Handed to libuv's pool instead, a signature cost a loaded 2-core machine
   * more than it saved: see verifyEd25519.
   */
  sign(message: Uint8Array): Uint8Array;
}

export interface Keypair extends Signer {
  /** The 32-byte private seed followed by the public key, as the Solana CLI stores it. */
  readonly secretKey: Uint8Array;
}

/** The raw 32-byte public key of a canonical base58 address, or undefined. */
export function publicKeyOf(address: string): Uint8Array | undefined {
  try {
    const key = base58Decode(address, 32);
    // One address, one spelling: leading "1"s could otherwise encode the same key differently.
    return base58Encode(key) === address ? key : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Public keys by address (null: not a canonical address). Decoding one costs a few µs, and the
 * gateway checks the same few workers' proofs again and again.
 */
const verifyingKeys = new BoundedMap<Buffer | null>(10_000);

function verifyingKey(address: string): Buffer | null {
  let key = verifyingKeys.get(address);
  if (key === undefined) {
    const raw = publicKeyOf(address);
    key = raw === undefined ? null : Buffer.from(raw);
    verifyingKeys.set(address, key);
  }
  return key;
}

/** The bytes of `view` as a Buffer, without a copy (sodium-native's types ask for Buffers). */
function bufferOf(view: Uint8Array): Buffer {
  return Buffer.from(view.buffer, view.byteOffset, view.byteLength);
}

/**
 * Whether `signature` is the Ed25519 signature of `message` by the key of `address`, checked on
 * the calling thread. Checked on libuv's thread pool instead, a gateway under load at 32
 * connections answers fewer requests a second (`npm run bench:load`): each hand-off wakes a pool
 * thread, which on a machine whose two cores are busy takes the core from the thread that woke it.
 */
export function verifyEd25519(address: string, message: Uint8Array, signature: Uint8Array): boolean {
  const key = verifyingKey(address);
  if (key === null || signature.length !== sodium.crypto_sign_BYTES) return false;
  return sodium.crypto_sign_verify_detached(bufferOf(signature), bufferOf(message), key);
}

/** A keypair from libsodium's 64-byte secret key, which is the CLI's layout: seed, then public key. */
function fromSodiumSecretKey(secretKey: Buffer): Keypair {
  const publicKey = new Uint8Array(secretKey.subarray(32));
  return {
    address: base58Encode(publicKey) as Address,
    publicKey,
    secretKey: new Uint8Array(secretKey),
    sign: (message) => {
      const signature = new Uint8Array(sodium.crypto_sign_BYTES);
      sodium.crypto_sign_detached(bufferOf(signature), bufferOf(message), secretKey);
      return signature;
    },
  };
}

export function generateKeypair(): Keypair {
  const secretKey = Buffer.alloc(sodium.crypto_sign_SECRETKEYBYTES);
  sodium.crypto_sign_keypair(Buffer.alloc(sodium.crypto_sign_PUBLICKEYBYTES), secretKey);
  return fromSodiumSecretKey(secretKey);
}

/** The keypair an Ed25519 seed (32 bytes) makes: the same seed, the same key. */
export function keypairFromSeed(seed: Uint8Array): Keypair {
  if (seed.length !== 32) throw new TypeError("an Ed25519 seed is 32 bytes");
  const secretKey = Buffer.alloc(sodium.crypto_sign_SECRETKEYBYTES);
  sodium.crypto_sign_seed_keypair(Buffer.alloc(sodium.crypto_sign_PUBLICKEYBYTES), secretKey, Buffer.from(seed));
  return fromSodiumSecretKey(secretKey);
}

/** From the CLI's 64 bytes (seed + public key); the public key is checked against the seed. */
export function keypairFromSecretKey(secretKey: Uint8Array): Keypair {
  if (secretKey.length !== 64) throw new TypeError("a secret key is 64 bytes");
  const derived = Buffer.alloc(sodium.crypto_sign_SECRETKEYBYTES);
  sodium.crypto_sign_seed_keypair(Buffer.alloc(sodium.crypto_sign_PUBLICKEYBYTES), derived, Buffer.from(secretKey.subarray(0, 32)));
  if (!derived.subarray(32).equals(secretKey.subarray(32))) throw new Error("secret key does not match its public key");
  return fromSodiumSecretKey(derived);
}

/** Reads `<dir>/<name>.json`; undefined when there is no such file, never creating one. */
export async function readKeypair(dir: string, name: string): Promise<Keypair | undefined> {
  let text: string;
  try {
    text = await readFile(join(dir, `${name}.json`), "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
  return keypairFromSecretKey(Uint8Array.from(JSON.parse(text) as number[]));
}

/**
 * Reads `<dir>/<name>.json`, or creates it. A new key is written to a temporary file, synced and
 * renamed, so a crash never leaves a truncated key that would strand the funds it controls.
 */
export async function loadOrCreateKeypair(dir: string, name: string): Promise<Keypair> {
  const existing = await readKeypair(dir, name);
  if (existing) return existing;
  const path = join(dir, `${name}.json`);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const kp = generateKeypair();
  const tmp = `${path}.tmp`;
  const file = await open(tmp, "w", 0o600);
  try {
    await file.writeFile(JSON.stringify(Array.from(kp.secretKey)));
    await file.sync();
  } finally {
    await file.close();
  }
  await rename(tmp, path);
  const dirHandle = await open(dir, "r");
  try {
    await dirHandle.sync();
  } finally {
    await dirHandle.close();
  }
  return kp;
}
