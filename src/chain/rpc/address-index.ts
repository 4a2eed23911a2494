/**
 * Signatures by the addresses their transactions name, for `getSignaturesForAddress`. Built from
 * the chain's journal when first asked and kept up to date from then on; it lives in memory only,
 * since the journal it is rebuilt from is the durable copy.
 */
import { MEMO_PROGRAM } from "../addresses.ts";
import { base58Encode } from "../../core/index.ts";
import type { EmbeddedChainBackend } from "../backend.ts";
import type { LogRecord, TxRecord } from "../txlog.ts";
import { parseTransaction } from "../wire.ts";
import { outcomeError } from "./encoding.ts";

export interface SignatureEntry {
  signature: string;
  slot: bigint;
  err: unknown;
  /** Memo instructions' text as Solana's nodes show it: `[length] text`, joined by `; `. */
  memo: string | null;
  blockTime: number | null;
  confirmationStatus: "finalized";
}

export interface SignatureQuery {
  limit: number;
  /** Start after this signature (going back in time). */
  before?: string;
  /** Stop at this signature. */
  until?: string;
}

function memoOf(record: TxRecord, keys: string[]): string | null {
  const texts = parseTransaction(record.wire)
    .instructions.filter((ix) => keys[ix.programIndex] === MEMO_PROGRAM)
    .map((ix) => `[${ix.data.length}] ${Buffer.from(ix.data).toString("utf8")}`);
  return texts.length > 0 ? texts.join("; ") : null;
}

export class AddressIndex {
  /** Oldest first, per address. */
  private readonly byAddress = new Map<string, SignatureEntry[]>();
  private readonly indexed = new Set<string>();
  private unwatch: () => void = () => undefined;

  private constructor() {}

  static async build(backend: EmbeddedChainBackend): Promise<AddressIndex> {
    const index = new AddressIndex();
    // Watching starts before the journal is read, so nothing lands in between unseen; what lands
    // meanwhile waits so that each list stays oldest first, and `indexed` drops what both report.
    let landed: { signature: string; record: TxRecord }[] | undefined = [];
    index.unwatch = backend.watch((event) => {
      if (event.type !== "tx") return;
      if (landed !== undefined) landed.push(event);
      else index.add(event.signature, event.record);
    });
    let history: LogRecord[];
    try {
      history = await backend.history();
    } catch (err) {
      index.close();
      throw err;
    }
    for (const record of history) {
      if (record.kind === "tx") index.add(base58Encode(record.wire.subarray(1, 65)), record);
    }
    for (const event of landed) index.add(event.signature, event.record);
    landed = undefined;
    return index;
  }

  private add(signature: string, record: TxRecord): void {
    if (this.indexed.has(signature)) return;
    this.indexed.add(signature);
    const keys = parseTransaction(record.wire).accountKeys.map(base58Encode);
    const entry: SignatureEntry = {
      signature,
      slot: record.slot,
      err: outcomeError(record),
      memo: memoOf(record, keys),
      blockTime: record.meta?.blockTime ?? null,
      confirmationStatus: "finalized",
    };
    for (const key of new Set(keys)) {
      let list = this.byAddress.get(key);
      if (!list) this.byAddress.set(key, (list = []));
      list.push(entry);
    }
  }

  /** Newest first. */
  signaturesFor(address: string, query: SignatureQuery): SignatureEntry[] {
    const list = this.byAddress.get(address) ?? [];
    let i = list.length - 1;
    if (query.before !== undefined) {
      while (i >= 0 && list[i]!.signature !== query.before) i--;
      i--;
    }
    const out: SignatureEntry[] = [];
    for (; i >= 0 && out.length < query.limit; i--) {
      if (list[i]!.signature === query.until) break;
      out.push(list[i]!);
    }
    return out;
  }

  close(): void {
    this.unwatch();
  }
}
