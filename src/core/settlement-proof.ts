/**
 * A worker's proof of a batch of jobs: one Ed25519 signature over a settlement message that names
 * an escrow table, the Merkle root of the jobs' leaves and, in the leaves' order, each job's slot
 * of the table and its charge. The escrow program checks the signature and pays each slot's charge;
 * anyone holding a job's leaf and its audit path can check that the worker signed exactly that
 * job's output.
 *
 * The tree is RFC 6962's Merkle Tree Hash over SHA-256: a leaf is hashed as `0x00 ‖ leaf`, a node
 * as `0x01 ‖ left ‖ right`, and a tree of n leaves splits at the largest power of two below n, so
 * no leaf can pose as a node and trees of every size are well defined.
 */
import { createHash } from "node:crypto";

/** What the worker attests for one job. */
export interface SettlementLeaf {
  jobId: string;
  /** SHA-256 of the job's output text (outputHash's digest), 32 bytes. */
  outputHash: Uint8Array;
  promptTokens: number;
  completionTokens: number;
}

/** One job's line of a settlement: its slot of the table and its charge in USDC base units. */
export interface SettlementEntry {
  slot: number;
  charge: bigint;
}

export const SETTLEMENT_DOMAIN = "svc-settle-1";
const ENTRY_SIZE = 9;

const sha256 = (...parts: Uint8Array[]): Uint8Array => {
  const h = createHash("sha256");
  for (const p of parts) h.update(p);
  return new Uint8Array(h.digest());
};

/** The leaf's bytes: job id length u8, job id, output hash, prompt and completion tokens as u32 LE. */
export function leafBytes(leaf: SettlementLeaf): Uint8Array {
  const id = new TextEncoder().encode(leaf.jobId);
  if (id.length === 0 || id.length > 255) throw new RangeError("a job id is 1-255 bytes");
  if (leaf.outputHash.length !== 32) throw new RangeError("an output hash is 32 bytes");
  const out = new Uint8Array(1 + id.length + 32 + 8);
  const view = new DataView(out.buffer);
  out[0] = id.length;
  out.set(id, 1);
  out.set(leaf.outputHash, 1 + id.length);
  view.setUint32(33 + id.length, leaf.promptTokens, true);
  view.setUint32(37 + id.length, leaf.completionTokens, true);
  return out;
}

export const leafHash = (bytes: Uint8Array): Uint8Array => sha256(Uint8Array.of(0), bytes);
const nodeHash = (left: Uint8Array, right: Uint8Array): Uint8Array => sha256(Uint8Array.of(1), left, right);

/** The largest power of two strictly below n (n ≥ 2). */
const splitOf = (n: number): number => 2 ** Math.floor(Math.log2(n - 1));

/** RFC 6962's Merkle Tree Hash of leaf hashes. */
export function merkleRoot(hashes: readonly Uint8Array[]): Uint8Array {
  if (hashes.length === 0) return sha256();
  if (hashes.length === 1) return hashes[0]!;
  const k = splitOf(hashes.length);
  return nodeHash(merkleRoot(hashes.slice(0, k)), merkleRoot(hashes.slice(k)));
}

/** The audit path of leaf `index`: the sibling hashes from the leaf up to the root. */
export function auditPath(hashes: readonly Uint8Array[], index: number): Uint8Array[] {
  if (index < 0 || index >= hashes.length) throw new RangeError(`no leaf ${index} in a tree of ${hashes.length}`);
  return auditPaths(hashes)[index]!;
}

/**
 * Every leaf's audit path, in leaf order. Each node is hashed once, so a settlement of n jobs
 * costs about 2n hashes, where n calls of auditPath would hash each subtree again for each leaf.
 */
export function auditPaths(hashes: readonly Uint8Array[]): Uint8Array[][] {
  return hashes.length === 0 ? [] : subtree(hashes).paths;
}

/** A subtree's root, and each of its leaves' path up to that root. */
function subtree(hashes: readonly Uint8Array[]): { root: Uint8Array; paths: Uint8Array[][] } {
  if (hashes.length === 1) return { root: hashes[0]!, paths: [[]] };
  const k = splitOf(hashes.length);
  const left = subtree(hashes.slice(0, k));
  const right = subtree(hashes.slice(k));
  for (const path of left.paths) path.push(right.root);
  for (const path of right.paths) path.push(left.root);
  return { root: nodeHash(left.root, right.root), paths: [...left.paths, ...right.paths] };
}

/** The root that leaf hash `hash` at `index` of a tree of `size` leaves and `path` lead to (RFC 9162, 2.1.3.2). */
export function rootFromPath(hash: Uint8Array, index: number, size: number, path: readonly Uint8Array[]): Uint8Array | null {
  if (index < 0 || index >= size) return null;
  let fn = index, sn = size - 1, r = hash;
  for (const p of path) {
    if (sn === 0) return null;
    if (fn % 2 === 1 || fn === sn) {
      r = nodeHash(p, r);
      if (fn % 2 === 0) while (fn % 2 === 0 && fn !== 0) { fn = Math.floor(fn / 2); sn = Math.floor(sn / 2); }
    } else {
      r = nodeHash(r, p);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 ? r : null;
}

/** The settlement's data from the root on, as settle_batch carries it: root, count u8, then slot u8 and charge u64 LE each. */
export function settlementMessageTail(root: Uint8Array, entries: readonly SettlementEntry[]): Uint8Array {
  if (root.length !== 32) throw new RangeError("a Merkle root is 32 bytes");
  if (entries.length === 0 || entries.length > 255) throw new RangeError("a settlement has 1-255 entries");
  const out = new Uint8Array(33 + entries.length * ENTRY_SIZE);
  const view = new DataView(out.buffer);
  out.set(root, 0);
  out[32] = entries.length;
  entries.forEach((e, i) => {
    out[33 + i * ENTRY_SIZE] = e.slot;
    view.setBigUint64(34 + i * ENTRY_SIZE, e.charge, true);
  });
  return out;
}

/** What the worker signs: `svc-settle-1`, the table's address (32 bytes), then the tail above. */
export function settlementMessage(table: Uint8Array, root: Uint8Array, entries: readonly SettlementEntry[]): Uint8Array {
  if (table.length !== 32) throw new RangeError("a table address is 32 bytes");
  const domain = new TextEncoder().encode(SETTLEMENT_DOMAIN);
  const tail = settlementMessageTail(root, entries);
  const out = new Uint8Array(domain.length + 32 + tail.length);
  out.set(domain, 0);
  out.set(table, domain.length);
  out.set(tail, domain.length + 32);
  return out;
}

/** The settlement message of `jobs`, in order: each job's leaf under the root, and its slot and charge. */
export function settlementMessageOf(table: Uint8Array, jobs: readonly (SettlementLeaf & SettlementEntry)[]): Uint8Array {
  const root = merkleRoot(jobs.map((job) => leafHash(leafBytes(job))));
  return settlementMessage(table, root, jobs.map(({ slot, charge }) => ({ slot, charge })));
}

/** A settlement message read back: its table, root and entries; null when `bytes` is not one. */
export function parseSettlementMessage(bytes: Uint8Array): { table: Uint8Array; root: Uint8Array; entries: SettlementEntry[] } | null {
  const domain = new TextEncoder().encode(SETTLEMENT_DOMAIN);
  const head = domain.length + 64;
  if (bytes.length < head + 1 || !Buffer.from(bytes.subarray(0, domain.length)).equals(domain)) return null;
  const count = bytes[head]!;
  if (count === 0 || bytes.length !== head + 1 + count * ENTRY_SIZE) return null;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const entries = Array.from({ length: count }, (_, i) => ({ slot: bytes[head + 1 + i * ENTRY_SIZE]!, charge: view.getBigUint64(head + 2 + i * ENTRY_SIZE, true) }));
  return { table: bytes.slice(domain.length, domain.length + 32), root: bytes.slice(domain.length + 32, head), entries };
}
