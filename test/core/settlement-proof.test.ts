/**
 * The settlement proof's Merkle tree against RFC 6962's published test vectors (the Certificate
 * Transparency reference tree of eight leaves), receipts that verify and receipts that do not, and
 * job ids carried as their 16-byte ULID.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { newId } from "../../src/core/ids.ts";
import { jobIdOfKey, jobKey } from "../../src/core/index.ts";
import { auditPath, auditPaths, leafBytes, leafHash, merkleRoot, rootFromPath, settlementMessage } from "../../src/core/settlement-proof.ts";

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");
const bytes = (h: string) => new Uint8Array(Buffer.from(h, "hex"));

/** RFC 6962's reference leaves and the roots of the trees of their first 1..8 leaves. */
const CT_LEAVES = ["", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f"].map(bytes);
const CT_ROOTS = [
  "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
  "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
  "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
  "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
  "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
  "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
  "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
  "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
];

describe("settlement proofs", () => {
  test("the Merkle root of every prefix of the reference leaves is RFC 6962's", () => {
    const hashes = CT_LEAVES.map(leafHash);
    for (let n = 1; n <= 8; n++) assert.equal(hex(merkleRoot(hashes.slice(0, n))), CT_ROOTS[n - 1], `${n} leaves`);
  });

  test("audit paths match the reference ones and lead back to the root for every leaf of every size", () => {
    const hashes = CT_LEAVES.map(leafHash);
    assert.deepEqual(auditPath(hashes, 5).map(hex), [
      "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
      "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
      "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ]);
    for (let size = 1; size <= 8; size++) {
      const tree = hashes.slice(0, size);
      for (let i = 0; i < size; i++) {
        assert.equal(hex(rootFromPath(tree[i]!, i, size, auditPath(tree, i))!), CT_ROOTS[size - 1], `leaf ${i} of ${size}`);
      }
    }
  });

  test("every leaf's path at once leads back to the root, for trees of 1 to 70 leaves", () => {
    const hashes = Array.from({ length: 70 }, (_, i) => leafHash(Uint8Array.of(i)));
    for (let size = 1; size <= 70; size++) {
      const tree = hashes.slice(0, size);
      const root = hex(merkleRoot(tree));
      const paths = auditPaths(tree);
      assert.equal(paths.length, size);
      paths.forEach((path, i) => assert.equal(hex(rootFromPath(tree[i]!, i, size, path)!), root, `leaf ${i} of ${size}`));
    }
    assert.deepEqual(auditPaths([]), []);
  });

  test("a changed leaf, a swapped position, a changed path or a wrong size does not lead to the root", () => {
    const leaves = Array.from({ length: 64 }, (_, i) => leafBytes({ jobId: newId("job"), outputHash: new Uint8Array(32).fill(i), promptTokens: i, completionTokens: 2 * i }));
    const hashes = leaves.map(leafHash);
    const root = hex(merkleRoot(hashes));
    const path = auditPath(hashes, 17);
    assert.equal(hex(rootFromPath(hashes[17]!, 17, 64, path)!), root);
    const edited = Uint8Array.from(leaves[17]!);
    edited[edited.length - 1]! ^= 1;
    assert.notEqual(hex(rootFromPath(leafHash(edited), 17, 64, path) ?? new Uint8Array()), root, "a changed token count");
    assert.notEqual(hex(rootFromPath(hashes[17]!, 16, 64, path) ?? new Uint8Array()), root, "another position");
    assert.notEqual(hex(rootFromPath(hashes[17]!, 17, 64, [...path.slice(0, -1), new Uint8Array(32)]) ?? new Uint8Array()), root);
    assert.equal(rootFromPath(hashes[17]!, 17, 65, path), null, "a path too short for the size");
    assert.notEqual(hex(rootFromPath(leaves[17]!, 17, 64, path) ?? new Uint8Array()), root, "a leaf's bytes are not its hash");
  });

  test("the settlement message names the table, the root and each slot's charge", () => {
    const table = new Uint8Array(32).fill(7), root = new Uint8Array(32).fill(9);
    const m = settlementMessage(table, root, [{ slot: 3, charge: 10_000n }, { slot: 200, charge: 2n ** 64n - 1n }]);
    assert.equal(new TextDecoder().decode(m.subarray(0, 12)), "svc-settle-1");
    assert.deepEqual(m.subarray(12, 44), table);
    assert.deepEqual(m.subarray(44, 76), root);
    assert.deepEqual([...m.subarray(76)], [2, 3, 0x10, 0x27, 0, 0, 0, 0, 0, 0, 200, 255, 255, 255, 255, 255, 255, 255, 255]);
    assert.throws(() => settlementMessage(table, root, []), RangeError);
  });

  test("a job id travels as its ULID's 16 bytes and comes back the same", () => {
    for (let i = 0; i < 100; i++) {
      const id = newId("job");
      assert.equal(jobIdOfKey(jobKey(id)), id);
    }
    assert.deepEqual(jobKey("job_00000000000000000000000001"), Uint8Array.of(...new Array(15).fill(0), 1));
    assert.equal(jobIdOfKey(new Uint8Array(16).fill(255)), "job_7ZZZZZZZZZZZZZZZZZZZZZZZZZ");
    assert.throws(() => jobKey("job_80000000000000000000000000"), TypeError, "beyond 128 bits");
    assert.throws(() => jobKey("wh_00000000000000000000000001"), TypeError);
  });
});
