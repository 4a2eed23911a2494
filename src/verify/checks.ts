/**
 * The checks of a charge's receipt: the facts the chain holds about a job (chain/charge-reader.ts)
 * against each other, against what the service said about the job (when it was asked), and
 * against the text the caller received (when given). Pure.
 */
import { hashText, tierOfCode, type ChainTransactionFacts, type ChargeFacts } from "../chain/index.ts";
import { creditsToBaseUnits, outputHash, proofMessage, verifyEd25519 } from "../core/index.ts";

export interface Check {
  name: string;
  ok: boolean;
  /** What was found, or what did not match. */
  detail: string;
}

/** What the service's API said about the job (GET /v1/jobs/{id}). */
export interface ServiceClaims {
  tier: string;
  status: string;
  creditsCharged: number;
  workerAddress: string | null;
  escrowAddress: string | null;
  proofHash: string | null;
}

const check = (name: string, ok: boolean, detail: string): Check => ({ name, ok, detail });

/** floor(amount × bps / 10000), as the program computes it. */
export function shareOf(amount: bigint, bps: number): bigint {
  return (amount * BigInt(bps)) / 10_000n;
}

/** What the programs paid out of `from`, by destination; with `outer`, only what the transaction's instruction at that index made them pay. */
export function transfersFrom(tx: ChainTransactionFacts, from: string, outer?: number): Map<string, bigint> {
  const out = new Map<string, bigint>();
  for (const t of tx.innerInstructions) {
    if (t.kind === "transfer" && t.from === from && t.to && (outer === undefined || t.outer === outer)) out.set(t.to, (out.get(t.to) ?? 0n) + (t.amount ?? 0n));
  }
  return out;
}

function lockChecks(f: ChargeFacts): Check[] {
  const e = f.escrow!;
  const lock = f.lock;
  // One transaction may lock several jobs, of one wallet too (Chain.prepareLockEscrows): this job's
  // lock is the instruction naming it, and only the transfer that instruction made is its lock's.
  const at = lock?.instructions.findIndex((i) => i.kind === "lock" && i.program === "escrow" && i.jobId === f.jobId) ?? -1;
  const ix = at >= 0 ? lock!.instructions[at] : undefined;
  const moved = lock && ix ? transfersFrom(lock, e.vault, at).get(f.escrowPool) : undefined;
  // Likewise one transaction closes several records (the service closes them in batches).
  const closed = f.close?.instructions.find((i) => i.kind === "closeEscrow" && i.program === "escrow" && i.account === f.escrowAddress);
  const record = f.fromTransactions
    ? check("the escrow record was closed after its dispute window; the facts below are read from the job's transactions", f.close?.ok === true && closed?.account === f.escrowAddress, f.close ? `${f.close.signature} at slot ${f.close.slot}` : "no closing transaction")
    : check("the escrow account is the program's record of this job", f.escrowOwner !== null && e.jobId === f.jobId, `${f.escrowAddress} owned by ${f.escrowOwner}, job ${e.jobId}`);
  return [
    record,
    check("the escrow's vault is the wallet's own", e.vault === f.expectedVault, `vault ${e.vault}, wallet ${e.wallet}`),
    check("the lock transaction succeeded", lock?.ok === true, lock ? `${lock.signature} at slot ${lock.slot}${lock.err ? `: ${lock.err}` : ""}` : "not found"),
    check(
      "the lock names this job, its amount and tier",
      ix?.jobId === f.jobId && ix.amount === e.amountLocked && ix.tier === e.tier && ix.owner === e.wallet,
      ix ? `job ${ix.jobId}, ${ix.amount} base units, tier byte ${ix.tier}` : `no escrow-program lock instruction for ${f.jobId}`,
    ),
    check("the lock moved the amount from the vault into the escrow pool", moved === e.amountLocked, moved === e.amountLocked ? `${e.amountLocked} base units` : `moved ${moved ?? 0n} of the ${e.amountLocked} base units locked`),
  ];
}

function settlementChecks(f: ChargeFacts): Check[] {
  const e = f.escrow!;
  const s = f.settlement;
  const ix = s?.instructions.find((i) => i.kind === "settle" && i.program === "escrow");
  const proofHash = hashText(e.proofHash);
  const message = `${f.jobId}:${proofHash}`;
  const proof = s?.proofs.find((p) => p.publicKey === e.worker && p.message === message);
  const bps = e.workerStaked ? f.config.stakedWorkerShareBps : f.config.workerShareBps;
  const worker = shareOf(e.charge, bps);
  const paid = s ? transfersFrom(s, f.escrowPool) : new Map<string, bigint>();
  const toWorker = [...paid].filter(([to]) => to !== f.config.treasury && to !== e.vault);
  return [
    check("the settlement transaction succeeded", s?.ok === true, s ? `${s.signature} at slot ${s.slot}${s.err ? `: ${s.err}` : ""}` : "not found"),
    check("the settlement names the recorded charge, worker and proof hash", ix?.amount === e.charge && ix.publicKey === e.worker && ix.proofHash === proofHash, ix ? `charge ${ix.amount}, worker ${ix.publicKey}` : "no escrow-program settle instruction"),
    check("the same transaction verified the worker's Ed25519 signature over the proof message", proof !== undefined, `${e.worker} signed "${message}"`),
    check("that signature verifies here too", proof !== undefined && verifyEd25519(e.worker, proofMessage(f.jobId, proofHash), proof.signature), "checked with this machine's Ed25519"),
    check("the split: the worker's share, the treasury the rest of the charge", e.workerPaid === worker && e.treasuryPaid === e.charge - worker, `${bps / 100}% of ${e.charge} = ${worker}; recorded ${e.workerPaid} + ${e.treasuryPaid}`),
    check(
      "the program paid exactly that: worker, treasury, and the unused lock back to the vault",
      toWorker.length <= 1 && (toWorker[0]?.[1] ?? 0n) === e.workerPaid && (paid.get(f.config.treasury) ?? 0n) === e.treasuryPaid && (paid.get(e.vault) ?? 0n) === e.returned && e.returned === e.amountLocked - e.charge,
      `worker ${toWorker[0]?.[1] ?? 0n}, treasury ${paid.get(f.config.treasury) ?? 0n}, returned ${paid.get(e.vault) ?? 0n}`,
    ),
  ];
}

function refundChecks(f: ChargeFacts): Check[] {
  const e = f.escrow!;
  const r = f.refund;
  return [
    check("the refund transaction succeeded", r?.ok === true, r ? `${r.signature} at slot ${r.slot}` : "not found"),
    check("the whole lock went back to the vault", e.returned === e.amountLocked && r !== null && transfersFrom(r, f.escrowPool).get(e.vault) === e.amountLocked, `${e.amountLocked} base units`),
  ];
}

function claimChecks(f: ChargeFacts, claims: ServiceClaims): Check[] {
  const e = f.escrow!;
  const out = [check("the service's tier is the one locked", tierOfCode(e.tier) === claims.tier, `service: ${claims.tier}; chain: ${tierOfCode(e.tier) ?? `byte ${e.tier}`}`)];
  out.push(check("the service's escrow address is the program's record", claims.escrowAddress === f.escrowAddress, `service: ${claims.escrowAddress}`));
  if (e.status === "settled" || e.status === "disputed" || e.status === "reversed") {
    out.push(
      check("the service's charge is the settled charge", creditsToBaseUnits(claims.creditsCharged) === e.charge, `service: ${claims.creditsCharged} credits; chain: ${e.charge} base units`),
      check("the service's worker and proof hash are the settled ones", claims.workerAddress === e.worker && claims.proofHash === hashText(e.proofHash), `service: ${claims.workerAddress}, ${claims.proofHash}`),
    );
  }
  return out;
}

/** Every check of the receipt, in the order a reader follows the money. */
export function checkCharge(f: ChargeFacts, options: { claims?: ServiceClaims; outputText?: string } = {}): Check[] {
  if (!f.escrow) return [check("the job has an escrow record in the program", false, `nothing owned by the program at ${f.escrowAddress}`)];
  const checks = lockChecks(f);
  if (f.escrow.status === "refunded") checks.push(...refundChecks(f));
  else if (f.escrow.status === "locked") checks.push(check("the escrow is closed", false, "still locked: neither settled nor refunded yet"));
  else checks.push(...settlementChecks(f));
  if (options.claims) checks.push(...claimChecks(f, options.claims));
  if (options.outputText !== undefined) {
    const hash = outputHash(options.outputText);
    checks.push(check("the text received hashes to the proof", hash === hashText(f.escrow.proofHash), `${hash}`));
  }
  return checks;
}
