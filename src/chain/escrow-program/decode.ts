/**
 * Reading the escrow program's instruction data back, for anyone checking a charge from the chain
 * (the lock's amount, tier and job id; the settlement's charge, worker and proof hash).
 */
import type { Address } from "@solana/kit";
import { toAddress } from "../addresses.ts";
import { Op } from "./instructions.ts";

export type EscrowInstruction =
  | { op: "lock"; wallet: Address; amount: bigint; tier: number; vaultBump: number; jobId: string }
  | { op: "settle"; charge: bigint; worker: Address; proofHash: Uint8Array }
  | { op: "refund" }
  | { op: "withdraw"; amount: bigint; vaultBump: number }
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
    default:
      return { op: "other", code: data[0] ?? -1 };
  }
}
