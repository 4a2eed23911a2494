/**
 * A worker that staked the network's native token on the chain is paid 85% of each charge when it
 * serves through the worker protocol; an unstaked one 75%. Read back from the settlement on-chain;
 * the ledger pays what the program paid, even when the worker staked after it registered.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { generateKeypair } from "../../src/core/keys.ts";
import { MIN_ACTIVE_STAKE } from "../../src/core/payout.ts";
import * as money from "../../src/jobs/money.ts";
import { getAccount } from "../../src/ledger/index.ts";
import { jobConcluded, until } from "../support/eventually.ts";
import { attachProtocolWorker } from "../support/protocol-worker.ts";
import { MODEL, migratedTestDb, startTestGateway, type TestGateway } from "../support/service.ts";
import type { WorkerClient } from "../../src/worker/worker-client.ts";

let gateway: TestGateway;
const workers: WorkerClient[] = [];
before(async () => {
  gateway = await startTestGateway({ db: await migratedTestDb(), workers: [], credits: 100 });
});
after(async () => {
  for (const worker of workers) await worker.close();
  await gateway.close();
});

async function settlementShare(): Promise<{ worker: string; toWorker: bigint | undefined }> {
  const { response } = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], temperature: 0 }).withResponse();
  const { chain } = gateway.service;
  const worker = response.headers.get("x-svc-worker")!;
  // Its worker's batch (of this one job) is signed and settled after the reply.
  const job = await jobConcluded(gateway.service, response.headers.get("x-svc-job-id")!);
  const settlement = await chain.readTransaction(job.settlementTx!);
  const toWorker = settlement.innerInstructions.find((i) => i.kind === "transfer" && i.to === chain.workerTokenAccount(worker))?.amount;
  return { worker, toWorker };
}

test("the staked worker's settlement pays it 85%, the unstaked one's 75%", async () => {
  const { chain } = gateway.service;
  const staker = generateKeypair();
  await chain.grantNative({ to: staker.address, amount: MIN_ACTIVE_STAKE });
  await chain.stake({ worker: staker, amount: MIN_ACTIVE_STAKE });

  workers.push(await attachProtocolWorker(gateway.service, { signer: staker }));
  const staked = await settlementShare();
  assert.equal(staked.worker, staker.address);
  assert.equal(staked.toWorker, 17_000n, "85% of 2 credits (20,000 base units)");
  await workers.pop()!.close();

  workers.push(await attachProtocolWorker(gateway.service));
  const unstaked = await settlementShare();
  assert.notEqual(unstaked.worker, staker.address);
  assert.equal(unstaked.toWorker, 15_000n, "75% of 2 credits");
});

test("a worker that stakes after it registered: the program pays it 85%, and so does the ledger", async () => {
  const { chain, db } = gateway.service;
  await workers.pop()!.close();
  const late = generateKeypair();
  workers.push(await attachProtocolWorker(gateway.service, { signer: late }));
  // Registered unstaked, so its jobs are recorded at the unstaked share; the program reads the stake when it settles.
  await chain.grantNative({ to: late.address, amount: MIN_ACTIVE_STAKE });
  await chain.stake({ worker: late, amount: MIN_ACTIVE_STAKE });
  const paid = await settlementShare();
  assert.deepEqual(paid, { worker: late.address, toWorker: 17_000n });
  // The reply comes before the settlement's confirmation, which pays the worker's ledger account.
  const earned = await until(() => getAccount(db, money.workerAccount(late.address)), (account) => (account?.balance ?? 0n) > 0n, "the worker's ledger payout");
  assert.equal(earned?.balance, 17_000n);
});
