/**
 * Where each transaction's record sits in the log, by signature. In memory it is a map; on disk, an
 * append-only file of 72-byte entries (64-byte signature, u64 log offset) extended at each
 * checkpoint, so opening a large data dir reads 72 bytes per old transaction instead of
 * rescanning the whole log. Records after the last checkpoint are indexed while replaying them.
 */
import { closeSync, fsync, ftruncateSync, fstatSync, openSync, readSync, write } from "node:fs";
import { promisify } from "node:util";

const writeAsync = promisify(write);
const fsyncAsync = promisify(fsync);

const ENTRY = 72;

/** Map key of a signature: its bytes as a one-byte-per-char string (64 chars, cheap to hash). */
export function signatureKey(signature: Uint8Array): string {
  return Buffer.from(signature.buffer, signature.byteOffset, signature.byteLength).toString("latin1");
}

export class SignatureIndex {
  private readonly offsets = new Map<string, number>();
  /** Entries not yet in the file, in log order. */
  private unsaved: { key: string; offset: number }[] = [];

  private constructor(
    private readonly fd: number | null,
    private fileLength: number,
  ) {}

  static memory(): SignatureIndex {
    return new SignatureIndex(null, 0);
  }

  /** Loads the first `validLength` bytes of the file (what the checkpoint vouches for) and drops the rest. */
  static open(path: string, validLength: number): SignatureIndex {
    const fd = openSync(path, "a+", 0o600);
    const size = fstatSync(fd).size;
    if (size < validLength) throw new Error(`${path} is shorter than its checkpoint says (${size} < ${validLength})`);
    if (size > validLength) ftruncateSync(fd, validLength);
    const index = new SignatureIndex(fd, validLength);
    const chunk = Buffer.alloc(ENTRY * 16384);
    for (let at = 0; at < validLength; ) {
      const n = readSync(fd, chunk, 0, Math.min(chunk.length, validLength - at), at);
      for (let i = 0; i + ENTRY <= n; i += ENTRY) {
        index.offsets.set(chunk.toString("latin1", i, i + 64), Number(chunk.readBigUInt64LE(i + 64)));
      }
      at += n;
    }
    return index;
  }

  get size(): number {
    return this.offsets.size;
  }

  get(key: string): number | undefined {
    return this.offsets.get(key);
  }

  add(key: string, offset: number): void {
    this.offsets.set(key, offset);
    if (this.fd !== null) this.unsaved.push({ key, offset });
  }

  /**
   * Appends the entries for log records before `logOffset` and syncs; resolves with the file length
   * the next checkpoint records. The entries are taken at the call; one call at a time.
   */
  async persistBefore(logOffset: number): Promise<number> {
    if (this.fd === null) return 0;
    const due = this.unsaved.filter((e) => e.offset < logOffset);
    this.unsaved = this.unsaved.filter((e) => e.offset >= logOffset);
    if (due.length > 0) {
      const buf = Buffer.alloc(due.length * ENTRY);
      due.forEach((e, i) => {
        buf.write(e.key, i * ENTRY, 64, "latin1");
        buf.writeBigUInt64LE(BigInt(e.offset), i * ENTRY + 64);
      });
      // The file is opened for appending: each write lands at its end.
      for (let written = 0; written < buf.length; ) written += (await writeAsync(this.fd, buf, written, buf.length - written, null)).bytesWritten;
      this.fileLength += buf.length;
    }
    await fsyncAsync(this.fd);
    return this.fileLength;
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
  }
}
