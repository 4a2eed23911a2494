/**
 * Reads the one ELF64 little-endian relocatable object clang writes for `-target bpfel`: its
 * sections, its symbol table and the REL relocations of each allocated section. Nothing else of
 * the format is needed to link a Solana program.
 */

export interface Section {
  index: number;
  name: string;
  type: number;
  flags: bigint;
  bytes: Uint8Array;
  align: number;
  link: number;
  info: number;
}

export interface ObjSymbol {
  name: string;
  value: number;
  size: number;
  /** Section index; 0 = undefined (a syscall). */
  shndx: number;
  bind: number;
  type: number;
}

export interface Relocation {
  offset: number;
  type: number;
  symbol: number;
}

export const SHT_SYMTAB = 2;
export const SHT_REL = 9;
export const SHT_NOBITS = 8;
export const SHF_ALLOC = 2n;
export const SHF_WRITE = 1n;
export const SHF_EXECINSTR = 4n;
export const EM_BPF = 247;
const ET_REL = 1;
/** BPF relocation types: lddw of an address, 64-bit data, and a call's 32-bit immediate. */
export const R_BPF_64_64 = 1;
export const R_BPF_64_ABS64 = 2;
export const R_BPF_64_32 = 10;

export interface ObjectFile {
  sections: Section[];
  symbols: ObjSymbol[];
  /** Relocations keyed by the index of the section they patch. */
  relocations: Map<number, Relocation[]>;
}

function cString(bytes: Uint8Array, at: number): string {
  let end = at;
  while (end < bytes.length && bytes[end] !== 0) end++;
  return new TextDecoder().decode(bytes.subarray(at, end));
}

function readSections(file: Uint8Array, view: DataView): Section[] {
  const shoff = Number(view.getBigUint64(0x28, true));
  const shentsize = view.getUint16(0x3a, true);
  const shnum = view.getUint16(0x3c, true);
  const shstrndx = view.getUint16(0x3e, true);
  const raw = Array.from({ length: shnum }, (_, i) => {
    const at = shoff + i * shentsize;
    const type = view.getUint32(at + 4, true);
    const offset = Number(view.getBigUint64(at + 0x18, true));
    const size = Number(view.getBigUint64(at + 0x20, true));
    return {
      nameAt: view.getUint32(at, true),
      type,
      flags: view.getBigUint64(at + 8, true),
      bytes: type === SHT_NOBITS ? new Uint8Array(size) : file.subarray(offset, offset + size),
      link: view.getUint32(at + 0x28, true),
      info: view.getUint32(at + 0x2c, true),
      align: Math.max(1, Number(view.getBigUint64(at + 0x30, true))),
    };
  });
  const names = raw[shstrndx]!.bytes;
  return raw.map((s, index) => ({ index, name: cString(names, s.nameAt), ...s }));
}

export function readObject(file: Uint8Array): ObjectFile {
  const view = new DataView(file.buffer, file.byteOffset, file.byteLength);
  if (view.getUint32(0, false) !== 0x7f454c46 || file[4] !== 2 || file[5] !== 1) {
    throw new Error("not an ELF64 little-endian file");
  }
  if (view.getUint16(0x10, true) !== ET_REL || view.getUint16(0x12, true) !== EM_BPF) {
    throw new Error("not a BPF relocatable object");
  }
  const sections = readSections(file, view);
  const symtab = sections.find((s) => s.type === SHT_SYMTAB);
  if (!symtab) throw new Error("object has no symbol table");
  const strtab = sections[symtab.link]!.bytes;
  const sv = new DataView(symtab.bytes.buffer, symtab.bytes.byteOffset, symtab.bytes.byteLength);
  const symbols: ObjSymbol[] = [];
  for (let at = 0; at < symtab.bytes.length; at += 24) {
    const info = sv.getUint8(at + 4);
    symbols.push({
      name: cString(strtab, sv.getUint32(at, true)),
      bind: info >> 4,
      type: info & 0xf,
      shndx: sv.getUint16(at + 6, true),
      value: Number(sv.getBigUint64(at + 8, true)),
      size: Number(sv.getBigUint64(at + 16, true)),
    });
  }
  const relocations = new Map<number, Relocation[]>();
  for (const rel of sections.filter((s) => s.type === SHT_REL)) {
    if (!(sections[rel.info]!.flags & SHF_ALLOC)) continue; // debug info is not linked
    const rv = new DataView(rel.bytes.buffer, rel.bytes.byteOffset, rel.bytes.byteLength);
    const list: Relocation[] = [];
    for (let at = 0; at < rel.bytes.length; at += 16) {
      const info = rv.getBigUint64(at + 8, true);
      list.push({ offset: Number(rv.getBigUint64(at, true)), type: Number(info & 0xffffffffn), symbol: Number(info >> 32n) });
    }
    relocations.set(rel.info, list);
  }
  return { sections, symbols, relocations };
}
