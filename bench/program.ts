/**
 * Compute units of each escrow-program instruction, as LiteSVM meters them running the committed
 * program/escrow.so, with each transaction's size and the signatures its fee is charged for.
 * Varying addresses change how many bumps a program-address search tries, so each instruction
 * runs `samples` times with fresh keys and the median and maximum are printed; the table
 * instructions also per job, and how many jobs one transaction holds when the service pays.
 * Run: npm run bench:program [samples=20]
 */
import { statSync } from "node:fs";
import { generateKeypair, type Keypair } from "../src/core/keys.ts";
import { newId } from "../src/core/ids.ts";
import { leafBytes, leafHash, merkleRoot, settlementMessage, type SettlementEntry } from "../src/core/settlement-proof.ts";
import { addressBytes } from "../src/chain/addresses.ts";
import { ed25519Verify } from "../src/chain/instructions.ts";
import { buildTransaction } from "../src/chain/wire.ts";
import { MIN_ACTIVE_STAKE } from "../src/core/payout.ts";
import { DEFAULT_RULES, decodeTable, escrowInstructions as ix, tableAddress } from "../src/chain/escrow-program/index.ts";
import type { Address, Instruction } from "@solana/kit";
import { EscrowChain, PROGRAM_PATH, proofOf, type Sent } from "../test/program/harness.ts";
import { percentile } from "./support.ts";

const samples = Number(process.argv[2] ?? 20);
const results = new Map<string, { sent: Sent[]; jobs: number }>();
const record = (name: string, sent: Sent, jobs = 1) => {
  if (!sent.ok) throw new Error(`${name} failed: ${sent.err}\n${sent.logs.join("\n")}`);
  results.set(name, { sent: [...(results.get(name)?.sent ?? []), sent], jobs });
};

const locks = (n: number, amount = 100_000n) => Array.from({ length: n }, () => ({ jobId: newId("job"), tier: 1, amount }));
/** The table's next slot: a lock names it. */
const nextSlot = (wallet: Address, tableId: bigint) => {
  const data = chain.data(tableAddress(wallet, tableId).address);
  return data ? decodeTable(data).slots.length : 0;
};
const lockBatch = (wallet: Address, tableId: bigint, n: number): Instruction =>
  ix.lockBatch({ serviceAuthority: chain.authority.address, payer: chain.payer.address, wallet, tableId, capacity: 128, firstSlot: nextSlot(wallet, tableId), jobs: locks(n) });
/** The worker's signature over a settlement of `entries` of a table, then settle_batch. */
function settlement(worker: Keypair, workerAccount: Address, wallet: Address, tableId: bigint, entries: SettlementEntry[]): Instruction[] {
  const root = merkleRoot(entries.map((_, i) => leafHash(leafBytes({ jobId: newId("job"), outputHash: new Uint8Array(32).fill(i), promptTokens: 100, completionTokens: 200 }))));
  const message = settlementMessage(addressBytes(tableAddress(wallet, tableId).address), root, entries);
  return [
    ed25519Verify({ publicKey: worker.publicKey, signature: worker.sign(message), message }),
    ix.settleBatch({ serviceAuthority: chain.authority.address, wallet, tableId, worker: worker.address, workerTokenAccount: workerAccount, treasury: chain.treasury }),
  ];
}

/** Escrow tables: locks, settlements and refunds of one and of as many jobs as a transaction holds. */
function tableSamples(i: number, worker: Keypair, workerAccount: Address): void {
  const funded = chain.fundedWallet(100_000_000n);
  const w = funded.wallet.address;
  const id = BigInt(i);
  record("lock_batch (1 job, new table)", chain.send([lockBatch(w, id, 1)], [chain.authority]));
  record("lock_batch (24 jobs)", chain.send([lockBatch(w, id, 24)], [chain.authority]), 24);
  chain.send([lockBatch(w, id, 24)], [chain.authority]);
  record("settle_batch (1 job)", chain.send(settlement(worker, workerAccount, w, id, [{ slot: 0, charge: 50_000n }]), [chain.authority]));
  const entries = Array.from({ length: 40 }, (_, k) => ({ slot: 1 + k, charge: 50_000n }));
  record("settle_batch (40 jobs)", chain.send(settlement(worker, workerAccount, w, id, entries), [chain.authority]), 40);
  const disputed = { serviceAuthority: chain.authority.address, wallet: w, tableId: id, slot: 1 };
  record("dispute_slot (with a bond)", chain.send([ix.disputeSlot({ ...disputed, payer: chain.payer.address, callerHash: new Uint8Array(32).fill(3), bond: 10_000n })], [chain.authority]));
  chain.mint(chain.treasury, chain.usdcMint.address, 50_000n);
  record("resolve_slot (upheld)", chain.send([ix.resolveSlot({ ...disputed, treasury: chain.treasury, treasuryOwner: chain.treasuryOwner.address, outcome: "upheld" })], [chain.authority, chain.treasuryOwner]));
  record("refund_slots (authority, 7 slots)", chain.send([ix.refundSlots({ wallet: w, tableId: id, slots: [41, 42, 43, 44, 45, 46, 47], caller: chain.authority.address })], [chain.authority]), 7);
  chain.advance(DEFAULT_RULES.jobTimeoutSeconds + 1n);
  record("refund_slots (wallet, after timeout)", chain.send([ix.refundSlots({ wallet: w, tableId: id, slots: [48], caller: w })], [funded.wallet]));
  chain.advance(DEFAULT_RULES.disputeWindowSeconds + 1n);
  record("close_table", chain.send([ix.closeTable({ serviceAuthority: chain.authority.address, wallet: w, tableId: id, destination: chain.payer.address })], [chain.authority]));
}

/** The most jobs one lock_batch and one settle_batch transaction holds when the service authority pays its fee, as in service. */
function mostPerTransaction(): { lock: number; settle: number } {
  const worker = generateKeypair(), wallet = generateKeypair().address;
  const fits = (instructions: Instruction[]) => {
    try {
      buildTransaction(chain.authority, instructions, new Uint8Array(32), []);
      return true;
    } catch (e) {
      if (e instanceof RangeError) return false;
      throw e;
    }
  };
  const most = (build: (n: number) => Instruction[]) => {
    let n = 1;
    while (n < 255 && fits(build(n + 1))) n++;
    return n;
  };
  const owner = { serviceAuthority: chain.authority.address, payer: chain.authority.address, wallet, tableId: 1n, capacity: 255, firstSlot: 0 };
  return {
    lock: most((n) => [ix.lockBatch({ ...owner, jobs: locks(n) })]),
    settle: most((n) => settlement(worker, worker.address, wallet, 1n, Array.from({ length: n }, (_, slot) => ({ slot, charge: 1n })))),
  };
}

const chain = await EscrowChain.open();
for (let i = 0; i < Math.min(samples, 5); i++) record("initialize", (await EscrowChain.open()).initialized);
for (let i = 0; i < samples; i++) {
  const wallet = generateKeypair();
  record("open_vault", chain.send([ix.openVault({ payer: chain.payer.address, wallet: wallet.address, usdcMint: chain.usdcMint.address })]));
  const funded = chain.fundedWallet(10_000_000n);
  record("withdraw", chain.send([ix.withdraw({ wallet: funded.wallet.address, destination: funded.own, amount: 1_000_000n })], [funded.wallet]));

  const worker = generateKeypair();
  const workerAccount = chain.tokenAccount(worker.address, chain.usdcMint.address);
  const stakeSource = chain.tokenAccount(worker.address, chain.stakeMint.address);
  chain.mint(stakeSource, chain.stakeMint.address, MIN_ACTIVE_STAKE * 2n);
  record("stake (first)", chain.send([ix.stake({ worker: worker.address, payer: chain.payer.address, source: stakeSource, amount: MIN_ACTIVE_STAKE })], [worker]));
  record("stake (more)", chain.send([ix.stake({ worker: worker.address, payer: chain.payer.address, source: stakeSource, amount: 1n })], [worker]));

  for (const [name, charge] of [["settle (staked worker)", 250_000n], ["settle (whole lock)", 1_000_000n]] as const) {
    const jobId = `job_bench_${i}_${name.length}`;
    record("lock", chain.send([ix.lock({ serviceAuthority: chain.authority.address, payer: chain.payer.address, wallet: funded.wallet.address, jobId, tier: 1, amount: 1_000_000n })], [chain.authority]));
    const p = proofOf(worker, jobId);
    record(name, chain.send([p.verify, ix.settle({ serviceAuthority: chain.authority.address, jobId, wallet: funded.wallet.address, worker: worker.address, workerTokenAccount: workerAccount, treasury: chain.treasury, charge, proofHash: p.proofHash })], [chain.authority]));
  }
  const unstaked = generateKeypair();
  const unstakedAccount = chain.tokenAccount(unstaked.address, chain.usdcMint.address);
  const jobId = `job_bench_${i}_unstaked`;
  chain.send([ix.lock({ serviceAuthority: chain.authority.address, payer: chain.payer.address, wallet: funded.wallet.address, jobId, tier: 1, amount: 1_000_000n })], [chain.authority]);
  const p = proofOf(unstaked, jobId);
  record("settle (no stake account)", chain.send([p.verify, ix.settle({ serviceAuthority: chain.authority.address, jobId, wallet: funded.wallet.address, worker: unstaked.address, workerTokenAccount: unstakedAccount, treasury: chain.treasury, charge: 330_000n, proofHash: p.proofHash })], [chain.authority]));

  const refunded = `job_bench_${i}_refund`;
  chain.send([ix.lock({ serviceAuthority: chain.authority.address, payer: chain.payer.address, wallet: funded.wallet.address, jobId: refunded, tier: 1, amount: 500_000n })], [chain.authority]);
  record("refund (authority)", chain.send([ix.refund({ jobId: refunded, wallet: funded.wallet.address, caller: chain.authority.address })], [chain.authority]));
  const late = `job_bench_${i}_late`;
  chain.send([ix.lock({ serviceAuthority: chain.authority.address, payer: chain.payer.address, wallet: funded.wallet.address, jobId: late, tier: 1, amount: 500_000n })], [chain.authority]);
  chain.advance(DEFAULT_RULES.jobTimeoutSeconds + 1n);
  record("refund (wallet, after timeout)", chain.send([ix.refund({ jobId: late, wallet: funded.wallet.address, caller: funded.wallet.address })], [funded.wallet]));

  const disputed = `job_bench_${i}_disputed`;
  chain.send([ix.lock({ serviceAuthority: chain.authority.address, payer: chain.payer.address, wallet: funded.wallet.address, jobId: disputed, tier: 1, amount: 500_000n })], [chain.authority]);
  const d = proofOf(worker, disputed);
  chain.send([d.verify, ix.settle({ serviceAuthority: chain.authority.address, jobId: disputed, wallet: funded.wallet.address, worker: worker.address, workerTokenAccount: workerAccount, treasury: chain.treasury, charge: 400_000n, proofHash: d.proofHash })], [chain.authority]);
  record("dispute", chain.send([ix.dispute({ serviceAuthority: chain.authority.address, payer: chain.payer.address, wallet: funded.wallet.address, jobId: disputed, callerHash: new Uint8Array(32).fill(i + 1), bond: 100_000n })], [chain.authority]));
  chain.mint(chain.treasury, chain.usdcMint.address, 400_000n);
  const resolved = { serviceAuthority: chain.authority.address, jobId: disputed, wallet: funded.wallet.address, treasury: chain.treasury, treasuryOwner: chain.treasuryOwner.address };
  record("resolve (upheld)", chain.send([ix.resolve({ ...resolved, outcome: "upheld" })], [chain.authority, chain.treasuryOwner]));
  const treasuryStake = chain.tokenAccount(chain.treasuryOwner.address, chain.stakeMint.address);
  record("slash", chain.send([ix.slash({ serviceAuthority: chain.authority.address, worker: worker.address, destination: treasuryStake, treasury: chain.treasury, amount: 1n })], [chain.authority]));

  const closable = `job_bench_${i}_closed`;
  chain.send([ix.lock({ serviceAuthority: chain.authority.address, payer: chain.payer.address, wallet: funded.wallet.address, jobId: closable, tier: 1, amount: 500_000n })], [chain.authority]);
  chain.send([ix.refund({ jobId: closable, wallet: funded.wallet.address, caller: chain.authority.address })], [chain.authority]);
  chain.advance(DEFAULT_RULES.disputeWindowSeconds + 1n);
  record("close_escrow", chain.send([ix.closeEscrow({ serviceAuthority: chain.authority.address, jobId: closable, destination: chain.payer.address })], [chain.authority]));

  record("request_unstake", chain.send([ix.requestUnstake({ worker: worker.address, amount: MIN_ACTIVE_STAKE - 1n })], [worker]));
  chain.advance(DEFAULT_RULES.unstakeCooldownSeconds);
  record("withdraw_stake", chain.send([ix.withdrawStake({ worker: worker.address, destination: stakeSource })], [worker]));
  tableSamples(i, worker, workerAccount);
}

console.log(`program/escrow.so: ${statSync(PROGRAM_PATH).size} bytes; ${samples} samples per instruction (initialize: ${Math.min(samples, 5)})`);
const columns = (cells: (string | number)[]) => cells.map((c, i) => (i === 0 ? String(c).padEnd(38) : String(c).padStart(10))).join("");
console.log(columns(["instruction", "CU p50", "CU max", "tx bytes", "fee sigs", "jobs", "CU/job"]));
for (const [name, { sent, jobs }] of results) {
  const units = sent.map((s) => Number(s.computeUnits));
  console.log(columns([name, percentile(units, 50), Math.max(...units), sent[0]!.bytes, sent[0]!.signatures, jobs, Math.round(percentile(units, 50) / jobs)]));
}
const most = mostPerTransaction();
console.log(`one 1,232-byte transaction paid by the service authority holds ${most.lock} jobs' locks or ${most.settle} jobs' settlement`);
