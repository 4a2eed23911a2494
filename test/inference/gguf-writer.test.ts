import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { readGgufFileInfo } from "node-llama-cpp";
import {
  bool,
  f32,
  f32Array,
  i32,
  i32Array,
  str,
  strArray,
  u32,
  writeGguf,
  type GgufTensor,
} from "../../src/inference/gguf-writer.ts";

describe("GGUF writer", () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "gguf-writer-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const tensors: GgufTensor[] = [
    // 3 floats: 12 bytes, so the next tensor must start on the next 32-byte boundary.
    { name: "a.weight", dims: [3], data: Float32Array.from([1, -2, 3.5]) },
    { name: "b.weight", dims: [2, 3], data: Float32Array.from([0, 1, 2, 3, 4, 5]) },
  ];

  it("writes metadata and tensors node-llama-cpp's GGUF reader reads back", async () => {
    const bytes = writeGguf(
      [
        ["general.architecture", str("llama")],
        ["test.u32", u32(4_000_000_000)],
        ["test.i32", i32(-7)],
        ["test.f32", f32(0.25)],
        ["test.bool", bool(true)],
        ["test.unicode", str("▁héllo")],
        ["test.strings", strArray(["<s>", "▁a", ""])],
        ["test.floats", f32Array([0.5, -1])],
        ["test.ints", i32Array([3, -4, 5])],
      ],
      tensors,
    );
    const file = path.join(dir, "kv.gguf");
    await writeFile(file, bytes);
    const info = await readGgufFileInfo(file, { logWarnings: false });

    assert.equal(info.version, 3);
    assert.equal(Number(info.tensorCount), 2);
    const meta = info.metadata as unknown as Record<string, Record<string, unknown>>;
    assert.equal(meta.general!.architecture, "llama");
    assert.deepEqual(meta.test, {
      u32: 4_000_000_000,
      i32: -7,
      f32: 0.25,
      bool: true,
      unicode: "▁héllo",
      strings: ["<s>", "▁a", ""],
      floats: [0.5, -1],
      ints: [3, -4, 5],
    });

    const infos = info.tensorInfo!;
    assert.deepEqual(
      infos.map((t) => [t.name, t.dimensions.map(Number), t.ggmlType, Number(t.offset)]),
      [
        ["a.weight", [3], 0, 0],
        ["b.weight", [2, 3], 0, 32],
      ],
    );
    // The data section starts aligned, and each tensor's bytes sit at its recorded offset.
    assert.equal(info.infoEndOffset! % 32, 0);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    for (const [i, t] of infos.entries()) {
      const start = Number(t.fileOffset);
      const values = tensors[i]!.data;
      for (let j = 0; j < values.length; j++) assert.equal(view.getFloat32(start + j * 4, true), values[j]);
    }
    assert.equal(bytes.length % 32, 0);
  });

  it("honours a non-default general.alignment", async () => {
    const bytes = writeGguf([["general.alignment", u32(64)]], tensors);
    const file = path.join(dir, "aligned.gguf");
    await writeFile(file, bytes);
    const info = await readGgufFileInfo(file, { logWarnings: false });
    assert.deepEqual(info.tensorInfo!.map((t) => Number(t.offset)), [0, 64]);
    assert.equal(info.infoEndOffset! % 64, 0);
  });

  it("is deterministic", () => {
    const kv = [["x", f32Array([1, 2])]] as const;
    assert.deepEqual(writeGguf(kv, tensors), writeGguf(kv, tensors));
  });

  it("rejects malformed input", () => {
    assert.throws(() => writeGguf([], [{ name: "t", dims: [2, 2], data: new Float32Array(3) }]), /hold 4 values/);
    assert.throws(() => writeGguf([["k", u32(1)], ["k", u32(2)]], []), /duplicate GGUF key/);
    assert.throws(() => writeGguf([["k", u32(-1)]], []), /not an integer/);
    assert.throws(() => writeGguf([["k", i32(2 ** 31)]], []), /not an integer/);
    assert.throws(() => writeGguf([], [tensors[0]!, tensors[0]!]), /duplicate tensor/);
    assert.throws(() => writeGguf([], [{ name: "n".repeat(64), dims: [1], data: new Float32Array(1) }]), /too long/);
  });
});
