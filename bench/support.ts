/** What the benches share: a funded SDK client, the request they time, and percentile rows. */
import { PGlite } from "@electric-sql/pglite";
import { performance } from "node:perf_hooks";
import OpenAI from "openai";
import { issueApiKey } from "../src/accounts/accounts.ts";
import { generateKeypair } from "../src/core/keys.ts";
import type { Engine, GenerationRequest } from "../src/inference/engine.ts";
import type { Service } from "../src/service.ts";
import Database from "better-sqlite3";
import { type Db, type EmbeddedEngine, openDb } from "../src/store/index.ts";
import { distantDatabase } from "./database-distance.ts";

export const BENCH_MESSAGES = [{ role: "user" as const, content: "Hello" }];
export const BENCH_MAX_TOKENS = 16;
export const BENCH_REQUEST: GenerationRequest = {
  messages: BENCH_MESSAGES,
  maxTokens: BENCH_MAX_TOKENS,
  temperature: 0,
  topP: 1,
  stop: [],
  frequencyPenalty: 0,
  presencePenalty: 0,
};

/** An SDK client for a new wallet funded with `credits`. */
export async function fundedClient(service: Service, credits: number): Promise<OpenAI> {
  const wallet = generateKeypair().address;
  await service.deposits.deposit(wallet, credits);
  return new OpenAI({ apiKey: await issueApiKey(service.db, wallet), baseURL: service.baseUrl, maxRetries: 0 });
}

/** Time to first token and whole generation of BENCH_REQUEST on the engine alone, in ms. */
export async function timeEngine(engine: Engine): Promise<[number, number]> {
  const start = performance.now();
  let first = 0;
  for await (const event of engine.generate(BENCH_REQUEST)) if (event.type === "delta" && first === 0) first = performance.now() - start;
  return [first, performance.now() - start];
}

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export function row(name: string, values: number[], width = 44): string {
  return `${name.padEnd(width)} p50 ${percentile(values, 50).toFixed(2).padStart(7)} ms   p95 ${percentile(values, 95).toFixed(2).padStart(7)} ms`;
}

export function signedMs(ms: number): string {
  return `${ms >= 0 ? "+" : ""}${ms.toFixed(2)} ms`;
}

/** Where a bench's service keeps its data: an embedded database on disk, or a fresh schema of DATABASE_URL's database. */
export interface BenchStorage {
  kind: "sqlite" | "pglite" | "postgres";
  label: string;
  /** The chain and keys stay in `dataDir` either way. */
  options: { dataDir: string; db?: Db; embedded?: EmbeddedEngine; escrowTables?: boolean };
  /** Drops the schema (PostgreSQL), once the service is closed; the caller removes its own data dir. */
  drop(): Promise<void>;
}

/**
 * STORES=sqlite,pglite: the embedded engines a bench drives (default: the embedded default, SQLite).
 * PGlite is what a data dir made before SQLite was the default still runs on.
 */
export function embeddedStores(): ("sqlite" | "pglite")[] {
  const stores = (process.env.STORES ?? "sqlite").split(",");
  if (!stores.every((s) => s === "sqlite" || s === "pglite")) throw new RangeError(`STORES takes sqlite and/or pglite, got ${process.env.STORES}`);
  return stores as ("sqlite" | "pglite")[];
}

/**
 * SQLite or PGlite on disk, or a fresh schema of DATABASE_URL's database; with DATABASE_DELAY_MS,
 * reached through a proxy that holds each chunk that long each way (bench/database-distance.ts).
 */
export async function benchStorage(kind: BenchStorage["kind"], dataDir: string): Promise<BenchStorage> {
  if (kind !== "postgres") return { kind, label: `${kind === "sqlite" ? "SQLite" : "PGlite"} on disk`, options: { dataDir, embedded: kind }, drop: async () => undefined };
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error("PostgreSQL needs DATABASE_URL");
  const delayMs = Number(process.env.DATABASE_DELAY_MS ?? 0);
  const distant = delayMs > 0 ? await distantDatabase(url, delayMs) : undefined;
  const schema = `bench_${process.pid}_${Date.now()}`;
  const db = await openDb({ databaseUrl: distant?.url ?? url, schema });
  await db.exec(`CREATE SCHEMA ${schema}`);
  return {
    kind,
    label: distant ? `PostgreSQL, ${delayMs} ms each way` : "PostgreSQL",
    options: { dataDir, db },
    drop: async () => {
      await distant?.close();
      const admin = await openDb({ databaseUrl: url });
      await admin.exec(`DROP SCHEMA ${schema} CASCADE`).finally(() => admin.close());
    },
  };
}

/** Jobs of the service not yet in a final state. */
export async function openJobCount(service: Service): Promise<number> {
  const [open] = await service.db.query<{ n: number | bigint }>("SELECT count(*) AS n FROM jobs WHERE status IN ('pending', 'processing', 'settling')");
  return Number(open!.n);
}

/** Milliseconds until no job of the service is still open. */
export async function settled(service: Service, pollMs = 20): Promise<number> {
  const started = performance.now();
  while ((await openJobCount(service)) > 0) await new Promise((resolve) => setTimeout(resolve, pollMs));
  return performance.now() - started;
}

/**
 * Calls `observe` with the first message of each exchange with PGlite, in this process, and the ms
 * PGlite took to run it. PGlite runs each exchange synchronously in its WebAssembly module
 * (execProtocolRawSync, public in the version pinned), on the thread that called it, so the time is
 * how long the exchange held that thread: wall time, in which a moment the thread waited for a core
 * counts too.
 */
export function observePgliteExchanges(observe: (message: Uint8Array, ms: number) => void): void {
  const proto = PGlite.prototype as unknown as { execProtocolRawSync: (message: Uint8Array, ...rest: unknown[]) => unknown };
  const run = proto.execProtocolRawSync;
  proto.execProtocolRawSync = function (this: unknown, message: Uint8Array, ...rest: unknown[]) {
    const startedAt = performance.now();
    try {
      return run.call(this, message, ...rest);
    } finally {
      observe(message, performance.now() - startedAt);
    }
  };
}

/**
 * Calls `observe` with each statement SQLite runs in this process and the ms it took. better-sqlite3
 * runs a statement synchronously on the calling thread, so the time is how long it held that
 * thread (wall time, as observePgliteExchanges measures PGlite's).
 */
export function observeSqliteStatements(observe: (sql: string, ms: number) => void): void {
  const probe = new Database(":memory:");
  const statementProto = Object.getPrototypeOf(probe.prepare("SELECT 1")) as Record<string, (...args: unknown[]) => unknown>;
  probe.close();
  for (const method of ["run", "all", "get", "iterate"]) {
    const original = statementProto[method]!;
    statementProto[method] = function (this: { source: string }, ...args: unknown[]) {
      const startedAt = performance.now();
      try {
        return original.apply(this, args);
      } finally {
        observe(this.source, performance.now() - startedAt);
      }
    };
  }
  const databaseProto = Database.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
  const exec = databaseProto.exec!;
  databaseProto.exec = function (this: unknown, sql: unknown) {
    const startedAt = performance.now();
    try {
      return exec.call(this, sql);
    } finally {
      observe(String(sql), performance.now() - startedAt);
    }
  };
}
