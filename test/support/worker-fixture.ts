/**
 * A test gateway with no worker of its own, for tests of what workers do to it: the raw and
 * protocol workers a test opens through it are closed with it, even after a failed assertion.
 */
import { generateKeypair } from "../../src/core/keys.ts";
import type { WorkerClient } from "../../src/worker/worker-client.ts";
import { attachProtocolWorker, type ProtocolWorkerOptions } from "./protocol-worker.ts";
import { connectRawWorker, type RawWorker } from "./raw-worker.ts";
import { migratedTestDb, startTestGateway, testEngine, type TestGateway } from "./service.ts";

export interface WorkerFixture {
  gateway: TestGateway;
  /**
   * A worker driven message by message (support/raw-worker.ts), not yet registered; on probation
   * unless `vouched` (then the operator vouches for it, and callers' jobs go to it).
   */
  raw(options?: { vouched?: boolean }): Promise<RawWorker>;
  /** A real worker on the shared wiring-model engine, registered. */
  attach(options?: ProtocolWorkerOptions): Promise<WorkerClient>;
  close(): Promise<void>;
}

export async function startWorkerFixture(options: Parameters<typeof startTestGateway>[0] = {}): Promise<WorkerFixture> {
  // The database image loads while llama.cpp loads the model the protocol workers share.
  const [db] = await Promise.all([migratedTestDb(), testEngine()]);
  const gateway = await startTestGateway({ workers: [], db, ...options });
  const raws: RawWorker[] = [];
  const clients: WorkerClient[] = [];
  return {
    gateway,
    raw: async ({ vouched = false } = {}) => {
      const signer = generateKeypair();
      if (vouched) gateway.service.trust.vouch(signer.address);
      const worker = await connectRawWorker(gateway.service.origin, signer);
      raws.push(worker);
      return worker;
    },
    attach: async (workerOptions) => {
      const client = await attachProtocolWorker(gateway.service, workerOptions);
      clients.push(client);
      return client;
    },
    close: async () => {
      for (const raw of raws) raw.close();
      await Promise.all(clients.map((c) => c.close()));
      await gateway.close();
    },
  };
}
