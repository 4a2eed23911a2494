/** A charge's receipt as a person reads it: the job's money on the chain, then each check. Pure. */
import { hashText, tierOfCode, type ChainTransactionFacts, type ChargeFacts, type TableChargeFacts, type TableReceipt } from "../chain/index.ts";
import { baseUnitsToCredits } from "../core/index.ts";
import type { Check } from "./checks.ts";
import { shareOf } from "./checks.ts";
import { chargeOf, paidAsSigned } from "./table-checks.ts";

const credits = (units: bigint) => {
  const c = baseUnitsToCredits(units);
  return `${c} credit${c === 1 ? "" : "s"} (${(Number(units) / 1e6).toFixed(4)} USDC)`;
};

/**
 * A lock or close transaction may carry other jobs' instructions too (their locks, or the records
 * closed with this one): said, so that a reader checking it by hand looks for this job's.
 */
function sharedWith(tx: ChainTransactionFacts): string {
  const count = (kind: "lock" | "closeEscrow") => tx.instructions.filter((i) => i.program === "escrow" && i.kind === kind).length;
  const [locks, closes] = [count("lock"), count("closeEscrow")];
  return locks > 1 ? `; it locks ${locks} jobs` : closes > 1 ? `; it closes ${closes} records` : "";
}

/** The checks, one line each, and the verdict. */
function verdict(checks: readonly Check[]): string[] {
  const lines = [""];
  for (const c of checks) lines.push(`${c.ok ? "ok      " : "MISMATCH"}  ${c.name}: ${c.detail}`);
  const failed = checks.filter((c) => !c.ok).length;
  lines.push("", failed === 0 ? `All ${checks.length} checks passed.` : `${failed} of ${checks.length} checks failed.`);
  return lines;
}

/** A table job's receipt: its slot, its lock, its charge and the job's share of each payout, then each check. */
export function formatTableReceipt(f: TableChargeFacts, receipt: TableReceipt, checks: readonly Check[]): string {
  const e = f.lockEntry;
  const lines = [`Receipt for ${f.jobId}`, `  escrow table    ${f.tableAddress}, slot ${receipt.slot}${f.table ? "" : " (closed: read from its transactions)"}`];
  if (e) lines.push(`  wallet          ${e.wallet}`, `  tier            ${tierOfCode(e.tier) ?? `byte ${e.tier}`}`, `  locked          ${credits(e.amount)}`);
  const charge = chargeOf(f, receipt);
  if (charge !== undefined && f.signed && e) {
    const staked = f.settlement ? paidAsSigned(f).staked : false;
    const worker = shareOf(charge, staked ? f.config.stakedWorkerShareBps : f.config.workerShareBps);
    lines.push(
      `  charged         ${credits(charge)}`,
      `  worker paid     ${credits(worker)} to ${f.signed.worker}${staked ? " (staked)" : ""}`,
      `  treasury paid   ${credits(charge - worker)}`,
      `  returned        ${credits(e.amount - charge)}`,
      `  proof hash      ${receipt.proofHash}`,
      `  settled with    ${f.signed.entries.length - 1} other job${f.signed.entries.length === 2 ? "" : "s"} under one signature (leaf ${receipt.leafIndex} of ${receipt.treeSize})`,
    );
  } else if (f.refund && e) lines.push(`  returned        ${credits(e.amount)}`);
  for (const [name, tx] of [["lock", f.lock], ["settlement", f.settlement], ["refund", f.refund]] as const) {
    if (tx) lines.push(`  ${name.padEnd(15)} ${tx.signature} (slot ${tx.slot})`);
  }
  return [...lines, ...verdict(checks)].join("\n");
}

export function formatReceipt(f: ChargeFacts, checks: readonly Check[]): string {
  const lines = [`Receipt for ${f.jobId}`, `  escrow record   ${f.escrowAddress}${f.fromTransactions ? " (closed: read from its transactions)" : ""}`];
  const e = f.escrow;
  if (e) {
    lines.push(
      `  status          ${e.status}`,
      `  wallet          ${e.wallet}`,
      `  tier            ${tierOfCode(e.tier) ?? `byte ${e.tier}`}`,
      `  locked          ${credits(e.amountLocked)}`,
    );
    if (e.status !== "refunded" && e.status !== "locked") {
      lines.push(
        `  charged         ${credits(e.charge)}`,
        `  worker paid     ${credits(e.workerPaid)} to ${e.worker}${e.workerStaked ? " (staked)" : ""}`,
        `  treasury paid   ${credits(e.treasuryPaid)}`,
        `  proof hash      ${hashText(e.proofHash)}`,
      );
    }
    lines.push(`  returned        ${credits(e.returned)}`);
  }
  for (const [name, tx] of [["lock", f.lock], ["settlement", f.settlement], ["refund", f.refund], ["record closed", f.close]] as const) {
    if (tx) lines.push(`  ${name.padEnd(15)} ${tx.signature} (slot ${tx.slot}${sharedWith(tx)})`);
  }
  return [...lines, ...verdict(checks)].join("\n");
}
