/**
 * How a worker proves it holds the key of the address it claims: it signs the gateway's fresh
 * challenge inside a message bound to this protocol and to the gateway it dialed.
 *
 * The host is part of the message so a malicious gateway cannot relay another gateway's
 * challenge to a worker and pass its answer off as that worker: the worker signs the host it
 * dialed (the HTTP Host header of its upgrade request), the real gateway expects its own. The
 * prefix keeps the signature useless as anything else the key signs, such as a job's proof.
 */
import { createPublicKey, verify } from "node:crypto";
import { base58Decode, base58Encode } from "../core/index.ts";

const ED25519_SPKI_PREFIX = Buffer.from("302a300506032b6570032100", "hex");

export function authMessage(host: string, challenge: string): Uint8Array {
  return new TextEncoder().encode(`svc-worker-auth:v1:${host}:${challenge}`);
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

export function verifyEd25519(address: string, message: Uint8Array, signature: Uint8Array): boolean {
  const raw = publicKeyOf(address);
  if (raw === undefined || signature.length !== 64) return false;
  try {
    const key = createPublicKey({ key: Buffer.concat([ED25519_SPKI_PREFIX, raw]), format: "der", type: "spki" });
    return verify(null, message, key, signature);
  } catch {
    // A 32-byte string that is not a point on the curve.
    return false;
  }
}
