/**
 * A small GGUF v3 writer: typed key/value metadata and F32 tensors, enough to produce model files
 * llama.cpp loads. Layout (little-endian): header, KVs, tensor infos, padding to the alignment,
 * then tensor data with each tensor starting on an aligned offset.
 */

const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
const GGUF_VERSION = 3;
/** GGUF's default alignment; a file that uses another must say so in `general.alignment`. */
export const GGUF_DEFAULT_ALIGNMENT = 32;
/** llama.cpp rejects longer tensor names (GGML_MAX_NAME includes the terminating NUL). */
const MAX_TENSOR_NAME_BYTES = 63;

const enum ValueType {
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
}

const GGML_TYPE_F32 = 0;

export type GgufValue =
  | { readonly type: "u32"; readonly value: number }
  | { readonly type: "i32"; readonly value: number }
  | { readonly type: "f32"; readonly value: number }
  | { readonly type: "bool"; readonly value: boolean }
  | { readonly type: "string"; readonly value: string }
  | { readonly type: "string[]"; readonly value: readonly string[] }
  | { readonly type: "f32[]"; readonly value: ArrayLike<number> }
  | { readonly type: "i32[]"; readonly value: ArrayLike<number> };

export const u32 = (value: number): GgufValue => ({ type: "u32", value });
export const i32 = (value: number): GgufValue => ({ type: "i32", value });
export const f32 = (value: number): GgufValue => ({ type: "f32", value });
export const bool = (value: boolean): GgufValue => ({ type: "bool", value });
export const str = (value: string): GgufValue => ({ type: "string", value });
export const strArray = (value: readonly string[]): GgufValue => ({ type: "string[]", value });
export const f32Array = (value: ArrayLike<number>): GgufValue => ({ type: "f32[]", value });
export const i32Array = (value: ArrayLike<number>): GgufValue => ({ type: "i32[]", value });

export interface GgufTensor {
  name: string;
  /** ggml order: dims[0] is the row length (the fastest-varying index). */
  dims: readonly number[];
  data: Float32Array;
}

const utf8 = new TextEncoder();

function alignUp(n: number, alignment: number): number {
  return Math.ceil(n / alignment) * alignment;
}

function checkInteger(key: string, value: number, min: number, max: number): void {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(`GGUF key ${key}: ${value} is not an integer in [${min}, ${max}]`);
  }
}

function validateValue(key: string, v: GgufValue): void {
  switch (v.type) {
    case "u32":
      return checkInteger(key, v.value, 0, 0xffffffff);
    case "i32":
      return checkInteger(key, v.value, -0x80000000, 0x7fffffff);
    case "i32[]":
      for (let i = 0; i < v.value.length; i++) checkInteger(key, v.value[i]!, -0x80000000, 0x7fffffff);
      return;
    default:
      return;
  }
}

/** Grows as it is written; sizes are small enough here that one pass plus a copy is simplest. */
class ByteSink {
  private buf = new Uint8Array(1 << 16);
  private view = new DataView(this.buf.buffer);
  length = 0;

  private reserve(n: number): void {
    if (this.length + n <= this.buf.length) return;
    let size = this.buf.length;
    while (size < this.length + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.length));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }

  u32(n: number): void {
    this.reserve(4);
    this.view.setUint32(this.length, n, true);
    this.length += 4;
  }

  i32(n: number): void {
    this.reserve(4);
    this.view.setInt32(this.length, n, true);
    this.length += 4;
  }

  u64(n: number): void {
    this.reserve(8);
    this.view.setBigUint64(this.length, BigInt(n), true);
    this.length += 8;
  }

  f32(n: number): void {
    this.reserve(4);
    this.view.setFloat32(this.length, n, true);
    this.length += 4;
  }

  u8(n: number): void {
    this.reserve(1);
    this.buf[this.length++] = n;
  }

  bytes(b: Uint8Array): void {
    this.reserve(b.length);
    this.buf.set(b, this.length);
    this.length += b.length;
  }

  string(s: string): void {
    const b = utf8.encode(s);
    this.u64(b.length);
    this.bytes(b);
  }

  padTo(alignment: number): void {
    const target = alignUp(this.length, alignment);
    this.reserve(target - this.length);
    this.buf.fill(0, this.length, target);
    this.length = target;
  }

  finish(): Uint8Array {
    return this.buf.slice(0, this.length);
  }
}

function writeValue(out: ByteSink, v: GgufValue): void {
  switch (v.type) {
    case "u32":
      out.u32(ValueType.U32);
      return out.u32(v.value);
    case "i32":
      out.u32(ValueType.I32);
      return out.i32(v.value);
    case "f32":
      out.u32(ValueType.F32);
      return out.f32(v.value);
    case "bool":
      out.u32(ValueType.Bool);
      return out.u8(v.value ? 1 : 0);
    case "string":
      out.u32(ValueType.String);
      return out.string(v.value);
    case "string[]":
      out.u32(ValueType.Array);
      out.u32(ValueType.String);
      out.u64(v.value.length);
      for (const s of v.value) out.string(s);
      return;
    case "f32[]":
      out.u32(ValueType.Array);
      out.u32(ValueType.F32);
      out.u64(v.value.length);
      for (let i = 0; i < v.value.length; i++) out.f32(v.value[i]!);
      return;
    case "i32[]":
      out.u32(ValueType.Array);
      out.u32(ValueType.I32);
      out.u64(v.value.length);
      for (let i = 0; i < v.value.length; i++) out.i32(v.value[i]!);
      return;
  }
}

/**
 * Serialises metadata and tensors into GGUF v3 bytes. Keys keep the given order. The alignment
 * comes from a `general.alignment` u32 entry when present, else the GGUF default of 32.
 */
export function writeGguf(
  metadata: ReadonlyArray<readonly [string, GgufValue]>,
  tensors: readonly GgufTensor[],
): Uint8Array {
  const keys = new Set<string>();
  let alignment = GGUF_DEFAULT_ALIGNMENT;
  for (const [key, value] of metadata) {
    if (keys.has(key)) throw new Error(`duplicate GGUF key ${key}`);
    keys.add(key);
    validateValue(key, value);
    if (key === "general.alignment") {
      if (value.type !== "u32" || value.value === 0 || value.value % 8 !== 0) {
        throw new Error("general.alignment must be a u32 multiple of 8");
      }
      alignment = value.value;
    }
  }

  const names = new Set<string>();
  for (const t of tensors) {
    if (names.has(t.name)) throw new Error(`duplicate tensor ${t.name}`);
    names.add(t.name);
    if (utf8.encode(t.name).length > MAX_TENSOR_NAME_BYTES) throw new Error(`tensor name too long: ${t.name}`);
    if (t.dims.length < 1 || t.dims.length > 4) throw new Error(`tensor ${t.name}: 1 to 4 dims allowed`);
    const count = t.dims.reduce((a, b) => a * b, 1);
    if (count !== t.data.length) {
      throw new Error(`tensor ${t.name}: dims [${t.dims.join(", ")}] hold ${count} values, data has ${t.data.length}`);
    }
  }

  const out = new ByteSink();
  out.u32(GGUF_MAGIC);
  out.u32(GGUF_VERSION);
  out.u64(tensors.length);
  out.u64(metadata.length);
  for (const [key, value] of metadata) {
    out.string(key);
    writeValue(out, value);
  }

  let offset = 0;
  const offsets: number[] = [];
  for (const t of tensors) {
    out.string(t.name);
    out.u32(t.dims.length);
    for (const d of t.dims) out.u64(d);
    out.u32(GGML_TYPE_F32);
    out.u64(offset);
    offsets.push(offset);
    offset = alignUp(offset + t.data.byteLength, alignment);
  }
  out.padTo(alignment);

  const dataStart = out.length;
  tensors.forEach((t, i) => {
    out.padTo(alignment);
    if (out.length - dataStart !== offsets[i]) throw new Error("GGUF tensor offset bookkeeping went wrong");
    // Copy through a little-endian view so the bytes don't depend on the host's endianness.
    const bytes = new Uint8Array(t.data.byteLength);
    const view = new DataView(bytes.buffer);
    for (let j = 0; j < t.data.length; j++) view.setFloat32(j * 4, t.data[j]!, true);
    out.bytes(bytes);
  });
  out.padTo(alignment);
  return out.finish();
}
