/**
 * Reading the escrow program's instruction data back, for anyone checking a charge from the chain
 * (the lock's amount, tier and job id; the settlement's charge, worker and proof hash).
 */
import type { Address } from "@solana/kit";
import { jobIdOfKey } from "../../core/index.ts";
import { toAddress } from "../addresses.ts";
import { Op } from "./instructions.ts";

/** One job of a lock_batch: its slot of the table, amount in base units, tier byte and id. */
export interface TableLockEntry {
  slot: number;
  amount: bigint;
  tier: number;
  jobId: string;
}

export type EscrowInstruction =
  | { op: "lock"; wallet: Address; amount: bigint; tier: number; vaultBump: number; jobId: string }
  | { op: "settle"; charge: bigint; worker: Address; proofHash: Uint8Array }
  | { op: "refund" }
  | { op: "withdraw"; amount: bigint; vaultBump: number }
  | { op: "lockBatch"; wallet: Address; tableId: bigint; capacity: number; firstSlot: number; entries: TableLockEntry[] }
  | { op: "settleBatch"; worker: Address }
  | { op: "refundSlots"; slots: number[] }
  | { op: "other"; code: number };

/** Decodes one instruction's data; throws when a known instruction's data is malformed. */
export function decodeEscrowInstruction(data: Uint8Array): EscrowInstruction {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const need = (n: number) => {
    if (data.length !== n) throw new Error(`escrow instruction ${data[0]} has ${data.length} bytes, expected ${n}`);
  };
  switch (data[0]) {
    case Op.lock: {
      if (data.length < 44) throw new Error("escrow lock instruction too short");
      need(44 + data[43]!);
      return {
        op: "lock",
        wallet: toAddress(data.slice(1, 33)),
        amount: view.getBigUint64(33, true),
        tier: data[41]!,
        vaultBump: data[42]!,
        jobId: new TextDecoder().decode(data.subarray(44)),
      };
    }
    case Op.settle:
      need(73);
      return { op: "settle", charge: view.getBigUint64(1, true), worker: toAddress(data.slice(9, 41)), proofHash: data.slice(41, 73) };
    case Op.refund:
      need(1);
      return { op: "refund" };
    case Op.withdraw:
      need(10);
      return { op: "withdraw", amount: view.getBigUint64(1, true), vaultBump: data[9]! };
    case Op.lockBatch:
      return decodeLockBatch(data, view);
    case Op.settleBatch:
      need(33);
      return { op: "settleBatch", worker: toAddress(data.slice(1, 33)) };
    case Op.refundSlots:
      if (data.length < 2) throw new Error("escrow refund_slots instruction too short");
      need(2 + data[1]!);
      return { op: "refundSlots", slots: [...data.subarray(2)] };
    default:
      return { op: "other", code: data[0] ?? -1 };
  }
}

const LOCK_ENTRIES_AT = 45;
const LOCK_ENTRY_SIZE = 25;

function decodeLockBatch(data: Uint8Array, view: DataView): EscrowInstruction {
  if (data.length < LOCK_ENTRIES_AT || data.length !== LOCK_ENTRIES_AT + data[44]! * LOCK_ENTRY_SIZE) {
    throw new Error(`escrow lock_batch instruction has ${data.length} bytes for ${data[44]} jobs`);
  }
  const firstSlot = data[43]!;
  const entries = Array.from({ length: data[44]! }, (_, i): TableLockEntry => {
    const at = LOCK_ENTRIES_AT + i * LOCK_ENTRY_SIZE;
    return { slot: firstSlot + i, amount: view.getBigUint64(at, true), tier: data[at + 8]!, jobId: jobIdOfKey(data.slice(at + 9, at + 25)) };
  });
  return { op: "lockBatch", wallet: toAddress(data.slice(1, 33)), tableId: view.getBigUint64(34, true), capacity: data[42]!, firstSlot, entries };
}
