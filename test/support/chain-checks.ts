/** Checks that the ledger and the chain tell the same story, shared by the money tests. */
import assert from "node:assert/strict";
import { creditsToBaseUnits } from "../../src/core/units.ts";
import { escrowState } from "../../src/jobs/job-chain.ts";
import { getJob, jobsWithStatus } from "../../src/jobs/job-repo.ts";
import * as money from "../../src/jobs/money.ts";
import { getAccount } from "../../src/ledger/index.ts";
import type { Service } from "../../src/service.ts";
import { until } from "./eventually.ts";

/**
 * The wallet's on-chain credit account holds exactly what the ledger says it can spend, once its
 * settlements have confirmed: between a settlement's record and its confirmation the ledger has
 * already given back the unused part of the lock, the chain not yet.
 */
export async function assertChainAgrees(service: Service, wallet: string): Promise<void> {
  await until(() => jobsWithStatus(service.db, ["settling"]), (jobs) => !jobs.some((job) => job.wallet === wallet), `${wallet}'s settlements to confirm`);
  const ledgerCredits = await money.availableCredits(service.db, wallet);
  assert.equal(await service.chain.tokenBalance(service.chain.creditAccountAddress(wallet)), creditsToBaseUnits(ledgerCredits), "chain balance = ledger balance");
}

/** The status of the job's escrow on the chain: its record's, or its slot's in its wallet's table. */
export async function escrowStatus(service: Service, jobId: string): Promise<string | undefined> {
  return (await escrowState(service.chain, (await getJob(service.db, jobId))!))?.status;
}

/** The worker's on-chain token account holds exactly what its ledger account was paid; returns that. */
export async function assertWorkerPaidOnChain(service: Service, worker: string): Promise<bigint> {
  const account = await getAccount(service.db, money.workerAccount(worker));
  const onChain = await service.chain.tokenBalance(service.chain.workerTokenAccount(worker));
  assert.equal(onChain, account?.balance ?? 0n, "worker paid on-chain what the ledger owes");
  return onChain;
}
