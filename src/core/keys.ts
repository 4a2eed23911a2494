/**
 * Ed25519 keypairs. Files use the Solana CLI layout (a JSON array of the 32-byte seed followed by
 * the 32-byte public key) so `solana-keygen` and wallets can read them; mode 0600.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from "node:crypto";
import { mkdir, open, readFile, rename } from "node:fs/promises";
import { join } from "node:path";
import type { Address } from "@solana/kit";
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

const PKCS8_ED25519_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");
const ED25519_SPKI_PREFIX = Buffer.from("302a300506032b6570032100", "hex");

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
 * Public keys by address, as OpenSSL takes them (null: not a key). Making one costs about as much
 * as the verification itself, and the gateway verifies the same few workers' proofs again and again.
 */
const verifyingKeys = new BoundedMap<KeyObject | null>(10_000);

function verifyingKey(address: string): KeyObject | null {
  let key = verifyingKeys.get(address);
  if (key === undefined) {
    const raw = publicKeyOf(address);
    try {
      key = raw === undefined ? null : createPublicKey({ key: Buffer.concat([ED25519_SPKI_PREFIX, raw]), format: "der", type: "spki" });
    } catch {
      // A 32-byte string that is not a point on the curve.
      key = null;
    }
    verifyingKeys.set(address, key);
  }
  return key;
}

/**
 * Whether `signature` is the Ed25519 signature of `message` by the key of `address`, checked on
 * the calling thread (about 50 µs here). Checked on libuv's thread pool instead, as from
 * 2026-11-26 to stop 43, a gateway under load at 32 connections answered fewer requests a
 * second: each hand-off wakes a pool thread, which on a machine whose two cores are busy takes
 * the core from the thread that woke it (docs/performance.md, stop 43).
 */
export function verifyEd25519(address: string, message: Uint8Array, signature: Uint8Array): boolean {
  const key = verifyingKey(address);
  if (key === null || signature.length !== 64) return false;
  try {
    return verify(null, message, key, signature);
  } catch {
    return false;
  }
}

function fromPrivateKey(key: KeyObject): Keypair {
  const jwk = key.export({ format: "jwk" });
  const seed = Buffer.from(jwk.d!, "base64url");
  const publicKey = new Uint8Array(Buffer.from(jwk.x!, "base64url"));
  const secretKey = new Uint8Array(64);
  secretKey.set(seed, 0);
  secretKey.set(publicKey, 32);
  return {
    address: base58Encode(publicKey) as Address,
    publicKey,
    secretKey,
    sign: (message) => new Uint8Array(sign(null, message, key)),
  };
}

export function generateKeypair(): Keypair {
  return fromPrivateKey(generateKeyPairSync("ed25519").privateKey);
}

/** From the CLI's 64 bytes (seed + public key); the public key is checked against the seed. */
export function keypairFromSecretKey(secretKey: Uint8Array): Keypair {
  if (secretKey.length !== 64) throw new TypeError("a secret key is 64 bytes");
  const key = createPrivateKey({
    key: Buffer.concat([PKCS8_ED25519_PREFIX, secretKey.subarray(0, 32)]),
    format: "der",
    type: "pkcs8",
  });
  const kp = fromPrivateKey(key);
  if (!Buffer.from(kp.publicKey).equals(secretKey.subarray(32))) throw new Error("secret key does not match its public key");
  return kp;
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
