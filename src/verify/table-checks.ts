/**
 * The checks of the receipt of a job kept in an escrow table: its lock entry, the worker's one
 * signature over the settlement message, the job's leaf under the signed root (so a changed leaf,
 * path or position fails), the charge the message names for its slot, and what the program paid
 * for all the settlement's slots; then what the service claimed and the text received. Pure.
 */
import type { TableChargeFacts, TableReceipt } from "../chain/index.ts";
import { creditsToBaseUnits, leafBytes, leafHash, outputHash, rootFromPath, verifyEd25519 } from "../core/index.ts";
import { shareOf, transfersFrom, type Check, type ServiceClaims } from "./checks.ts";

const check = (name: string, ok: boolean, detail: string): Check => ({ name, ok, detail });

/** The job's charge, as the signed settlement names it at the leaf's position; undefined without one. */
export function chargeOf(f: TableChargeFacts, receipt: TableReceipt): bigint | undefined {
  const entry = f.signed?.entries[receipt.leafIndex];
  return entry?.slot === receipt.slot ? entry.charge : undefined;
}

function lockChecks(f: TableChargeFacts, receipt: TableReceipt): Check[] {
  const e = f.lockEntry;
  const ix = e ? f.lock!.instructions[e.instruction] : undefined;
  const moved = e && f.lock ? transfersFrom(f.lock, e.vault, e.instruction).get(f.escrowPool) : undefined;
  const table = f.table;
  return [
    check("the lock transaction succeeded", f.lock?.ok === true, f.lock ? `${f.lock.signature} at slot ${f.lock.slot}` : "no lock of this job found on the table"),
    check("the lock names this job in the receipt's slot of the table", e?.slot === receipt.slot, e ? `slot ${e.slot}, ${e.amount} base units, tier byte ${e.tier}` : `no lock_batch entry for ${f.jobId}`),
    check("the lock moved its jobs' total from the wallet's vault into the escrow pool", moved !== undefined && moved === ix?.amount, `${moved ?? 0n} of ${ix?.amount ?? 0n} base units`),
    table
      ? check("the table is the program's record of this wallet's jobs", e !== null && table.vault === e.vault && table.wallet === e.wallet, `table ${f.tableAddress}, wallet ${table.wallet}`)
      : check("the table was closed; the facts are read from its transactions", f.lock !== null, `${f.tableAddress} holds no record`),
  ];
}

/** The program's three transfers for a whole settlement against what its message names for each slot; whether the worker was paid the staked share. */
export function paidAsSigned(f: TableChargeFacts): { ok: boolean; detail: string; staked: boolean } {
  const s = f.settlement!;
  const entries = f.signed!.entries;
  const vault = f.lockEntry?.vault;
  const paid = transfersFrom(s, f.escrowPool);
  const toWorker = [...paid].filter(([to]) => to !== f.config.treasury && to !== vault).reduce((n, [, v]) => n + v, 0n);
  const charged = entries.reduce((n, e) => n + e.charge, 0n);
  const returned = entries.reduce((n, e) => n + (f.lockedBySlot.get(e.slot) ?? 0n) - e.charge, 0n);
  const worker = (bps: number) => entries.reduce((n, e) => n + shareOf(e.charge, bps), 0n);
  const staked = toWorker === worker(f.config.stakedWorkerShareBps) && toWorker !== worker(f.config.workerShareBps);
  const expected = worker(staked ? f.config.stakedWorkerShareBps : f.config.workerShareBps);
  const ok = toWorker === expected && (paid.get(f.config.treasury) ?? 0n) === charged - expected && vault !== undefined && (paid.get(vault) ?? 0n) === returned;
  return { ok, staked, detail: `${entries.length} slots: worker ${toWorker}, treasury ${paid.get(f.config.treasury) ?? 0n}, returned ${vault ? (paid.get(vault) ?? 0n) : 0n}` };
}

function settlementChecks(f: TableChargeFacts, receipt: TableReceipt): Check[] {
  const s = f.settlement;
  const signed = f.signed;
  const leaf = leafHash(leafBytes({ jobId: f.jobId, outputHash: Buffer.from(receipt.proofHash.slice("sha256:".length), "hex"), promptTokens: receipt.promptTokens, completionTokens: receipt.completionTokens }));
  const root = rootFromPath(leaf, receipt.leafIndex, receipt.treeSize, receipt.path);
  const charge = chargeOf(f, receipt);
  const checks = [
    check("the settlement transaction succeeded", s?.ok === true, s ? `${s.signature} at slot ${s.slot}` : "no settlement of this slot found"),
    check("the same transaction verified the worker's Ed25519 signature over a settlement of this table", signed !== null, signed ? `by ${signed.worker}` : "no settlement message of this table"),
    check("that signature verifies here too", signed !== null && verifyEd25519(signed.worker, signed.bytes, signed.signature), "checked with this machine's Ed25519"),
    check(
      "the receipt's leaf (job id, proof hash, tokens) leads up its path to the signed root",
      root !== null && signed !== null && receipt.treeSize === signed.entries.length && Buffer.from(root).equals(signed.root),
      `leaf ${receipt.leafIndex} of ${receipt.treeSize}`,
    ),
    check("the signed entry at the leaf's position is this job's slot, with its charge", charge !== undefined, charge !== undefined ? `slot ${receipt.slot}: ${charge} base units` : `entry ${receipt.leafIndex} names another slot`),
    check("the charge is within the lock", charge !== undefined && f.lockEntry !== null && charge <= f.lockEntry.amount, `${charge ?? 0n} of ${f.lockEntry?.amount ?? 0n} base units`),
  ];
  if (s && signed) {
    const paid = paidAsSigned(f);
    checks.push(check("the program paid exactly what the signed settlement names: worker's shares, treasury the rest, unused locks back to the vault", paid.ok, paid.detail));
  }
  const slot = f.table?.slots[receipt.slot];
  if (slot) checks.push(check("the table's slot holds the settled charge", slot.status !== "locked" && slot.status !== "refunded" && slot.amount === charge, `${slot.status}, ${slot.amount} base units`));
  return checks;
}

function refundChecks(f: TableChargeFacts, receipt: TableReceipt): Check[] {
  const r = f.refund!;
  const slot = f.table?.slots[receipt.slot];
  return [
    check("the refund transaction succeeded and names the slot", r.ok, `${r.signature} at slot ${r.slot}`),
    check("the table's slot says refunded, its whole lock returned", slot === undefined || (slot.status === "refunded" && slot.amount === f.lockEntry?.amount), slot ? `${slot.status}, ${slot.amount} base units` : "table closed"),
  ];
}

function claimChecks(f: TableChargeFacts, receipt: TableReceipt, claims: ServiceClaims): Check[] {
  const charge = chargeOf(f, receipt);
  return [
    check("the service's escrow address is the job's table", claims.escrowAddress === f.tableAddress, `service: ${claims.escrowAddress}`),
    check("the service's charge is the signed charge", charge !== undefined && creditsToBaseUnits(claims.creditsCharged) === charge, `service: ${claims.creditsCharged} credits; chain: ${charge ?? 0n} base units`),
    check("the service's worker and proof hash are the settled ones", claims.workerAddress === f.signed?.worker && claims.proofHash === receipt.proofHash, `service: ${claims.workerAddress}, ${claims.proofHash}`),
  ];
}

/** Every check of a table job's receipt, in the order a reader follows the money. */
export function checkTableCharge(f: TableChargeFacts, receipt: TableReceipt, options: { claims?: ServiceClaims; outputText?: string } = {}): Check[] {
  const checks = lockChecks(f, receipt);
  if (f.refund && !f.settlement) checks.push(...refundChecks(f, receipt));
  else checks.push(...settlementChecks(f, receipt));
  if (options.claims && !f.refund) checks.push(...claimChecks(f, receipt, options.claims));
  if (options.outputText !== undefined) {
    const hash = outputHash(options.outputText);
    checks.push(check("the text received hashes to the proof", hash === receipt.proofHash, hash));
  }
  return checks;
}
