/**
 * A seeded property test of the escrow program: thousands of random and mutated instructions
 * (substituted accounts, dropped signatures, flipped or cut data bytes, wrong proofs, clock jumps;
 * disputes, their resolutions, slashes and closed records among them) against one chain, checking
 * after each that no token was created or lost, that the escrow pool holds exactly what the open
 * escrows lock, that a closed escrow's money never changes (only a dispute moves its status, and
 * `close_escrow` may delete it) and a final table slot's neither, that a table counts its locked
 * slots, and that a vault only shrinks through a lock the service authority
 * signed or a withdrawal its own wallet signed.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { AccountRole, type Address, type Instruction } from "@solana/kit";
import { addressBytes, toAddress } from "../../src/chain/addresses.ts";
import { tokenTransfer } from "../../src/chain/instructions.ts";
import { keypairFromSeed, type Keypair } from "../../src/core/keys.ts";
import { MIN_ACTIVE_STAKE } from "../../src/core/payout.ts";
import {
  DEFAULT_RULES,
  ESCROW_PROGRAM,
  EscrowStatus,
  Op,
  Tag,
  configAddress,
  decodeDispute,
  decodeEscrow,
  decodeTable,
  disputeAddress,
  escrowAddress,
  escrowInstructions as ix,
  escrowPoolAddress,
  stakeAddress,
  stakePoolAddress,
  tableAddress,
  vaultAddress,
  vaultAuthorityAddress,
} from "../../src/chain/escrow-program/index.ts";
import { EscrowChain, proofOf, type Sent } from "./harness.ts";
import { ed25519Verify } from "../../src/chain/instructions.ts";
import { settlementMessage } from "../../src/core/settlement-proof.ts";

const SEED = Number(process.env.PROPERTY_SEED ?? 20261122);
const STEPS = Number(process.env.PROPERTY_STEPS ?? 2000);
const U64_MAX = 2n ** 64n - 1n;
const isSigner = (role: AccountRole) => role === AccountRole.READONLY_SIGNER || role === AccountRole.WRITABLE_SIGNER;

/** mulberry32: small, seeded, good enough to pick actions. */
const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
/** The instructions a run must have landed at least once. */
const COVERED_OPS = [Op.dispute, Op.resolve, Op.slash, Op.closeEscrow, Op.lockBatch, Op.settleBatch, Op.refundSlots, Op.closeTable, Op.disputeSlot, Op.resolveSlot];

function random(seed: number) {
  let s = seed >>> 0;
  const next = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  return { next, int, pick: <T>(xs: readonly T[]): T => xs[int(xs.length)]! };
}
type Random = ReturnType<typeof random>;

interface Wallet { key: Keypair; vault: Address; own: Address }
interface Worker { key: Keypair; usdc: Address; stakeSource: Address }

/** The chain, its actors and the accounts whose balances must add up. */
class World {
  readonly wallets: Wallet[];
  readonly workers: Worker[];
  readonly signers: Map<Address, Keypair>;
  readonly usdcAccounts: Address[];
  readonly stakeAccounts: Address[];
  /** Addresses a mutation may substitute for any account. */
  readonly known: Address[];
  readonly closed = new Map<string, Buffer>();
  deleted = 0;
  /** What plain token transfers (a mutation's substituted destination) gave the pool: harmless, and not a lock. */
  donated = 0n;
  /** The treasury owner's stake-token account, where slashed stake goes. */
  readonly treasuryStake: Address;

  constructor(readonly chain: EscrowChain, readonly rng: Random, private readonly ids: Random) {
    this.wallets = Array.from({ length: 4 }, () => {
      const w = chain.fundedWallet(5_000_000n);
      chain.mint(w.own, chain.usdcMint.address, 2_000_000n);
      return { key: w.wallet, vault: w.vault, own: w.own };
    });
    this.workers = Array.from({ length: 3 }, () => {
      const key = chain.newKey();
      const stakeSource = chain.tokenAccount(key.address, chain.stakeMint.address);
      chain.mint(stakeSource, chain.stakeMint.address, MIN_ACTIVE_STAKE * 2n);
      return { key, usdc: chain.tokenAccount(key.address, chain.usdcMint.address), stakeSource };
    });
    this.treasuryStake = chain.tokenAccount(chain.treasuryOwner.address, chain.stakeMint.address);
    chain.mint(chain.treasury, chain.usdcMint.address, 3_000_000n); // what upheld disputes are paid back from
    const actors = [chain.payer, chain.authority, chain.treasuryOwner, chain.newKey(), ...this.wallets.map((w) => w.key), ...this.workers.map((w) => w.key)];
    this.signers = new Map(actors.map((k) => [k.address, k]));
    this.usdcAccounts = [...this.wallets.flatMap((w) => [w.vault, w.own]), ...this.workers.map((w) => w.usdc), chain.treasury, escrowPoolAddress().address];
    this.stakeAccounts = [...this.workers.map((w) => w.stakeSource), stakePoolAddress().address, this.treasuryStake];
    this.known = [
      ...this.usdcAccounts, ...this.stakeAccounts, ...this.signers.keys(), configAddress().address, vaultAuthorityAddress().address,
      ...[0, 1, 2, 3].map((j) => escrowAddress(`job_prop${j}`).address), ...[0, 1].map((j) => disputeAddress(`job_prop${j}`).address), ...this.workers.map((w) => stakeAddress(w.key.address).address),
      chain.usdcMint.address, chain.stakeMint.address, toAddress(new Uint8Array(32).fill(7)),
    ];
  }

  sum(accounts: Address[]): bigint {
    return accounts.reduce((n, a) => n + this.chain.balance(a), 0n);
  }

  /** A window of job ids sliding with the steps, so new jobs keep being locked and closed. */
  /** A fresh job id (a ULID's form) drawn from the seed, so a run replays exactly. */
  newJobId(): string {
    return `job_0${Array.from({ length: 25 }, () => CROCKFORD[this.ids.int(32)]).join("")}`;
  }

  jobAt(step: number): string {
    return `job_prop${Math.floor(step / 30) + this.rng.int(8)}`;
  }

  /** A window of table ids sliding with the steps, so tables keep being opened, filled and closed. */
  tableAt(step: number): bigint {
    return BigInt(Math.floor(step / 60) + this.rng.int(3));
  }

  /** The first table of one of the wallets that `wanted` picks: its wallet and id. */
  tableWhere(wanted: (t: ReturnType<typeof decodeTable>) => boolean): { wallet: Wallet; tableId: bigint } | undefined {
    for (const entry of this.chain.svm.getProgramAccounts(addressBytes(ESCROW_PROGRAM))) {
      const data = entry.account().data();
      if (data[0] !== Tag.table) continue;
      const t = decodeTable(data);
      const wallet = this.wallets.find((w) => w.key.address === t.wallet);
      if (wallet && wanted(t)) return { wallet, tableId: t.tableId };
    }
    return undefined;
  }

  /** A table with a disputed slot, or with one settled within the dispute window. */
  tableDisputable(): { wallet: Wallet; tableId: bigint } | undefined {
    const now = this.chain.now();
    return this.tableWhere((t) =>
      t.slots.some((s) => s.status === "disputed" || (s.status === "settled" && now - (t.openedAt + BigInt(s.closedAfter)) <= DEFAULT_RULES.disputeWindowSeconds)),
    );
  }

  /** A slot of a wallet's table settled within the dispute window, or -1. */
  slotInDisputeWindow(wallet: Address, tableId: bigint): number {
    const data = this.chain.data(tableAddress(wallet, tableId).address);
    if (!data || data[0] !== Tag.table) return -1;
    const table = decodeTable(data);
    const now = this.chain.now();
    return table.slots.findIndex((s) => s.status === "settled" && now - (table.openedAt + BigInt(s.closedAfter)) <= DEFAULT_RULES.disputeWindowSeconds);
  }

  /** The slots of a wallet's table, or none when it does not exist. */
  slotsOf(wallet: Address, tableId: bigint) {
    const data = this.chain.data(tableAddress(wallet, tableId).address);
    return data && data[0] === Tag.table ? decodeTable(data).slots : [];
  }

  amount(balance: bigint): bigint {
    const { rng } = this;
    return rng.pick([0n, 1n, balance, balance + 1n, U64_MAX, BigInt(rng.int(1_000_000)), (balance * BigInt(rng.int(100))) / 100n]);
  }

  /** The wallet of a job's escrow, if it exists. */
  escrowWallet(jobId: string): Address | null {
    const data = this.chain.data(escrowAddress(jobId).address);
    return data && data[0] === Tag.escrow ? decodeEscrow(data).wallet : null;
  }

  /** An escrow a dispute step can move: one disputed, or one settled within the dispute window. */
  disputable(): { jobId: string; disputed: boolean } | undefined {
    for (const entry of this.chain.svm.getProgramAccounts(addressBytes(ESCROW_PROGRAM))) {
      const data = entry.account().data();
      if (data[0] !== Tag.escrow) continue;
      const e = decodeEscrow(data);
      if (e.status === "disputed") return { jobId: e.jobId, disputed: true };
      if (e.status === "settled" && this.chain.now() - e.closedAt <= DEFAULT_RULES.disputeWindowSeconds) return { jobId: e.jobId, disputed: false };
    }
    return undefined;
  }

  /** The addresses' signers, or null when one is not an actor we hold the key of. */
  signersOf(instructions: Instruction[]): Keypair[] | null {
    const out = new Set<Keypair>();
    for (const a of instructions.flatMap((i) => i.accounts ?? [])) {
      if (!("role" in a) || !isSigner(a.role)) continue;
      const key = this.signers.get(a.address);
      if (!key) return null;
      out.add(key);
    }
    return [...out];
  }
}

function action(w: World, step: number): Instruction[] {
  const { chain, rng } = w;
  const wallet = rng.pick(w.wallets);
  const worker = rng.pick(w.workers);
  const jobId = w.jobAt(step);
  const owner = w.escrowWallet(jobId) ?? wallet.key.address;
  switch (rng.int(14)) {
    case 0:
    case 1:
      return [ix.lock({ serviceAuthority: chain.authority.address, payer: chain.payer.address, wallet: wallet.key.address, jobId, tier: rng.int(4), amount: w.amount(chain.balance(wallet.vault)) })];
    case 2:
    case 3: {
      const prover = rng.next() < 0.8 ? worker.key : rng.pick(w.workers).key;
      const p = proofOf(prover, rng.next() < 0.9 ? jobId : w.jobAt(step));
      const data = chain.data(escrowAddress(jobId).address);
      const locked = data && data[0] === Tag.escrow ? decodeEscrow(data).amountLocked : 0n;
      const settle = ix.settle({ serviceAuthority: chain.authority.address, jobId, wallet: owner, worker: worker.key.address, workerTokenAccount: worker.usdc, treasury: chain.treasury, charge: w.amount(locked), proofHash: p.proofHash });
      return rng.next() < 0.9 ? [p.verify, settle] : [settle];
    }
    case 4:
      return [ix.refund({ jobId, wallet: owner, caller: rng.pick([...w.signers.keys()]) })];
    case 5:
      return [ix.withdraw({ wallet: wallet.key.address, destination: wallet.own, amount: w.amount(chain.balance(wallet.vault)) })];
    case 6:
      return [tokenTransfer({ from: wallet.own, to: wallet.vault, authority: wallet.key.address, amount: w.amount(chain.balance(wallet.own)) })];
    case 7:
      return [rng.pick([
        ix.stake({ worker: worker.key.address, payer: chain.payer.address, source: worker.stakeSource, amount: w.amount(chain.balance(worker.stakeSource)) }),
        ix.requestUnstake({ worker: worker.key.address, amount: w.amount(MIN_ACTIVE_STAKE) }),
        ix.withdrawStake({ worker: worker.key.address, destination: worker.stakeSource }),
      ])];
    case 8: {
      // Mostly a move some escrow's status allows (resolve a disputed one, dispute one settled in
      // the window), so that disputes land and get resolved; otherwise at the step's job.
      const target = rng.next() < 0.9 ? w.disputable() : undefined;
      const id = target?.jobId ?? jobId;
      const wallet = w.escrowWallet(id) ?? owner;
      const resolve = ix.resolve({ serviceAuthority: chain.authority.address, jobId: id, wallet, treasury: chain.treasury, treasuryOwner: chain.treasuryOwner.address, outcome: rng.pick(["upheld", "rejected", "inconclusive"] as const) });
      const dispute = ix.dispute({ serviceAuthority: chain.authority.address, payer: chain.payer.address, wallet, jobId: id, callerHash: new Uint8Array(32).fill(rng.int(256)), bond: w.amount(chain.balance(vaultAddress(wallet).address)) });
      return [(target ? target.disputed : rng.next() < 0.5) ? resolve : dispute];
    }
    case 9:
      return [rng.pick([
        ix.slash({ serviceAuthority: chain.authority.address, worker: worker.key.address, destination: w.treasuryStake, treasury: chain.treasury, amount: w.amount(MIN_ACTIVE_STAKE) }),
        ix.closeEscrow({ serviceAuthority: chain.authority.address, jobId, destination: chain.payer.address }),
      ])];
    case 11:
    case 12:
    case 13:
      return tableAction(w, step, wallet, worker);
    default:
      chain.advance(BigInt(rng.pick([1, 60, 121, 400_000])));
      return [];
  }
}

/** A lock of a few jobs into a wallet's table, a settlement of some of its slots, a refund of some, or its closing. */
function tableAction(w: World, step: number, someWallet: Wallet, worker: Worker): Instruction[] {
  const { chain, rng } = w;
  // A slot settled within its dispute window is rare (the clock's long jumps close every window):
  // while one is there, half the table actions dispute or resolve it, and a dispute goes to its
  // table (one elsewhere is only ever refused).
  const disputable = w.tableDisputable();
  const kind = disputable && rng.next() < 0.5 ? 4 : rng.int(5);
  const withLocks = kind === 4 ? disputable : kind === 0 || rng.next() < 0.2 ? undefined : w.tableWhere((t) => (t.open === 0) === (kind === 3));
  const wallet = withLocks?.wallet ?? someWallet;
  const tableId = withLocks?.tableId ?? w.tableAt(step);
  const all = w.slotsOf(wallet.key.address, tableId);
  const locked = all.flatMap((s, i) => (s.status === "locked" ? [i] : []));
  // Mostly distinct locked slots, so that settlements and refunds land; otherwise any index.
  const slots = () => rng.next() < 0.8 && locked.length > 0
    ? locked.filter(() => rng.next() < 0.5).concat(locked[0]!).filter((x, i, xs) => xs.indexOf(x) === i)
    : Array.from({ length: 1 + rng.int(3) }, () => rng.int(all.length + 1));
  const charge = (amount: bigint) => (rng.next() < 0.7 ? (amount * BigInt(rng.int(101))) / 100n : w.amount(amount));
  const table = { wallet: wallet.key.address, tableId };
  switch (kind) {
    case 0: {
      const count = 1 + rng.int(4);
      const amount = () => (rng.next() < 0.8 ? BigInt(1 + rng.int(100_000)) : w.amount(chain.balance(wallet.vault) / BigInt(count)));
      const jobs = Array.from({ length: count }, () => ({ jobId: w.newJobId(), tier: 1, amount: amount() }));
      const firstSlot = rng.next() < 0.9 ? all.length : rng.int(256);
      return [ix.lockBatch({ serviceAuthority: chain.authority.address, payer: chain.payer.address, ...table, capacity: rng.pick([1, 4, 128, 128]), firstSlot, jobs })];
    }
    case 1: {
      const entries = slots().map((slot) => ({ slot, charge: charge(all[slot]?.amount ?? 0n) }));
      const signedFor = rng.next() < 0.9 ? tableAddress(table.wallet, tableId).address : tableAddress(table.wallet, tableId + 1n).address;
      const prover = rng.next() < 0.9 ? worker.key : rng.pick(w.workers).key;
      const message = settlementMessage(addressBytes(signedFor), new Uint8Array(32).fill(rng.int(256)), entries);
      const settle = ix.settleBatch({ serviceAuthority: chain.authority.address, ...table, worker: worker.key.address, workerTokenAccount: worker.usdc, treasury: chain.treasury });
      return [ed25519Verify({ publicKey: prover.publicKey, signature: prover.sign(message), message }), settle];
    }
    case 2:
      return [ix.refundSlots({ ...table, slots: slots(), caller: rng.pick([...w.signers.keys()]) })];
    case 4: {
      // Mostly a move a slot's status allows: resolve a disputed slot, dispute a settled one.
      const disputed = all.findIndex((s) => s.status === "disputed");
      // The table was picked for a slot settled within the window (tableDisputable): that one.
      const settled = w.slotInDisputeWindow(wallet.key.address, tableId);
      const slot = disputed >= 0 ? disputed : settled >= 0 && rng.next() < 0.9 ? settled : rng.int(all.length + 1);
      if (disputed >= 0) {
        const outcome = rng.pick(["upheld", "rejected", "inconclusive"] as const);
        return [ix.resolveSlot({ serviceAuthority: chain.authority.address, ...table, slot, treasury: chain.treasury, treasuryOwner: chain.treasuryOwner.address, outcome })];
      }
      const bond = rng.next() < 0.7 ? BigInt(rng.int(10_000)) : w.amount(chain.balance(wallet.vault));
      return [ix.disputeSlot({ serviceAuthority: chain.authority.address, payer: chain.payer.address, ...table, slot, callerHash: new Uint8Array(32).fill(rng.int(256)), bond })];
    }
    default:
      return [ix.closeTable({ serviceAuthority: chain.authority.address, ...table, destination: chain.payer.address })];
  }
}

/** The last instruction with one account substituted or unsigned, a data byte changed, or data cut. */
function mutate(w: World, instructions: Instruction[]): Instruction[] {
  const { rng } = w;
  const at = instructions.length - 1;
  const target = instructions[at]!;
  const accounts = [...(target.accounts ?? [])];
  let data = Uint8Array.from(target.data ?? []);
  const i = rng.int(Math.max(1, accounts.length));
  const replace = (n: number, change: object) => {
    if (accounts[n]) accounts[n] = { ...accounts[n]!, ...change } as (typeof accounts)[number];
  };
  switch (rng.int(5)) {
    case 0:
      replace(i, { address: rng.pick(w.known) });
      break;
    case 1: {
      // Drop one signature: the refusal that matters most.
      const signing = accounts.flatMap((a, n) => ("role" in a && isSigner(a.role) ? [n] : []));
      replace(signing.length > 0 ? rng.pick(signing) : i, { role: AccountRole.READONLY });
      break;
    }
    case 2:
      if (data.length > 0) data[rng.int(data.length)] = rng.int(256);
      break;
    case 3:
      data = data.subarray(0, rng.int(data.length + 1));
      break;
    default:
      if (accounts.length > 1) accounts.splice(i, 1);
  }
  return [...instructions.slice(0, at), { ...target, accounts, data }];
}

/** A vault that shrank did so in a landed lock or dispute bond the authority signed, or a withdrawal its wallet signed. */
function checkVaults(w: World, before: bigint[], instructions: Instruction[], signing: Keypair[], sent: Sent, context: string): void {
  const op = instructions.find((i) => i.programAddress === ESCROW_PROGRAM)?.data?.[0];
  const signed = new Set(signing.map((s) => s.address));
  w.wallets.forEach((wallet, i) => {
    if (w.chain.balance(wallet.vault) >= before[i]!) return;
    assert.ok(sent.ok, context);
    const byLock = (op === Op.lock || op === Op.lockBatch || op === Op.dispute || op === Op.disputeSlot) && signed.has(w.chain.authority.address);
    const byOwner = op === Op.withdraw && signed.has(wallet.key.address);
    assert.ok(byLock || byOwner, `a vault shrank by op ${op} at ${context}`);
  });
}

/**
 * The pool holds exactly the open locks and open disputes' bonds; closed escrows add up and their
 * money never changes (a dispute changes only the status byte).
 */
function checkEscrows(w: World, context: string): void {
  let lockedTotal = 0n;
  const present = new Set<string>();
  for (const entry of w.chain.svm.getProgramAccounts(addressBytes(ESCROW_PROGRAM))) {
    const data = Buffer.from(entry.account().data());
    if (data[0] === Tag.dispute && data[1] === 0) lockedTotal += decodeDispute(data).bond;
    if (data[0] === Tag.table) {
      lockedTotal += checkTable(w, Buffer.from(entry.address).toString("hex"), data, present, context);
      continue;
    }
    if (data[0] !== Tag.escrow) continue;
    present.add(Buffer.from(entry.address).toString("hex"));
    if (data[1] === EscrowStatus.locked) {
      lockedTotal += data.readBigUInt64LE(168);
      continue;
    }
    const key = Buffer.from(entry.address).toString("hex");
    const earlier = w.closed.get(key);
    const money = Buffer.concat([data.subarray(0, 1), data.subarray(2)]);
    if (earlier) {
      assert.ok(earlier.equals(money), `a closed escrow's money changed at ${context}`);
      continue;
    }
    w.closed.set(key, money);
    const e = decodeEscrow(data);
    assert.equal(e.returned + (e.status === "refunded" ? 0n : e.charge), e.amountLocked, `escrow ${e.jobId} does not add up`);
    assert.equal(e.workerPaid + e.treasuryPaid, e.charge);
  }
  assert.equal(w.chain.balance(escrowPoolAddress().address), lockedTotal + w.donated, `the pool differs from the open locks and bonds at ${context}`);
  // close_escrow deleted these; their job id may be locked again (the service never reuses one).
  for (const key of w.closed.keys()) if (!present.has(key)) ((w.deleted += 1), w.closed.delete(key));
}

/** A table's slots: what its locked ones hold (returned), and a final slot's money never changes. */
function checkTable(w: World, address: string, data: Buffer, present: Set<string>, context: string): bigint {
  const table = decodeTable(data);
  let locked = 0n;
  table.slots.forEach((slot, i) => {
    if (slot.status === "locked") {
      locked += slot.amount;
      return;
    }
    const key = `${address}:${i}`;
    present.add(key);
    // A dispute and its outcome move only the status; the charge it pays back comes from the treasury.
    const money = `${slot.status === "refunded" ? "refunded" : "charged"}:${slot.amount}:${slot.workerStaked}`;
    const earlier = w.closed.get(key);
    if (earlier) assert.equal(earlier.toString(), money, `a final slot's money changed at ${context}`);
    else w.closed.set(key, Buffer.from(money));
  });
  assert.equal(table.open, table.slots.filter((s) => s.status === "locked" || s.status === "disputed").length, `a table's open count is off at ${context}`);
  return locked;
}

test(`random and mutated instructions create or lose no money (seed ${SEED}, ${STEPS} steps)`, async (t) => {
  // Keys and job ids come from the seed too (from generators of their own, so the steps' draws
  // stay as they were): a seed is one run, replayed exactly.
  const keys = random(SEED + 1);
  const newKey = () => keypairFromSeed(Uint8Array.from({ length: 32 }, () => keys.int(256)));
  const w = new World(await EscrowChain.open(DEFAULT_RULES, newKey), random(SEED), random(SEED + 2));
  const usdcTotal = w.sum(w.usdcAccounts);
  const stakeTotal = w.sum(w.stakeAccounts);
  let landed = 0;
  let mutated = 0;
  const byOp = new Map<number, number>();
  // Runs of one seed still differ (20-28 escrows closed, 284-346 transactions landed by step 2,000
  // in thirteen runs; what else varies between them is not pinned down), so
  // a run that has not yet landed every kind of instruction, or closed enough escrows, goes on,
  // up to five times as long: the coverage checks below must not hang on a run's luck.
  const covered = () => COVERED_OPS.every((op) => (byOp.get(op) ?? 0) > 0) && w.closed.size >= STEPS / 100;
  for (let step = 0; step < STEPS || (step < 5 * STEPS && !covered()); step++) {
    let instructions = action(w, step);
    if (instructions.length === 0) continue;
    if (w.rng.next() < 0.4) {
      const candidate = mutate(w, instructions);
      if (w.signersOf(candidate)) ((instructions = candidate), mutated++);
    }
    const before = w.wallets.map((wallet) => w.chain.balance(wallet.vault));
    const pool = w.chain.balance(escrowPoolAddress().address);
    const signing = w.signersOf(instructions)!;
    const sent = w.chain.send(instructions, signing);
    if (sent.ok && instructions.every((i) => i.programAddress !== ESCROW_PROGRAM)) w.donated += w.chain.balance(escrowPoolAddress().address) - pool;
    if (sent.ok) {
      landed++;
      const op = instructions.find((i) => i.programAddress === ESCROW_PROGRAM)?.data?.[0];
      if (op !== undefined) byOp.set(op, (byOp.get(op) ?? 0) + 1);
    }
    const context = `step ${step} (seed ${SEED}): ${sent.err ?? "ok"}`;
    assert.equal(w.sum(w.usdcAccounts), usdcTotal, `USDC created or lost at ${context}`);
    assert.equal(w.sum(w.stakeAccounts), stakeTotal, `stake tokens created or lost at ${context}`);
    checkVaults(w, before, instructions, signing, sent, context);
    checkEscrows(w, context);
  }
  t.diagnostic(`${landed} transactions landed, ${mutated} mutated, ${w.closed.size} escrows closed, ${w.deleted} records deleted`);
  const name = (op: number) => Object.entries(Op).find(([, v]) => v === op)?.[0] ?? String(op);
  t.diagnostic(`landed by instruction: ${[...byOp].sort(([a], [b]) => a - b).map(([op, n]) => `${name(op)} ${n}`).join(", ")}`);
  for (const op of COVERED_OPS) assert.ok((byOp.get(op) ?? 0) > 0, `no ${name(op)} landed`);
  // The run must exercise the program, not only its refusals.
  assert.ok(landed > STEPS / 10, `only ${landed} transactions landed`);
  assert.ok(w.closed.size >= STEPS / 100, `only ${w.closed.size} escrows closed`);
  assert.ok(mutated > STEPS / 5);
});
