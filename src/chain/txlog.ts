/**
 * The append-only log of everything that changed the embedded chain, in execution order: each
 * executed transaction (its signed bytes, slot, outcome and logs) and each airdrop. It is both the
 * write-ahead journal replayed on top of the last checkpoint and the permanent store behind
 * lookups by signature.
 *
 * Frame: u32 payload length, u32 CRC-32 of the payload, payload (all little-endian). A crash can
 * only tear the last frame; `scan` stops at the first frame that does not check out.
 */
import { closeSync, fdatasync, fstatSync, ftruncateSync, openSync, readSync, writeSync } from "node:fs";
import { crc32 } from "node:zlib";
import type { TxMeta } from "./tx-meta.ts";

export interface TxRecord {
  kind: "tx";
  slot: bigint;
  ok: boolean;
  err?: string;
  logs: string[];
  wire: Uint8Array;
  /** Balances, fee and time for the JSON-RPC server; absent from records written before it existed. */
  meta?: TxMeta;
}

export interface AirdropRecord {
  kind: "airdrop";
  slot: bigint;
  address: Uint8Array;
  lamports: bigint;
}

export type LogRecord = TxRecord | AirdropRecord;

const TX = 1;
const AIRDROP = 2;
const FRAME_HEADER = 8;
/** Far above any real record; a larger length can only come from a torn or foreign file. */
const MAX_PAYLOAD = 16 * 1024 * 1024;

export function encodeRecord(rec: LogRecord): Buffer {
  let payload: Buffer;
  if (rec.kind === "tx") {
    const err = Buffer.from(rec.err ?? "", "utf8");
    const logs = Buffer.from(rec.logs.join("\n"), "utf8");
    // An optional trailing section: older readers stop after the logs, older records simply lack it.
    const meta = rec.meta ? Buffer.from(JSON.stringify(rec.meta), "utf8") : Buffer.alloc(0);
    payload = Buffer.alloc(1 + 8 + 1 + 4 + rec.wire.length + 4 + err.length + 4 + logs.length + (meta.length > 0 ? 4 + meta.length : 0));
    let at = payload.writeUInt8(TX, 0);
    at = payload.writeBigUInt64LE(rec.slot, at);
    at = payload.writeUInt8(rec.ok ? 1 : 0, at);
    at = payload.writeUInt32LE(rec.wire.length, at);
    payload.set(rec.wire, at);
    at = payload.writeUInt32LE(err.length, at + rec.wire.length);
    at += err.copy(payload, at);
    at = payload.writeUInt32LE(logs.length, at);
    at += logs.copy(payload, at);
    if (meta.length > 0) meta.copy(payload, payload.writeUInt32LE(meta.length, at));
  } else {
    payload = Buffer.alloc(1 + 8 + 32 + 8);
    let at = payload.writeUInt8(AIRDROP, 0);
    at = payload.writeBigUInt64LE(rec.slot, at);
    payload.set(rec.address, at);
    payload.writeBigUInt64LE(rec.lamports, at + 32);
  }
  const frame = Buffer.alloc(FRAME_HEADER + payload.length);
  frame.writeUInt32LE(payload.length, 0);
  frame.writeUInt32LE(crc32(payload), 4);
  payload.copy(frame, FRAME_HEADER);
  return frame;
}

export function decodeRecord(payload: Buffer): LogRecord {
  const kind = payload.readUInt8(0);
  const slot = payload.readBigUInt64LE(1);
  if (kind === AIRDROP) {
    return { kind: "airdrop", slot, address: new Uint8Array(payload.subarray(9, 41)), lamports: payload.readBigUInt64LE(41) };
  }
  if (kind !== TX) throw new Error(`unknown chain log record kind ${kind}`);
  const ok = payload.readUInt8(9) === 1;
  let at = 10;
  const wireLen = payload.readUInt32LE(at);
  const wire = new Uint8Array(payload.subarray(at + 4, at + 4 + wireLen));
  at += 4 + wireLen;
  const errLen = payload.readUInt32LE(at);
  const err = payload.toString("utf8", at + 4, at + 4 + errLen);
  at += 4 + errLen;
  const logsLen = payload.readUInt32LE(at);
  const logs = logsLen === 0 ? [] : payload.toString("utf8", at + 4, at + 4 + logsLen).split("\n");
  at += 4 + logsLen;
  const record: TxRecord = err ? { kind: "tx", slot, ok, err, logs, wire } : { kind: "tx", slot, ok, logs, wire };
  if (at + 4 <= payload.length) {
    const metaLen = payload.readUInt32LE(at);
    record.meta = JSON.parse(payload.toString("utf8", at + 4, at + 4 + metaLen)) as TxMeta;
  }
  return record;
}

/** The log as the backend uses it; memory-only chains keep the same records in a map. */
export interface RecordLog {
  readonly size: number;
  append(frame: Buffer): number;
  durable(): Promise<void>;
  /** Resolves once every record appended before the call is on disk, whether or not this log syncs each. */
  flush(): Promise<void>;
  read(offset: number): LogRecord;
  /** Every record, oldest first. */
  history(): Iterable<LogRecord>;
  close(): void;
}

export class MemoryLog implements RecordLog {
  private readonly frames = new Map<number, Buffer>();
  size = 0;
  append(frame: Buffer): number {
    const offset = this.size;
    this.frames.set(offset, frame);
    this.size += frame.length;
    return offset;
  }
  async durable(): Promise<void> {}
  async flush(): Promise<void> {}
  read(offset: number): LogRecord {
    const frame = this.frames.get(offset);
    if (!frame) throw new Error(`no chain log record at ${offset}`);
    return decodeRecord(frame.subarray(FRAME_HEADER));
  }
  *history(): Iterable<LogRecord> {
    for (const frame of this.frames.values()) yield decodeRecord(frame.subarray(FRAME_HEADER));
  }
  close(): void {
    this.frames.clear();
  }
}

export interface TxLogOptions {
  /**
   * Whether a record is synced to the disk before it counts as durable (default true). Without,
   * `append`'s write to the operating system is all: the record survives the process's crash
   * (kill -9, the out-of-memory killer) and not an operating-system crash or a power cut. That is
   * for a chain whose user keeps nothing longer than that itself (a node on an embedded database,
   * whose commits are not synced either), where a sync of each send would be most of a send's time.
   */
  sync?: boolean;
}

export class TxLog implements RecordLog {
  private appended = 0;
  private synced = 0;
  private syncing: Promise<void> | null = null;

  private constructor(
    private readonly fd: number,
    /** Bytes in the file, including appends not yet synced. */
    public size: number,
    private readonly sync: boolean,
  ) {}

  /**
   * `sync` false: a record counts as durable once written, when it survives the process's crash
   * but not the machine's (TxLogOptions.sync).
   */
  static open(path: string, { sync = true }: TxLogOptions = {}): TxLog {
    const fd = openSync(path, "a+", 0o600);
    return new TxLog(fd, fstatSync(fd).size, sync);
  }

  /**
   * Yields the records from `from` on, in order. Stops at the end of the file or at a frame that
   * does not check out; `end` then holds where the good records end.
   */
  *scan(from: number, end = { offset: from }): Generator<{ offset: number; record: LogRecord }> {
    const header = Buffer.alloc(FRAME_HEADER);
    let at = from;
    end.offset = at;
    while (at + FRAME_HEADER <= this.size) {
      readSync(this.fd, header, 0, FRAME_HEADER, at);
      const len = header.readUInt32LE(0);
      if (len === 0 || len > MAX_PAYLOAD || at + FRAME_HEADER + len > this.size) return;
      const payload = Buffer.alloc(len);
      readSync(this.fd, payload, 0, len, at + FRAME_HEADER);
      if (crc32(payload) !== header.readUInt32LE(4)) return;
      yield { offset: at, record: decodeRecord(payload) };
      at += FRAME_HEADER + len;
      end.offset = at;
    }
  }

  /** Cuts off a torn tail found by `scan`. */
  truncate(size: number): void {
    ftruncateSync(this.fd, size);
    this.size = size;
  }

  /**
   * Writes a record and returns its offset. The write reaches the OS at once (so it survives the
   * process being killed); `durable()` waits for it to reach the disk, when this log syncs.
   */
  append(frame: Buffer): number {
    const offset = this.size;
    let written = 0;
    while (written < frame.length) written += writeSync(this.fd, frame, written, frame.length - written);
    this.size += frame.length;
    this.appended++;
    return offset;
  }

  /**
   * Resolves once every record appended before the call is on disk (at once, when this log does
   * not sync). Concurrent callers share one fdatasync (group commit), so a burst of sends costs
   * one disk flush, not one each.
   */
  async durable(): Promise<void> {
    if (this.sync) await this.flush();
  }

  /**
   * Resolves once every record appended before the call is on disk, for a checkpoint, which
   * vouches for the log up to its offset. A send's `durable()` may share its fdatasync.
   */
  async flush(): Promise<void> {
    const target = this.appended;
    while (this.synced < target) {
      if (!this.syncing) {
        const covering = this.appended;
        this.syncing = new Promise<void>((resolve, reject) => {
          fdatasync(this.fd, (err) => {
            this.syncing = null;
            if (err) return reject(err);
            this.synced = Math.max(this.synced, covering);
            resolve();
          });
        });
      }
      await this.syncing;
    }
  }


  read(offset: number): LogRecord {
    const header = Buffer.alloc(FRAME_HEADER);
    readSync(this.fd, header, 0, FRAME_HEADER, offset);
    const payload = Buffer.alloc(header.readUInt32LE(0));
    readSync(this.fd, payload, 0, payload.length, offset + FRAME_HEADER);
    return decodeRecord(payload);
  }

  *history(): Iterable<LogRecord> {
    for (const { record } of this.scan(0)) yield record;
  }

  close(): void {
    closeSync(this.fd);
  }
}
