/**
 * A worker that staked the network's native token on the chain is paid 85% of each charge when it
 * serves through the worker protocol; an unstaked one 75%. Read back from the settlement on-chain.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { generateKeypair } from "../../src/core/keys.ts";
import { MIN_ACTIVE_STAKE } from "../../src/core/payout.ts";
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
  const settlement = await chain.readTransaction(response.headers.get("x-svc-settlement-tx")!);
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
