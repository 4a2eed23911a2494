/**
 * The committed program/escrow.so is an sBPF version 0 shared object that LiteSVM's loader and
 * verifier accept and that runs: tests load these bytes, never a fresh compile.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { LiteSVM } from "litesvm";
import { addressBytes } from "../../src/chain/addresses.ts";
import { ESCROW_PROGRAM } from "../../src/chain/escrow-program/index.ts";
import { EscrowChain, PROGRAM_PATH, customError, nativeOf } from "./harness.ts";

test("escrow.so is an ELF64 little-endian BPF shared object with e_flags 0 (sBPF v0)", () => {
  const elf = readFileSync(PROGRAM_PATH);
  assert.deepEqual([...elf.subarray(0, 4)], [0x7f, 0x45, 0x4c, 0x46]);
  assert.equal(elf[4], 2, "ELF64");
  assert.equal(elf[5], 1, "little-endian");
  assert.equal(elf.readUInt16LE(0x10), 3, "ET_DYN");
  assert.equal(elf.readUInt16LE(0x12), 247, "EM_BPF");
  assert.equal(elf.readUInt32LE(0x30), 0, "e_flags 0 is sBPF version 0");
  const entry = Number(elf.readBigUInt64LE(0x18));
  assert.ok(entry > 0 && entry % 8 === 0 && entry < elf.length, "entry is an instruction inside the file");
});

/** Section headers of the program ELF, by name. */
function sections(elf: Buffer): Map<string, { address: number; offset: number; size: number; link: number }> {
  const shoff = Number(elf.readBigUInt64LE(0x28));
  const count = elf.readUInt16LE(0x3c);
  const names = shoff + 64 * elf.readUInt16LE(0x3e);
  const namesAt = Number(elf.readBigUInt64LE(names + 0x18));
  const out = new Map<string, { address: number; offset: number; size: number; link: number }>();
  for (let i = 1; i < count; i++) {
    const at = shoff + 64 * i;
    const nameAt = namesAt + elf.readUInt32LE(at);
    const name = elf.toString("latin1", nameAt, elf.indexOf(0, nameAt));
    out.set(name, {
      address: Number(elf.readBigUInt64LE(at + 0x10)),
      offset: Number(elf.readBigUInt64LE(at + 0x18)),
      size: Number(elf.readBigUInt64LE(at + 0x20)),
      link: elf.readUInt32LE(at + 0x28),
    });
  }
  return out;
}

test("the linker's output: addresses are offsets, and only syscall calls are left to the loader", () => {
  const elf = readFileSync(PROGRAM_PATH);
  const s = sections(elf);
  assert.deepEqual([...s.keys()], [".text", ".rodata", ".dynamic", ".dynsym", ".dynstr", ".rel.dyn", ".shstrtab"]);
  for (const name of [".text", ".rodata", ".dynamic", ".dynsym", ".dynstr", ".rel.dyn"]) {
    assert.equal(s.get(name)!.address, s.get(name)!.offset, `${name} is loaded at its file offset`);
  }
  const text = s.get(".text")!;
  const rel = s.get(".rel.dyn")!;
  const dynsym = s.get(".dynsym")!;
  const dynstr = s.get(".dynstr")!;
  const syscalls = new Set<string>();
  for (let at = rel.offset; at < rel.offset + rel.size; at += 16) {
    const site = Number(elf.readBigUInt64LE(at));
    const info = elf.readBigUInt64LE(at + 8);
    assert.equal(info & 0xffffffffn, 10n, "R_BPF_64_32");
    assert.ok(site >= text.offset && site < text.offset + text.size && (site - text.offset) % 8 === 0);
    assert.equal(elf[site], 0x85, "a call instruction");
    assert.equal(elf.readInt32LE(site + 4), -1, "left for the loader to bind");
    const symbol = dynsym.offset + 24 * Number(info >> 32n);
    const nameAt = dynstr.offset + elf.readUInt32LE(symbol);
    syscalls.add(elf.toString("latin1", nameAt, elf.indexOf(0, nameAt)));
    assert.equal(elf.readUInt16LE(symbol + 6), 0, "an undefined symbol");
  }
  assert.deepEqual([...syscalls].filter((n) => !n.startsWith("sol_")), []);
  assert.ok(syscalls.has("sol_invoke_signed_c") && syscalls.has("sol_try_find_program_address"));
  // Every lddw into the program region (0x1_0000_0000 + offset) points inside the file; other
  // lddw values are plain 64-bit constants.
  let dataLoads = 0;
  for (let at = text.offset; at < text.offset + text.size; at += 8) {
    if (elf[at] !== 0x18) continue;
    const value = BigInt(elf.readUInt32LE(at + 4)) | (BigInt(elf.readUInt32LE(at + 12)) << 32n);
    if (value >> 32n === 1n) {
      assert.ok(value - 0x1_0000_0000n < BigInt(elf.length), `lddw at ${at} points outside the program`);
      dataLoads++;
    }
    at += 8;
  }
  assert.ok(dataLoads > 0, "the program loads its read-only data (program ids, seeds) by address");
});

test("LiteSVM loads it (running the verifier) and it executes: unknown data is refused with our error", async () => {
  const svm = nativeOf(new LiteSVM());
  assert.doesNotThrow(() => svm.addProgram(addressBytes(ESCROW_PROGRAM), readFileSync(PROGRAM_PATH)));
  const truncated = readFileSync(PROGRAM_PATH).subarray(0, 1000);
  assert.throws(() => svm.addProgram(addressBytes(ESCROW_PROGRAM), truncated), "a broken ELF is rejected");

  const chain = await EscrowChain.open();
  const sent = chain.send([{ programAddress: ESCROW_PROGRAM, accounts: [], data: Uint8Array.of(200) }]);
  assert.equal(sent.err, customError("invalidInstruction"));
  assert.ok(sent.logs.some((l) => l.includes(`Program ${ESCROW_PROGRAM} consumed`)), "the program ran");
});
