/**
 * Workers that join a test gateway through the worker protocol, running in the test process on
 * the shared wiring-model engine: the seed-pool path of `svc dev`, without a child process.
 */
import { generateKeypair, type Signer } from "../../src/core/keys.ts";
import type { Engine } from "../../src/inference/engine.ts";
import type { Service } from "../../src/service.ts";
import { WorkerClient, type WorkerClientEvent } from "../../src/worker/worker-client.ts";
import { MODEL, testEngine } from "./service.ts";

export interface ProtocolWorkerOptions {
  signer?: Signer;
  engines?: ReadonlyMap<string, Engine>;
  concurrency?: number;
  onEvent?: (event: WorkerClientEvent) => void;
  /**
   * Whether the gateway's operator vouches for it (its seed pool), so callers' jobs go to it at
   * once (default true: a test's own honest workers are the operator's); false, it starts on probation.
   */
  vouched?: boolean;
}

/** Connects a worker to the gateway and resolves once the gateway has registered it. Close it when done. */
export async function attachProtocolWorker(service: Service, options: ProtocolWorkerOptions = {}): Promise<WorkerClient> {
  const signer = options.signer ?? generateKeypair();
  if (options.vouched !== false) service.trust.vouch(signer.address);
  const client = new WorkerClient({
    gateway: service.origin,
    signer,
    engines: options.engines ?? new Map([[MODEL, await testEngine()]]),
    concurrency: options.concurrency ?? 4,
    // Tests restart gateways in a second or two; a short cap keeps them from waiting on the backoff.
    reconnect: { initialMs: 50, maxMs: 500 },
    ...(options.onEvent ? { onEvent: options.onEvent } : {}),
  }).start();
  let deadline: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      client.registered(),
      new Promise((_, reject) => {
        deadline = setTimeout(() => reject(new Error(`the worker was not registered within ${REGISTER_DEADLINE_MS} ms`)), REGISTER_DEADLINE_MS);
      }),
    ]);
  } catch (error) {
    await client.close();
    throw error;
  } finally {
    clearTimeout(deadline);
  }
  return client;
}

/** Far above a registration on a loaded machine: reaching it means the gateway keeps refusing the worker. */
const REGISTER_DEADLINE_MS = 60_000;
