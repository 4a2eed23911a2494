import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import {
  checkInvariants,
  ensureWalletAccounts,
  FUNDING_ACCOUNT,
  getAccount,
  transfer,
  walletAccountId,
  type Account,
} from "../../src/ledger/index.ts";
import type { Db } from "../../src/store/index.ts";

/** A wallet that exists only in this test, with `amount` deposited. */
export async function fundedWallet(db: Db, amount: bigint): Promise<string> {
  const address = `addr_${randomUUID()}`;
  await ensureWalletAccounts(db, address);
  if (amount > 0n) {
    await transfer(db, {
      id: `deposit_${address}`,
      debitAccountId: FUNDING_ACCOUNT,
      creditAccountId: walletAccountId(address),
      amount,
      code: "deposit",
    });
  }
  return address;
}

export async function account(db: Db, id: string): Promise<Account> {
  const found = await getAccount(db, id);
  assert.ok(found, `account ${id} exists`);
  return found;
}

export async function assertHealthy(db: Db): Promise<void> {
  assert.deepEqual(await checkInvariants(db), []);
}

export function uniqueId(prefix: string): string {
  return `${prefix}_${randomUUID()}`;
}
