/**
 * Several gateways as real processes, for the multi-node tests and benchmarks: `svc serve`
 * processes sharing a fresh PostgreSQL database (on DATABASE_URL's server), one chain
 * (`svc chain serve`) and NATS, with `svc worker` processes joining them. `close()` kills the lot
 * and drops the database.
 */
import { generateKeypair } from "../../src/core/keys.ts";
import { issueApiKey } from "../../src/accounts/accounts.ts";
import { startService } from "../../src/service.ts";
import { openDb, type Db } from "../../src/store/index.ts";
import { startSvc, type SvcProcess } from "../cli/svc-process.ts";
import { startChainServer, type ChainServer } from "./chain-server.ts";
import { uniqueSchemaName } from "./db.ts";
import { tempDir } from "./service.ts";
import { killWorkers, spawnWorker, workerAddress } from "./worker-process.ts";

/** Workers `startWorker` can start. */
const MAX_WORKERS = 8;

export interface GatewayProcesses {
  /** The shared database's URL. */
  dbUrl: string;
  chain: ChainServer;
  gateways: SvcProcess[];
  /** Each gateway's origin, in the order they started. */
  origins: string[];
  workerPids: number[];
  startGateway(name: string): Promise<string>;
  /** A `svc worker` on `origin` serving `models` (`<catalog-id>=<engine>`), once it is connected. */
  startWorker(origin: string, models: string[], args?: string[]): Promise<void>;
  /** A new wallet with `credits` and its API key, made through a short-lived node of the same database and chain. */
  fundedKey(credits: number): Promise<{ wallet: string; apiKey: string }>;
  close(): Promise<void>;
}

export async function startGatewayProcesses(options: { databaseUrl: string; natsUrl: string; env?: Record<string, string> }): Promise<GatewayProcesses> {
  const database = uniqueSchemaName();
  const admin: Db = await openDb({ databaseUrl: options.databaseUrl });
  await admin.exec(`CREATE DATABASE ${database}`);
  const dbUrl = Object.assign(new URL(options.databaseUrl), { pathname: `/${database}` }).toString();
  const dir = await tempDir("svc-gateways-");
  const chain = await startChainServer();
  // The workers these tests start are the operator's own: every gateway vouches for them.
  const workerKeys = Array.from({ length: MAX_WORKERS }, (_, i) => `${dir.path}/worker-${i}.json`);
  const seedWorkers = (await Promise.all(workerKeys.map(workerAddress))).join(",");
  const gateways: SvcProcess[] = [];
  const origins: string[] = [];
  const workerPids: number[] = [];
  return {
    dbUrl,
    chain,
    gateways,
    origins,
    workerPids,
    async startGateway(name) {
      const args = ["serve", "--port", "0", "--rpc-port", "off", "--rate-limit", "off", "--data-dir", `${dir.path}/${name}`];
      const shared = ["--database-url", dbUrl, "--chain-url", chain.url, "--keys-dir", chain.keysDir, "--nats-url", options.natsUrl];
      const run = startSvc([...args, ...shared], { SVC_LOG_FORMAT: "json", SVC_SEED_WORKERS: seedWorkers, ...options.env });
      gateways.push(run);
      origins.push((await run.waitFor(/^App: (http:\/\/127\.0\.0\.1:\d+)\/$/m, 60_000))[1]!);
      return origins.at(-1)!;
    },
    async startWorker(origin, models, args = []) {
      const keypair = workerKeys[workerPids.length];
      if (keypair === undefined) throw new Error(`at most ${MAX_WORKERS} workers`);
      const worker = await spawnWorker({ gateway: origin, keypair, modelsDir: `${dir.path}/models`, models, args });
      workerPids.push(worker.child.pid!);
      await worker.waitFor(/Connected to /, { timeoutMs: 60_000 });
    },
    async fundedKey(credits) {
      const funder = await startService({ port: 0, databaseUrl: dbUrl, chainUrl: chain.url, keysDir: chain.keysDir });
      const wallet = generateKeypair().address;
      await funder.deposits.deposit(wallet, credits);
      const apiKey = await issueApiKey(funder.db, wallet);
      await funder.close();
      return { wallet, apiKey };
    },
    async close() {
      killWorkers();
      for (const g of gateways) g.child.kill("SIGKILL");
      await Promise.all(gateways.map((g) => g.exited()));
      await chain.close();
      await admin.exec(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      await admin.close();
      await dir.remove();
    },
  };
}
