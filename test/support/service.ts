/**
 * A real gateway on loopback for end-to-end tests: the service on a free port, a seed worker
 * running the project's wiring model in-process, a funded wallet with an API key, and the
 * official `openai` SDK pointed at it.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generateKeypair } from "../../src/core/keys.ts";
import OpenAI from "openai";
import { issueApiKey } from "../../src/accounts/accounts.ts";
import { WIRING_MODEL_ID } from "../../src/catalog/catalog.ts";
import type { Engine } from "../../src/inference/engine.ts";
import { LlamaEngine } from "../../src/inference/llama-engine.ts";
import { ensureWiringModel } from "../../src/inference/wiring-model.ts";
import type { WorkerHandle } from "../../src/network/worker-handle.ts";
import { SERVICE_MIGRATIONS, startService, type Service, type ServiceOptions } from "../../src/service.ts";
import { DEFAULT_EMBEDDED_ENGINE, type Db, type EmbeddedEngine } from "../../src/store/index.ts";
import { WorkerNode } from "../../src/worker/worker-node.ts";
import { testDatabases } from "./db.ts";

export const MODEL = WIRING_MODEL_ID;

/**
 * A prompt long enough that its length alone does not prove it fits the wiring model's window
 * (promptTokensAtMost), so the gateway has a worker count it before admitting it; 600 bytes, about
 * as many tokens, it fits.
 */
export const PROMPT_TO_COUNT = "Hi ".repeat(200);

let sharedEngine: Promise<Engine> | undefined;

/** One engine per test process: loading llama.cpp and the model costs most of a second. */
export function testEngine(): Promise<Engine> {
  sharedEngine ??= (async () => {
    const dir = await mkdtemp(join(tmpdir(), "svc-model-"));
    return LlamaEngine.load({ modelPath: await ensureWiringModel(dir), threads: 1, maxSequences: 16 });
  })();
  return sharedEngine;
}

export async function testWorker(options: { staked?: boolean } = {}): Promise<WorkerNode> {
  return new WorkerNode(generateKeypair(), new Map([[MODEL, await testEngine()]]), options.staked ?? false);
}

/**
 * An empty in-memory database of the embedded default's engine with the service's tables; on
 * PGlite (`engine`), loaded from the shared image instead of a fresh initdb, so a gateway given
 * it (`startTestGateway({ db: await migratedTestDb("pglite") })`) starts seconds sooner.
 */
export function migratedTestDb(engine: EmbeddedEngine = DEFAULT_EMBEDDED_ENGINE): Promise<Db> {
  const backend = testDatabases({ sqlite: true }).find((database) => database.name === engine)!;
  return backend.open({ migrations: SERVICE_MIGRATIONS });
}

export interface TestGateway {
  service: Service;
  baseUrl: string;
  wallet: string;
  apiKey: string;
  client: OpenAI;
  /** Fund another wallet and give it a key. */
  newAccount(credits: number): Promise<{ wallet: string; apiKey: string; client: OpenAI }>;
  close(): Promise<void>;
}

export async function startTestGateway(
  options: Partial<ServiceOptions> & { credits?: number; db?: Db; workers?: WorkerHandle[] } = {},
): Promise<TestGateway> {
  const service = await startService({
    port: 0,
    seedWorkers: options.workers ?? [await testWorker()],
    ...options,
    // Random audits re-run 1 job in 100 on another worker, which makes a test that counts a
    // worker's runs fail now and then; the tests of audits ask for them.
    disputes: { auditShare: 0, ...options.disputes },
  });
  const newAccount = async (credits: number) => {
    const wallet = generateKeypair().address;
    if (credits > 0) await service.deposits.deposit(wallet, credits);
    const apiKey = await issueApiKey(service.db, wallet);
    return { wallet, apiKey, client: new OpenAI({ apiKey, baseURL: service.baseUrl, maxRetries: 0 }) };
  };
  const first = await newAccount(options.credits ?? 1000);
  return {
    service,
    baseUrl: service.baseUrl,
    ...first,
    newAccount,
    close: () => service.close(),
  };
}

/** A temporary directory removed by the returned cleanup. */
export async function tempDir(prefix = "svc-test-"): Promise<{ path: string; remove(): Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), prefix));
  return { path, remove: () => rm(path, { recursive: true, force: true }) };
}
