/** Resource identifiers: a prefix plus a ULID, so sorting ids sorts by creation time. */
import { randomBytes } from "node:crypto";
import { monotonicFactory } from "ulidx";

/**
 * Cryptographic random bytes drawn from a pool: ulidx's own source makes one getRandomValues
 * call per character, 16 per new id, which showed up in the request path's profile. A byte over
 * 256 maps each of the 32 characters from exactly 8 byte values, so the draw stays uniform.
 */
let pool = randomBytes(4096);
let used = 0;
function randomFraction(): number {
  if (used === pool.length) {
    pool = randomBytes(4096);
    used = 0;
  }
  return pool[used++]! / 256;
}

const ulid = monotonicFactory(randomFraction);

export type IdPrefix = "job" | "wh" | "evt" | "pay" | "node";

export function newId(prefix: IdPrefix): string {
  return `${prefix}_${ulid()}`;
}

const ID_PATTERN = /^(job|wh|evt)_[0-9A-HJKMNP-TV-Z]{26}$/;

export function isId(prefix: IdPrefix, value: string): boolean {
  const m = ID_PATTERN.exec(value);
  return m !== null && m[1] === prefix;
}

/** The ULID part of an id (26 characters); used where a short unique seed is needed on-chain. */
export function idBody(id: string): string {
  return id.slice(id.indexOf("_") + 1);
}

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/** A job id's ULID as its 16 bytes (big-endian 128 bits): how a batched lock carries the id on-chain. */
export function jobKey(jobId: string): Uint8Array {
  if (!isId("job", jobId)) throw new TypeError(`not a job id: ${jobId}`);
  let value = 0n;
  for (const c of idBody(jobId)) value = (value << 5n) | BigInt(CROCKFORD.indexOf(c));
  if (value >> 128n !== 0n) throw new TypeError(`a ULID is 128 bits: ${jobId}`);
  const out = new Uint8Array(16);
  for (let i = 15; i >= 0; i--, value >>= 8n) out[i] = Number(value & 0xffn);
  return out;
}

/** The job id whose key `key` is (jobKey's inverse). */
export function jobIdOfKey(key: Uint8Array): string {
  if (key.length !== 16) throw new TypeError("a job key is 16 bytes");
  let value = key.reduce((v, b) => (v << 8n) | BigInt(b), 0n);
  let body = "";
  for (let i = 0; i < 26; i++, value >>= 5n) body = CROCKFORD[Number(value & 31n)]! + body;
  return `job_${body}`;
}
