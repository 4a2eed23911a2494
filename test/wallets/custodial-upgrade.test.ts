/**
 * A data dir written before the escrow program held credits: each wallet's credits sat in a token
 * account of the service's own key. The earlier version's accounts are rebuilt here exactly as it
 * made them (the same seeds, owner and instructions), then the service starts on the data dir.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import type { Address } from "@solana/kit";
import { TOKEN_ACCOUNT_SIZE, TOKEN_PROGRAM, addressWithSeed, creditSeed } from "../../src/chain/addresses.ts";
import { createAccountWithSeed, initializeTokenAccount, mintTo } from "../../src/chain/instructions.ts";
import { buildTransaction } from "../../src/chain/wire.ts";
import { idBody, newId } from "../../src/core/ids.ts";
import { generateKeypair, loadOrCreateKeypair } from "../../src/core/keys.ts";
import { creditsToBaseUnits } from "../../src/core/units.ts";
import { newPendingJob } from "../../src/jobs/job-record.ts";
import { insertJob } from "../../src/jobs/job-repo.ts";
import * as money from "../../src/jobs/money.ts";
import { deposit } from "../../src/wallets/index.ts";
import { checkInvariants } from "../../src/ledger/index.ts";
import { startService, type Service } from "../../src/service.ts";
import { assertChainAgrees } from "../support/chain-checks.ts";
import { tempDir } from "../support/service.ts";

/** A custody-owned USDC account at `createWithSeed(custody, seed)` holding `credits`, as the earlier version opened them. */
async function oldCustodialAccount(service: Service, dataDir: string, seed: string, credits: number): Promise<Address> {
  const keys = join(dataDir, "keys");
  const [feePayer, custody, mintAuthority] = await Promise.all(["fee-payer", "custody", "mint-authority"].map((n) => loadOrCreateKeypair(keys, n)));
  const account = addressWithSeed(custody!.address, seed, TOKEN_PROGRAM);
  const { bytes } = await service.chain.backend.latestBlockhash();
  const rent = await service.chain.backend.minimumBalanceForRentExemption(TOKEN_ACCOUNT_SIZE);
  const instructions = [
    createAccountWithSeed({ payer: feePayer!.address, newAccount: account, base: custody!.address, seed, lamports: rent, space: TOKEN_ACCOUNT_SIZE, owner: TOKEN_PROGRAM }),
    initializeTokenAccount({ account, mint: service.chain.mint, owner: custody!.address }),
    mintTo({ mint: service.chain.mint, to: account, authority: mintAuthority!.address, amount: creditsToBaseUnits(credits) }),
  ];
  await service.chain.send(buildTransaction(feePayer!, instructions, bytes, [custody!, mintAuthority!]).wire);
  return account;
}

test("an earlier version's custodial credits move into the wallet's vault at start, once, and the ledger still agrees", async (t) => {
  const dir = await tempDir("svc-upgrade-");
  t.after(() => dir.remove());
  let service = await startService({ port: 0, dataDir: dir.path });
  const wallet = generateKeypair().address;
  const old = await oldCustodialAccount(service, dir.path, creditSeed(wallet as Address), 7);
  await deposit(service.db, wallet, 7, "deposit-made-by-the-earlier-version");
  assert.equal(await service.chain.creditBalance(wallet), 0n, "the vault is empty: the credits sit in the old account");
  await service.close();

  service = await startService({ port: 0, dataDir: dir.path });
  assert.equal(await service.chain.creditBalance(wallet), creditsToBaseUnits(7), "moved into the vault");
  assert.equal(await service.chain.accountExists(old), false, "the old account is closed");
  await assertChainAgrees(service, wallet);
  assert.deepEqual(await checkInvariants(service.db), []);
  const slot = await service.chain.slot();
  await service.close();

  service = await startService({ port: 0, dataDir: dir.path });
  assert.equal(await service.chain.creditBalance(wallet), creditsToBaseUnits(7), "a second start moves nothing");
  assert.ok((await service.chain.slot()) > slot);
  await assertChainAgrees(service, wallet);
  await service.close();
});

test("a data dir with a job still escrowed the earlier way is refused, saying how to finish it", async (t) => {
  const dir = await tempDir("svc-upgrade-open-");
  t.after(() => dir.remove());
  const service = await startService({ port: 0, dataDir: dir.path });
  const wallet = generateKeypair().address;
  const id = newId("job");
  await service.deposits.deposit(wallet, 10);
  await insertJob(service.db, newPendingJob({ id, wallet, model: "svc-dev/wiring-model", tier: "lite", creditsLocked: 4, maxTokens: 100, promptTokens: 3, escrowAddress: "old", escrowTx: "old" }));
  await oldCustodialAccount(service, dir.path, idBody(id), 4);
  await service.close();

  await assert.rejects(
    startService({ port: 0, dataDir: dir.path }),
    new RegExp(`1 job\\(s\\) escrowed by an earlier version of svc.*${id}.*start that version once on it to finish or refund them`),
  );
});
