/**
 * Writes the sBPF v0 shared object: ELF header, program headers (text, read-only data, dynamic
 * symbol data, PT_DYNAMIC), the loaded sections, the dynamic table, symbols and relocations, and
 * the section headers. Addresses equal file offsets throughout, as the v0 loader expects.
 */
import { EM_BPF, R_BPF_64_32 } from "./object.ts";

export interface OutSection {
  name: string;
  bytes: Uint8Array;
  address: number;
}

export interface DynamicPart {
  entryAddress: number;
  entryName: string;
  entrySize: number;
  /** Call sites (file address of the `call`) of each syscall, resolved by name at load. */
  syscalls: { address: number; name: string }[];
}

const EHDR = 64;
const PHDR = 56;
const SHDR = 64;
const PT_LOAD = 1;
const PT_DYNAMIC = 2;
const PF_X = 1;
const PF_W = 2;
const PF_R = 4;
const SHT = { PROGBITS: 1, STRTAB: 3, DYNAMIC: 6, REL: 9, DYNSYM: 11 } as const;
const DT = { NULL: 0, STRTAB: 5, SYMTAB: 6, STRSZ: 10, SYMENT: 11, REL: 17, RELSZ: 18, RELENT: 19 } as const;
const STB_GLOBAL = 1;
const STT_FUNC = 2;
const ET_DYN = 3;
const ALLOC = 2;
const WRITE = 1;
const EXEC = 4;

class Strings {
  private readonly parts: Uint8Array[] = [new Uint8Array(1)];
  private readonly index = new Map<string, number>();
  size = 1;
  add(s: string): number {
    const known = this.index.get(s);
    if (known !== undefined) return known;
    const at = this.size;
    const bytes = new TextEncoder().encode(`${s}\0`);
    this.parts.push(bytes);
    this.size += bytes.length;
    this.index.set(s, at);
    return at;
  }
  bytes(): Uint8Array {
    const out = new Uint8Array(this.size);
    let at = 0;
    for (const p of this.parts) (out.set(p, at), (at += p.length));
    return out;
  }
}

interface Placed {
  name: string;
  type: number;
  flags: number;
  bytes: Uint8Array;
  address: number;
  link?: number;
  info?: number;
  align: number;
  entsize?: number;
}

const align8 = (n: number) => Math.ceil(n / 8) * 8;

export class ElfWriter {
  readonly headersSize: number;
  private readonly phnum: number;

  constructor(private readonly hasRodata: boolean) {
    this.phnum = hasRodata ? 4 : 3;
    this.headersSize = EHDR + PHDR * this.phnum;
  }

  private dynamicSections(start: number, dyn: DynamicPart, sectionIndex: (name: string) => number): Placed[] {
    const names = [...new Set(dyn.syscalls.map((s) => s.name))].sort();
    const dynstr = new Strings();
    const dynsym = new Uint8Array(24 * (2 + names.length));
    const sv = new DataView(dynsym.buffer);
    sv.setUint32(24, dynstr.add(dyn.entryName), true);
    sv.setUint8(24 + 4, (STB_GLOBAL << 4) | STT_FUNC);
    sv.setUint16(24 + 6, sectionIndex(".text"), true);
    sv.setBigUint64(24 + 8, BigInt(dyn.entryAddress), true);
    sv.setBigUint64(24 + 16, BigInt(dyn.entrySize), true);
    names.forEach((name, i) => {
      sv.setUint32(24 * (i + 2), dynstr.add(name), true);
      sv.setUint8(24 * (i + 2) + 4, STB_GLOBAL << 4);
    });
    const rel = new Uint8Array(16 * dyn.syscalls.length);
    const rv = new DataView(rel.buffer);
    [...dyn.syscalls].sort((a, b) => a.address - b.address).forEach((s, i) => {
      rv.setBigUint64(16 * i, BigInt(s.address), true);
      rv.setBigUint64(16 * i + 8, (BigInt(names.indexOf(s.name) + 2) << 32n) | BigInt(R_BPF_64_32), true);
    });
    const strBytes = dynstr.bytes();
    const dynamicAt = align8(start);
    const dynsymAt = dynamicAt + 16 * 8;
    const dynstrAt = dynsymAt + dynsym.length;
    const relAt = align8(dynstrAt + strBytes.length);
    const entries: [number, number][] = [
      [DT.REL, relAt], [DT.RELSZ, rel.length], [DT.RELENT, 16], [DT.SYMTAB, dynsymAt],
      [DT.SYMENT, 24], [DT.STRTAB, dynstrAt], [DT.STRSZ, strBytes.length], [DT.NULL, 0],
    ];
    const dynamic = new Uint8Array(16 * 8);
    const dv = new DataView(dynamic.buffer);
    entries.forEach(([tag, value], i) => {
      dv.setBigUint64(16 * i, BigInt(tag), true);
      dv.setBigUint64(16 * i + 8, BigInt(value), true);
    });
    const dynstrIndex = sectionIndex(".dynstr");
    return [
      { name: ".dynamic", type: SHT.DYNAMIC, flags: ALLOC | WRITE, bytes: dynamic, address: dynamicAt, link: dynstrIndex, align: 8, entsize: 16 },
      { name: ".dynsym", type: SHT.DYNSYM, flags: ALLOC, bytes: dynsym, address: dynsymAt, link: dynstrIndex, info: 1, align: 8, entsize: 24 },
      { name: ".dynstr", type: SHT.STRTAB, flags: ALLOC, bytes: strBytes, address: dynstrAt, align: 1 },
      { name: ".rel.dyn", type: SHT.REL, flags: ALLOC, bytes: rel, address: relAt, link: sectionIndex(".dynsym"), align: 8, entsize: 16 },
    ];
  }

  write(loaded: OutSection[], end: number, dyn: DynamicPart): Uint8Array {
    const order = [...loaded.map((s) => s.name), ".dynamic", ".dynsym", ".dynstr", ".rel.dyn", ".shstrtab"];
    const sectionIndex = (name: string) => order.indexOf(name) + 1;
    const placed: Placed[] = loaded.map((s) => ({
      ...s,
      type: SHT.PROGBITS,
      flags: s.name === ".text" ? ALLOC | EXEC : ALLOC,
      align: 8,
    }));
    placed.push(...this.dynamicSections(end, dyn, sectionIndex));
    const last = placed[placed.length - 1]!;
    const shstrtab = new Strings();
    for (const name of order) shstrtab.add(name);
    const shstrBytes = shstrtab.bytes();
    placed.push({ name: ".shstrtab", type: SHT.STRTAB, flags: 0, bytes: shstrBytes, address: last.address + last.bytes.length, align: 1 });
    const shoff = align8(placed[placed.length - 1]!.address + shstrBytes.length);
    const out = new Uint8Array(shoff + SHDR * (placed.length + 1));
    for (const s of placed) out.set(s.bytes, s.address);
    this.header(out, shoff, placed.length + 1, dyn.entryAddress);
    this.programHeaders(out, placed);
    const view = new DataView(out.buffer);
    placed.forEach((s, i) => {
      const at = shoff + SHDR * (i + 1);
      view.setUint32(at, shstrtab.add(s.name), true);
      view.setUint32(at + 4, s.type, true);
      view.setBigUint64(at + 8, BigInt(s.flags), true);
      view.setBigUint64(at + 0x10, BigInt(s.flags & ALLOC ? s.address : 0), true);
      view.setBigUint64(at + 0x18, BigInt(s.address), true);
      view.setBigUint64(at + 0x20, BigInt(s.bytes.length), true);
      view.setUint32(at + 0x28, s.link ?? 0, true);
      view.setUint32(at + 0x2c, s.info ?? 0, true);
      view.setBigUint64(at + 0x30, BigInt(s.align), true);
      view.setBigUint64(at + 0x38, BigInt(s.entsize ?? 0), true);
    });
    return out;
  }

  private header(out: Uint8Array, shoff: number, shnum: number, entry: number): void {
    const view = new DataView(out.buffer);
    out.set([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0]); // ELF64, little-endian, version 1, System V ABI
    view.setUint16(0x10, ET_DYN, true);
    view.setUint16(0x12, EM_BPF, true);
    view.setUint32(0x14, 1, true);
    view.setBigUint64(0x18, BigInt(entry), true);
    view.setBigUint64(0x20, BigInt(EHDR), true);
    view.setBigUint64(0x28, BigInt(shoff), true);
    view.setUint32(0x30, 0, true); // e_flags 0: sBPF version 0
    view.setUint16(0x34, EHDR, true);
    view.setUint16(0x36, PHDR, true);
    view.setUint16(0x38, this.phnum, true);
    view.setUint16(0x3a, SHDR, true);
    view.setUint16(0x3c, shnum, true);
    view.setUint16(0x3e, shnum - 1, true); // .shstrtab is last
  }

  private programHeaders(out: Uint8Array, placed: Placed[]): void {
    const view = new DataView(out.buffer);
    const byName = (n: string) => placed.find((s) => s.name === n)!;
    const span = (first: Placed, lastOne: Placed) => [first.address, lastOne.address + lastOne.bytes.length - first.address] as const;
    const text = byName(".text");
    const headers: [number, number, readonly [number, number]][] = [[PT_LOAD, PF_R | PF_X, span(text, text)]];
    if (this.hasRodata) headers.push([PT_LOAD, PF_R, span(byName(".rodata"), byName(".rodata"))]);
    headers.push([PT_LOAD, PF_R, span(byName(".dynamic"), byName(".rel.dyn"))]);
    headers.push([PT_DYNAMIC, PF_R | PF_W, span(byName(".dynamic"), byName(".dynamic"))]);
    headers.forEach(([type, flags, [address, size]], i) => {
      const at = EHDR + PHDR * i;
      view.setUint32(at, type, true);
      view.setUint32(at + 4, flags, true);
      for (const field of [8, 0x10, 0x18]) view.setBigUint64(at + field, BigInt(address), true);
      view.setBigUint64(at + 0x20, BigInt(size), true);
      view.setBigUint64(at + 0x28, BigInt(size), true);
      view.setBigUint64(at + 0x30, BigInt(type === PT_LOAD ? 0x1000 : 8), true);
    });
  }
}
