/**
 * Escrow tables instruction by instruction: many jobs of a wallet locked in one instruction into
 * one account, one worker's jobs settled against one signature over a Merkle root, a slot refunded
 * by anyone after the timeout while the rest settle, the table closed once every slot is final,
 * and every refusal, read back from the chain.
 */
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import type { Address, Instruction } from "@solana/kit";
import { addressBytes } from "../../src/chain/addresses.ts";
import { ed25519Verify } from "../../src/chain/instructions.ts";
import { generateKeypair, type Keypair } from "../../src/core/keys.ts";
import { newId } from "../../src/core/ids.ts";
import { splitPayout } from "../../src/core/payout.ts";
import { leafBytes, leafHash, merkleRoot, settlementMessage, type SettlementEntry } from "../../src/core/settlement-proof.ts";
import {
  SLOT_SIZE,
  TABLE_APPEND_WINDOW_S,
  TABLE_HEADER_SIZE,
  decodeDispute,
  decodeTable,
  escrowInstructions as ix,
  slotDisputeAddress,
  escrowPoolAddress,
  stakeAddress,
  tableAddress,
  type BatchLock,
} from "../../src/chain/escrow-program/index.ts";
import { EscrowChain, customError, demote, substitute } from "./harness.ts";

let tables = 0n;
const newJobId = () => newId("job");

describe("escrow tables", () => {
  let chain: EscrowChain;
  let worker: Keypair;
  let workerAccount: Address;
  before(async () => {
    chain = await EscrowChain.open();
    worker = generateKeypair();
    workerAccount = chain.tokenAccount(worker.address, chain.usdcMint.address);
  });

  const batch = (amounts: bigint[]): BatchLock[] => amounts.map((amount) => ({ jobId: newJobId(), tier: 1, amount }));
  /** The table's next slot, which a lock names. */
  const nextSlot = (wallet: Address, tableId: bigint) => {
    const data = chain.data(tableAddress(wallet, tableId).address);
    return data && data.length > 0 ? decodeTable(data).slots.length : 0;
  };
  function lockIx(wallet: Address, tableId: bigint, locks: BatchLock[], capacity = 128, firstSlot = nextSlot(wallet, tableId)): Instruction {
    return ix.lockBatch({ serviceAuthority: chain.authority.address, payer: chain.payer.address, wallet, tableId, capacity, firstSlot, jobs: locks });
  }
  function lockedTable(amounts: bigint[], funded = 10_000_000n) {
    const w = chain.fundedWallet(funded);
    const tableId = ++tables;
    const locks = batch(amounts);
    chain.expectOk(chain.send([lockIx(w.wallet.address, tableId, locks)], [chain.authority]));
    return { ...w, tableId, locks, table: tableAddress(w.wallet.address, tableId).address };
  }
  /** The worker's signature over the settlement of `entries`, and the settle_batch after it. */
  function settlement(t: { wallet: Keypair; tableId: bigint; table: Address }, entries: SettlementEntry[], o: { by?: Keypair; signedFor?: Address } = {}): Instruction[] {
    const by = o.by ?? worker;
    const leaves = entries.map((e, i) => leafHash(leafBytes({ jobId: `job_${i}`, outputHash: new Uint8Array(32).fill(i), promptTokens: 10, completionTokens: 20 })));
    const root = merkleRoot(leaves);
    const message = settlementMessage(addressBytes(o.signedFor ?? t.table), root, entries);
    return [
      ed25519Verify({ publicKey: by.publicKey, signature: by.sign(message), message }),
      ix.settleBatch({
        serviceAuthority: chain.authority.address, wallet: t.wallet.address, tableId: t.tableId, worker: by.address,
        workerTokenAccount: by === worker ? workerAccount : chain.tokenAccount(by.address, chain.usdcMint.address),
        treasury: chain.treasury,
      }),
    ];
  }

  test("lock_batch moves the jobs' total from the vault to the pool in one account of 12 bytes a job", () => {
    const pool = chain.balance(escrowPoolAddress().address);
    const t = lockedTable([100_000n, 200_000n, 300_000n]);
    assert.equal(chain.balance(t.vault), 10_000_000n - 600_000n);
    assert.equal(chain.balance(escrowPoolAddress().address), pool + 600_000n);
    const table = decodeTable(chain.data(t.table)!);
    assert.equal(table.wallet, t.wallet.address);
    assert.equal(table.vault, t.vault);
    assert.equal(table.capacity, 128);
    assert.equal(table.open, 3);
    assert.deepEqual(table.slots.map((s) => [s.status, s.amount, s.lockedAt]), [
      ["locked", 100_000n, chain.now()], ["locked", 200_000n, chain.now()], ["locked", 300_000n, chain.now()],
    ]);
    const rent = chain.svm.minimumBalanceForRentExemption(BigInt(TABLE_HEADER_SIZE + 128 * SLOT_SIZE));
    assert.equal(chain.svm.getBalance(addressBytes(t.table)), rent);
    assert.ok(rent / 128n <= 100_000n, `a full table parks ${rent / 128n} lamports of rent a job`);
  });

  test("later locks join the table in order until its append window closes or it is full", () => {
    const t = lockedTable([1n]);
    chain.advance(5n);
    chain.expectOk(chain.send([lockIx(t.wallet.address, t.tableId, batch([2n, 3n]))], [chain.authority]));
    const slots = decodeTable(chain.data(t.table)!).slots;
    assert.deepEqual(slots.map((s) => s.amount), [1n, 2n, 3n]);
    assert.equal(slots[1]!.lockedAt - slots[0]!.lockedAt, 5n);
    chain.advance(BigInt(TABLE_APPEND_WINDOW_S));
    assert.equal(chain.send([lockIx(t.wallet.address, t.tableId, batch([4n]))], [chain.authority]).err, customError("tableFull"));

    const small = chain.fundedWallet(1_000n);
    const id = ++tables;
    chain.expectOk(chain.send([lockIx(small.wallet.address, id, batch([1n, 1n]), 3)], [chain.authority]));
    assert.equal(chain.send([lockIx(small.wallet.address, id, batch([1n, 1n]), 3)], [chain.authority]).err, customError("tableFull"));
    chain.expectOk(chain.send([lockIx(small.wallet.address, id, batch([1n]), 3)], [chain.authority]));
  });

  test("a lock lands on the slots it names or not at all: the table's next, 0 for a new table", () => {
    const t = lockedTable([1n, 2n]);
    assert.equal(chain.send([lockIx(t.wallet.address, t.tableId, batch([3n]), 128, 1)], [chain.authority]).err, customError("wrongSlot"), "slot 1 is taken");
    assert.equal(chain.send([lockIx(t.wallet.address, t.tableId, batch([3n]), 128, 3)], [chain.authority]).err, customError("wrongSlot"), "slot 2 comes first");
    chain.expectOk(chain.send([lockIx(t.wallet.address, t.tableId, batch([3n]), 128, 2)], [chain.authority]));
    const fresh = chain.fundedWallet(10n);
    assert.equal(chain.send([lockIx(fresh.wallet.address, ++tables, batch([1n]), 128, 1)], [chain.authority]).err, customError("wrongSlot"));
  });

  test("lock_batch refusals: beyond the vault, zero, another wallet's table, unsigned, no capacity", () => {
    const w = chain.fundedWallet(1_000n);
    const other = chain.fundedWallet(1_000n);
    const send = (i: Instruction) => chain.send([i], [chain.authority]).err;
    assert.equal(send(lockIx(w.wallet.address, ++tables, batch([600n, 600n]))), customError("insufficientFunds"));
    assert.equal(send(lockIx(w.wallet.address, ++tables, batch([1n, 0n]))), customError("invalidAmount"));
    assert.equal(send(lockIx(w.wallet.address, ++tables, batch([1n, 1n]), 1)), customError("invalidAmount"));
    assert.equal(send(lockIx(w.wallet.address, ++tables, [])), customError("invalidAmount"));
    const id = ++tables;
    chain.expectOk(chain.send([lockIx(w.wallet.address, id, batch([1n]))], [chain.authority]));
    const intoOthers = substitute(lockIx(other.wallet.address, ++tables, batch([1n])), 3, tableAddress(w.wallet.address, id).address);
    assert.equal(send(intoOthers), customError("wrongAddress"));
    assert.equal(chain.send([demote(lockIx(w.wallet.address, ++tables, batch([1n])), 1)]).err, customError("missingSigner"));
    const truncated = lockIx(w.wallet.address, ++tables, batch([1n]));
    assert.equal(send({ ...truncated, data: truncated.data!.slice(0, -1) }), customError("invalidInstruction"));
  });

  test("settle_batch pays each slot's charge against one signature of the worker over the root", () => {
    const t = lockedTable([100_000n, 200_000n, 300_000n, 400_000n]);
    const before = { worker: chain.balance(workerAccount), treasury: chain.balance(chain.treasury), vault: chain.balance(t.vault), pool: chain.balance(escrowPoolAddress().address) };
    const entries = [{ slot: 0, charge: 90_000n }, { slot: 2, charge: 300_000n }, { slot: 3, charge: 10_000n }];
    const sent = chain.expectOk(chain.send(settlement(t, entries), [chain.authority]));
    assert.equal(sent.signatures, 3, "the payer's, the service's and the worker's for three jobs (in service the service pays: two)");
    const splits = entries.map((e) => splitPayout(Number(e.charge / 10_000n), false));
    const sum = (f: (s: (typeof splits)[number]) => bigint) => splits.reduce((n, s) => n + f(s), 0n);
    assert.equal(chain.balance(workerAccount), before.worker + sum((s) => s.worker));
    assert.equal(chain.balance(chain.treasury), before.treasury + sum((s) => s.treasury));
    assert.equal(chain.balance(t.vault), before.vault + (100_000n - 90_000n) + 0n + (400_000n - 10_000n));
    assert.equal(chain.balance(escrowPoolAddress().address), before.pool - 800_000n);
    const table = decodeTable(chain.data(t.table)!);
    assert.deepEqual(table.slots.map((s) => [s.status, s.amount]), [["settled", 90_000n], ["locked", 200_000n], ["settled", 300_000n], ["settled", 10_000n]]);
    assert.equal(table.open, 1);
    assert.equal(chain.send(settlement(t, [{ slot: 0, charge: 1n }]), [chain.authority]).err, customError("wrongStatus", 1), "a slot settles once");
  });

  test("settle_batch refusals: signed for another table, by another key, beyond the lock, a slot not locked yet, a malformed message", () => {
    const t = lockedTable([100_000n, 100_000n]);
    const other = lockedTable([5n]);
    const impostor = generateKeypair();
    const entries = [{ slot: 0, charge: 50_000n }];
    assert.equal(chain.send(settlement(t, entries, { signedFor: other.table }), [chain.authority]).err, customError("proofMissing", 1));
    const named = settlement(t, entries)[1]!;
    const message = settlementMessage(addressBytes(t.table), new Uint8Array(32), [{ slot: 0, charge: 1n }, { slot: 1, charge: 1n }]).slice(0, -9);
    const malformed = ed25519Verify({ publicKey: worker.publicKey, signature: worker.sign(message), message });
    assert.equal(chain.send([malformed, named], [chain.authority]).err, customError("invalidInstruction", 1), "a count its entries do not fill");
    const byImpostor = settlement(t, entries, { by: impostor })[0]!;
    assert.equal(chain.send([byImpostor, named], [chain.authority]).err, customError("proofMissing", 1), "the impostor's signature does not cover the named worker");
    assert.equal(chain.send(settlement(t, [{ slot: 1, charge: 100_001n }]), [chain.authority]).err, customError("chargeExceedsLock", 1));
    assert.equal(chain.send(settlement(t, [{ slot: 2, charge: 1n }]), [chain.authority]).err, customError("invalidInstruction", 1));
    assert.equal(chain.send(settlement(t, [{ slot: 0, charge: 1n }, { slot: 0, charge: 1n }]), [chain.authority]).err, customError("wrongStatus", 1));
    const wrongTable = substitute(settlement(t, entries)[1]!, 2, other.table);
    assert.equal(chain.send([settlement(t, entries)[0]!, wrongTable], [chain.authority]).err, customError("wrongAddress", 1), "the other table's vault");
    assert.equal(chain.send([settlement(t, entries)[0]!, demote(settlement(t, entries)[1]!, 1)]).err, customError("missingSigner", 1));
    const staked = substitute(settlement(t, entries)[1]!, 7, stakeAddress(impostor.address).address);
    assert.equal(chain.send([settlement(t, entries)[0]!, staked], [chain.authority]).err, customError("wrongAddress", 1));
  });

  test("one slot refunded by anyone after the timeout while the batch's others settle", () => {
    const t = lockedTable([100_000n, 200_000n]);
    const stranger = generateKeypair();
    const byStranger = ix.refundSlots({ wallet: t.wallet.address, tableId: t.tableId, slots: [1], caller: stranger.address });
    assert.equal(chain.send([byStranger], [stranger]).err, customError("tooEarly"));
    chain.expectOk(chain.send(settlement(t, [{ slot: 0, charge: 40_000n }]), [chain.authority]));
    chain.advance(121n);
    const vault = chain.balance(t.vault);
    chain.expectOk(chain.send([byStranger], [stranger]));
    assert.equal(chain.balance(t.vault), vault + 200_000n);
    const slots = decodeTable(chain.data(t.table)!).slots;
    assert.deepEqual(slots.map((s) => [s.status, s.amount]), [["settled", 40_000n], ["refunded", 200_000n]]);
    assert.equal(chain.send([byStranger], [stranger]).err, customError("wrongStatus"), "a slot refunds once");
  });

  test("the authority refunds at any time; close_table waits for every slot and the dispute window", () => {
    const t = lockedTable([7n, 8n], 1_000n);
    const close = ix.closeTable({ serviceAuthority: chain.authority.address, wallet: t.wallet.address, tableId: t.tableId, destination: chain.authority.address });
    chain.expectOk(chain.send([ix.refundSlots({ wallet: t.wallet.address, tableId: t.tableId, slots: [0], caller: chain.authority.address })], [chain.authority]));
    assert.equal(chain.send([close], [chain.authority]).err, customError("wrongStatus"), "a slot is still locked");
    chain.expectOk(chain.send([ix.refundSlots({ wallet: t.wallet.address, tableId: t.tableId, slots: [1], caller: chain.authority.address })], [chain.authority]));
    assert.equal(chain.balance(t.vault), 1_000n);
    assert.equal(chain.send([close], [chain.authority]).err, customError("windowOpen"));
    chain.advance(BigInt(TABLE_APPEND_WINDOW_S) + 1n);
    const rent = chain.svm.getBalance(addressBytes(t.table))!;
    const authority = chain.svm.getBalance(addressBytes(chain.authority.address)) ?? 0n;
    chain.expectOk(chain.send([close], [chain.authority]));
    assert.equal(chain.svm.getBalance(addressBytes(t.table)) ?? 0n, 0n);
    assert.equal(chain.svm.getBalance(addressBytes(chain.authority.address)), authority + rent);
    assert.equal(chain.send([demote(close, 1)]).err, customError("missingSigner"));
  });

  test("24 jobs lock in one transaction and 40 settle in one", () => {
    const amounts = Array.from({ length: 40 }, () => 10_000n);
    const t = lockedTable(amounts.slice(0, 24));
    for (const part of [amounts.slice(24)]) {
      chain.expectOk(chain.send([lockIx(t.wallet.address, t.tableId, batch(part))], [chain.authority]));
    }
    const entries = amounts.map((_, slot) => ({ slot, charge: 9_000n }));
    const sent = chain.expectOk(chain.send(settlement(t, entries), [chain.authority]));
    assert.ok(sent.bytes <= 1232, `${sent.bytes} bytes`);
    assert.equal(decodeTable(chain.data(t.table)!).open, 0);
  });

  test("a dispute names one slot: upheld, its charge goes back and the table's other slot stays settled", () => {
    const t = lockedTable([100_000n, 100_000n]);
    chain.expectOk(chain.send(settlement(t, [{ slot: 0, charge: 60_000n }, { slot: 1, charge: 70_000n }]), [chain.authority]));
    const dispute = (slot: number, bond = 30_000n) => ix.disputeSlot({ serviceAuthority: chain.authority.address, payer: chain.payer.address, wallet: t.wallet.address, tableId: t.tableId, slot, callerHash: new Uint8Array(32).fill(5), bond });
    const resolve = (slot: number, outcome: "upheld" | "rejected") => ix.resolveSlot({ serviceAuthority: chain.authority.address, wallet: t.wallet.address, tableId: t.tableId, slot, treasury: chain.treasury, treasuryOwner: chain.treasuryOwner.address, outcome });
    const vault = chain.balance(t.vault);
    chain.expectOk(chain.send([dispute(1)], [chain.authority]));
    assert.equal(chain.balance(t.vault), vault - 30_000n, "the bond left the vault");
    assert.equal(chain.send([dispute(1)], [chain.authority]).err?.startsWith("InstructionError(0"), true, "a slot is disputed once");
    const record = decodeDispute(chain.data(slotDisputeAddress(t.table, 1).address)!);
    assert.deepEqual([record.escrow, record.slot, record.bond, record.outcome], [t.table, 1, 30_000n, "open"]);
    assert.equal(decodeTable(chain.data(t.table)!).open, 1, "a disputed slot keeps its table open");
    assert.equal(chain.send([demote(resolve(1, "upheld"), 5)], [chain.authority]).err, customError("missingSigner"), "the treasury's owner pays it back");
    chain.mint(chain.treasury, chain.usdcMint.address, 70_000n);
    chain.expectOk(chain.send([resolve(1, "upheld")], [chain.authority, chain.treasuryOwner]));
    assert.equal(chain.balance(t.vault), vault + 70_000n, "the charge and the bond came back");
    const table = decodeTable(chain.data(t.table)!);
    assert.deepEqual(table.slots.map((s) => [s.status, s.amount]), [["settled", 60_000n], ["reversed", 70_000n]]);
    assert.equal(table.open, 0);
    assert.equal(chain.send([resolve(1, "rejected")], [chain.authority]).err, customError("wrongStatus"), "resolved once");

    chain.expectOk(chain.send([dispute(0, 1_000n)], [chain.authority]));
    const treasury = chain.balance(chain.treasury);
    chain.expectOk(chain.send([resolve(0, "rejected")], [chain.authority]));
    assert.equal(chain.balance(chain.treasury), treasury + 1_000n, "a rejected dispute's bond pays the treasury");
    assert.equal(decodeTable(chain.data(t.table)!).slots[0]!.status, "settled");
  });

  test("dispute_slot refusals: a locked slot, after the window, beyond the vault, unsigned", () => {
    const t = lockedTable([100_000n, 100_000n], 200_000n);
    const dispute = (slot: number, bond = 0n) => ix.disputeSlot({ serviceAuthority: chain.authority.address, payer: chain.payer.address, wallet: t.wallet.address, tableId: t.tableId, slot, callerHash: new Uint8Array(32), bond });
    assert.equal(chain.send([dispute(1)], [chain.authority]).err, customError("wrongStatus"), "not settled");
    assert.equal(chain.send([dispute(2)], [chain.authority]).err, customError("invalidInstruction"), "no such slot");
    chain.expectOk(chain.send(settlement(t, [{ slot: 0, charge: 1n }]), [chain.authority]));
    assert.equal(chain.send([dispute(0, 1_000_000n)], [chain.authority]).err, customError("insufficientFunds"));
    assert.equal(chain.send([demote(dispute(0), 1)]).err, customError("missingSigner"));
    chain.advance(61n);
    assert.equal(chain.send([dispute(0)], [chain.authority]).err, customError("windowClosed"));
  });
});
