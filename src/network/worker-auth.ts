/**
 * How a worker proves it holds the key of the address it claims: it signs the gateway's fresh
 * challenge inside a message bound to this protocol and to the gateway it dialed.
 *
 * The host is part of the message so a malicious gateway cannot relay another gateway's
 * challenge to a worker and pass its answer off as that worker: the worker signs the host it
 * dialed (the HTTP Host header of its upgrade request), the real gateway expects its own. The
 * prefix keeps the signature useless as anything else the key signs, such as a job's proof.
 */
export { publicKeyOf, verifyEd25519 } from "../core/index.ts";

export function authMessage(host: string, challenge: string): Uint8Array {
  return new TextEncoder().encode(`svc-worker-auth:v1:${host}:${challenge}`);
}
