/**
 * Links clang's BPF relocatable object into the shared object a Solana validator loads as an
 * sBPF version 0 program (`e_flags` 0). Every section's address equals its file offset; loads of
 * read-only data and internal calls are resolved here, and only syscall calls stay as dynamic
 * relocations against undefined symbols, which the loader resolves by name.
 */
import {
  R_BPF_64_32,
  R_BPF_64_64,
  R_BPF_64_ABS64,
  readObject,
  SHF_ALLOC,
  SHF_EXECINSTR,
  SHF_WRITE,
  type ObjectFile,
  type Section,
} from "./object.ts";
import { ElfWriter, type OutSection } from "./writer.ts";

/** Where the loader maps the program's bytes in the VM. */
export const MM_PROGRAM_START = 0x1_0000_0000n;
const OP_CALL = 0x85;
const OP_CALLX = 0x8d;
const OP_LDDW = 0x18;
const INSN = 8;

interface Layout {
  text: Section;
  rodata: Section[];
  /** Address of each allocated input section in the output file. */
  addressOf: Map<number, number>;
}

function allocated(obj: ObjectFile): Layout {
  const alloc = obj.sections.filter((s) => s.flags & SHF_ALLOC && s.bytes.length > 0);
  const writable = alloc.filter((s) => s.flags & SHF_WRITE);
  if (writable.length > 0) {
    throw new Error(`writable data is not allowed in a program: ${writable.map((s) => s.name).join(", ")} (make it const)`);
  }
  const code = alloc.filter((s) => s.flags & SHF_EXECINSTR);
  if (code.length !== 1 || code[0]!.name !== ".text") {
    throw new Error(`expected all code in one .text section, got ${code.map((s) => s.name).join(", ") || "none"}`);
  }
  return { text: code[0]!, rodata: alloc.filter((s) => !(s.flags & SHF_EXECINSTR)), addressOf: new Map() };
}

function symbolAddress(obj: ObjectFile, layout: Layout, index: number): number {
  const sym = obj.symbols[index]!;
  const base = layout.addressOf.get(sym.shndx);
  if (base === undefined) throw new Error(`symbol ${sym.name || index} is not in an allocated section`);
  return base + sym.value;
}

/** Patches one copy of `.text`; returns the syscall call sites (offset in text, name). */
function relocateText(obj: ObjectFile, layout: Layout, text: Uint8Array): { offset: number; name: string }[] {
  const view = new DataView(text.buffer, text.byteOffset, text.byteLength);
  const syscalls: { offset: number; name: string }[] = [];
  for (const rel of obj.relocations.get(layout.text.index) ?? []) {
    const at = rel.offset;
    const sym = obj.symbols[rel.symbol]!;
    if (rel.type === R_BPF_64_64 && text[at] === OP_LDDW) {
      const value = MM_PROGRAM_START + BigInt(symbolAddress(obj, layout, rel.symbol) + view.getUint32(at + 4, true));
      view.setUint32(at + 4, Number(value & 0xffffffffn), true);
      view.setUint32(at + 12, Number(value >> 32n), true);
    } else if (rel.type === R_BPF_64_32 && text[at] === OP_CALL && sym.shndx === 0) {
      view.setInt32(at + 4, -1, true);
      text[at + 1] = 0; // src 0: a call the loader resolves by symbol name
      syscalls.push({ offset: at, name: sym.name });
    } else if (rel.type === R_BPF_64_32 && text[at] === OP_CALL && sym.shndx === layout.text.index) {
      const target = sym.value / INSN + view.getInt32(at + 4, true) + 1; // libbpf's rule for pseudo calls
      view.setInt32(at + 4, target - (at / INSN + 1), true);
      text[at + 1] = 0x10; // src 1: pc-relative internal call
    } else {
      throw new Error(`unsupported relocation type ${rel.type} at .text+${at} against ${sym.name || "section"}`);
    }
  }
  for (let at = 0; at < text.length; at += INSN) {
    // sBPF v0 reads callx's register from imm; LLVM puts it in dst.
    if (text[at] === OP_CALLX) view.setInt32(at + 4, text[at + 1]! & 0x0f, true);
    if (text[at] === OP_LDDW) at += INSN;
  }
  return syscalls;
}

function relocateRodata(obj: ObjectFile, layout: Layout, section: Section, bytes: Uint8Array): void {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (const rel of obj.relocations.get(section.index) ?? []) {
    if (rel.type !== R_BPF_64_ABS64) throw new Error(`unsupported relocation type ${rel.type} in ${section.name}`);
    const addend = view.getBigUint64(rel.offset, true);
    view.setBigUint64(rel.offset, MM_PROGRAM_START + BigInt(symbolAddress(obj, layout, rel.symbol)) + addend, true);
  }
}

/** Links `object` (clang's output) into program bytes. `entry` names the entrypoint function. */
export function link(object: Uint8Array, entry = "entrypoint"): Uint8Array {
  const obj = readObject(object);
  const layout = allocated(obj);
  const writer = new ElfWriter(layout.rodata.length > 0);
  let at = writer.headersSize;
  const align = (n: number, a: number) => Math.ceil(n / a) * a;
  at = align(at, INSN);
  layout.addressOf.set(layout.text.index, at);
  at += layout.text.bytes.length;
  for (const s of layout.rodata) {
    at = align(at, s.align);
    layout.addressOf.set(s.index, at);
    at += s.bytes.length;
  }
  const text = layout.text.bytes.slice();
  const syscalls = relocateText(obj, layout, text);
  const entrySymbol = obj.symbols.findIndex((s) => s.name === entry && s.shndx === layout.text.index);
  if (entrySymbol < 0) throw new Error(`no function named ${entry} in .text`);

  const sections: OutSection[] = [{ name: ".text", bytes: text, address: layout.addressOf.get(layout.text.index)! }];
  if (layout.rodata.length > 0) {
    const start = layout.addressOf.get(layout.rodata[0]!.index)!;
    const rodata = new Uint8Array(at - start);
    for (const s of layout.rodata) {
      const copy = s.bytes.slice();
      relocateRodata(obj, layout, s, copy);
      rodata.set(copy, layout.addressOf.get(s.index)! - start);
    }
    sections.push({ name: ".rodata", bytes: rodata, address: start });
  }
  const textAddress = sections[0]!.address;
  return writer.write(sections, at, {
    entryAddress: symbolAddress(obj, layout, entrySymbol),
    entryName: entry,
    entrySize: obj.symbols[entrySymbol]!.size,
    syscalls: syscalls.map((s) => ({ address: textAddress + s.offset, name: s.name })),
  });
}
