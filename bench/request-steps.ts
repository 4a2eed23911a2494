/**
 * Where a sequential paid JSON completion's time goes, step by step. The gateway runs on svc dev's
 * defaults (SQLite on disk, STORES=pglite for PGlite; PostgreSQL too when DATABASE_URL is set),
 * its worker and an instant upstream in a process of their own (worker-process.ts). Requests go one after another, each once
 * the last one's settlement has confirmed, and each step is marked relative to the moment the job
 * service took the request: the escrow lock's and the settlement's builds, every database
 * transaction and every statement in or outside one, every chain send, and the end of the reply. A
 * step is named by its order within the request (the first transaction is the admission, the
 * second the settlement's record). It prints each mark's p50 and p90. With `stream`, the requests
 * are streamed, and the first write of the reply's body and the client's first token are marked too.
 * Also marked: each frame sent to the worker (by its type), the worker's first delta reaching the
 * job, and the job service handing the started job to the route. Last, the slowest 1% of the
 * requests (two at least), mark by mark beside each mark's p50, with the garbage collections that
 * overlapped them.
 *
 * The marks come from wrapping methods of the running service's objects: nothing in src/ knows of
 * them. The caller runs on the gateway's thread, so the last line (the client has the reply)
 * includes reading it there. The client's send and the request's arrival at the gateway's server
 * come before the job service takes it, and read negative.
 *
 *   npm run bench:request-steps -- [requests (150)] [json|stream (json)]
 *
 * FIRST_TOKEN_MS=<ms> has the upstream wait that long before its first token (default 0: at once),
 * as a model does: the steps that overlap the generation then leave the reply's path.
 */
import { ServerResponse } from "node:http";
import { PerformanceObserver } from "node:perf_hooks";
import type OpenAI from "openai";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { WebSocket } from "ws";
import { Channel } from "../src/core/index.ts";
import { startService } from "../src/service.ts";
import { benchStorage, embeddedStores, fundedClient, percentile, settled } from "./support.ts";
import { BENCH_MODEL as MODEL, startWorkerProcess } from "./worker-process.ts";

const REQUESTS = Number(process.argv[2] ?? 150);
const STREAM = process.argv[3] === "stream";
const WARM_UP = 20;

/** Marks of the request under way: name and ms since the job service took it. */
class Marks {
  private startedAt = 0;
  private marks: [string, number][] = [];
  private counts = new Map<string, number>();
  /** Moments before the job service took the request, kept until it does: they read negative. */
  private before: [string, number][] = [];
  on = false;

  /** A step before the job service takes the request (the client's send, the server's read). */
  early(name: string): void {
    if (this.on) this.before.push([name, performance.now()]);
  }

  start(): void {
    this.startedAt = performance.now();
    this.marks = this.before.map(([name, at]) => [name, at - this.startedAt]);
    this.before = [];
    this.counts.clear();
  }

  /** A step's name, numbered when it happens more than once in a request. */
  occurrence(step: string): string {
    const n = (this.counts.get(step) ?? 0) + 1;
    this.counts.set(step, n);
    return n === 1 ? step : `${step} #${n}`;
  }

  /** Marks a step the first time it happens in a request only. */
  markFirst(name: string): void {
    if (this.counts.has(name)) return;
    this.counts.set(name, 1);
    this.mark(name);
  }

  mark(name: string): void {
    if (this.on) this.marks.push([name, this.elapsed()]);
  }

  elapsed(): number {
    return performance.now() - this.startedAt;
  }

  taken(): [string, number][] {
    return this.marks;
  }

  /** Adds the garbage collections that overlapped the request, from the moments V8 reported. */
  addCollections(collections: readonly PerformanceEntry[]): void {
    const first = this.marks[0]?.[1] ?? 0;
    const last = this.elapsed();
    for (const gc of collections) {
      const at = gc.startTime - this.startedAt;
      if (at + gc.duration >= first && at <= last) this.marks.push([`a garbage collection of ${gc.duration.toFixed(1)} ms begins`, at]);
    }
  }
}

/** Marks the start and the end (or failure) of every call of `target[key]`, a method returning a promise. */
function wrap(marks: Marks, target: object, key: string, step: (args: unknown[]) => string): void {
  const methods = target as Record<string, (...args: unknown[]) => unknown>;
  const original = methods[key]!.bind(target);
  methods[key] = (...args: unknown[]) => {
    const name = marks.on ? marks.occurrence(step(args)) : "";
    marks.mark(`${name} begins`);
    const result = original(...args);
    void Promise.resolve(result).then(
      () => marks.mark(`${name} ends`),
      () => marks.mark(`${name} fails`),
    );
    return result;
  };
}

/**
 * Marks each statement run on a transaction's handle ("in the transaction"), so a transaction's
 * time splits into its statements and the gaps between them.
 */
function markStatementsInTransactions(marks: Marks, db: object): void {
  const store = db as { transaction: (work: (tx: object) => Promise<unknown>) => Promise<unknown> };
  const transaction = store.transaction.bind(db);
  store.transaction = (work) =>
    transaction((tx) => {
      wrap(marks, tx, "query", (args) => `in the transaction, ${statementName(args)}`);
      return work(tx);
    });
}

/** A statement's first words: its first step's name for a WITH, else its verb and table. */
function statementName(args: unknown[]): string {
  const sql = String(args[0]).replace(/\s+/g, " ").trim();
  const step = /^WITH (\w+) AS/.exec(sql);
  return `statement ${step ? step[1] : sql.split(" ").slice(0, 4).join(" ")}`;
}

async function measure(kind: "sqlite" | "pglite" | "postgres", dir: string): Promise<void> {
  const storage = await benchStorage(kind, join(dir, kind));
  const service = await startService({ port: 0, ...storage.options, rateLimit: false });
  const worker = await startWorkerProcess({ gateway: service.origin, firstTokenMs: Number(process.env.FIRST_TOKEN_MS ?? 0) });
  service.trust.vouch(worker.address);
  const marks = new Marks();
  const end = ServerResponse.prototype.end;
  const write = ServerResponse.prototype.write;
  try {
    const client = await fundedClient(service, 1_000_000);
    const jobs = service.jobs as unknown as Record<string, (...args: unknown[]) => unknown>;
    const start = jobs.start!.bind(service.jobs);
    jobs.start = (...args: unknown[]) => {
      marks.start();
      const started = start(...args) as Promise<unknown>;
      started.then(() => marks.mark("the job service has started the job"), () => undefined);
      return started;
    };
    // The worker's output is in once the service meters it (a private method of the job service).
    wrap(marks, service.jobs, "meterCompletion", () => "the worker's output metered");
    // Every lock is built here, alone or with the locks of jobs admitted beside it.
    wrap(marks, service.chain, "prepareLockEscrows", () => "escrow lock build");
    wrap(marks, service.chain, "prepareSettle", () => "settlement build");
    wrap(marks, service.chain, "prepareTableLock", () => "table lock build");
    wrap(marks, service.chain, "prepareTableSettlement", () => "table settlement build");
    wrap(marks, service.chain, "send", () => "chain send");
    markStatementsInTransactions(marks, service.db);
    wrap(marks, service.db, "transaction", () => "transaction");
    wrap(marks, service.db, "query", statementName);
    ServerResponse.prototype.end = function (this: ServerResponse, ...args: unknown[]) {
      marks.mark("the reply ends");
      return (end as (...a: unknown[]) => ServerResponse).apply(this, args);
    } as typeof end;
    const sendFrame = WebSocket.prototype.send;
    WebSocket.prototype.send = function (this: WebSocket, ...args: unknown[]) {
      const type = /^\{"type":"(\w+)"/.exec(String(args[0]))?.[1] ?? "?";
      marks.mark(marks.occurrence(`the worker is sent a ${type} frame`));
      return (sendFrame as (...a: unknown[]) => void).apply(this, args);
    } as typeof sendFrame;
    const push = Channel.prototype.push;
    Channel.prototype.push = function (this: Channel<unknown>, item: unknown) {
      if ((item as { type?: string }).type === "delta") marks.markFirst("the worker's first delta reaches the job");
      return push.call(this, item);
    };
    ServerResponse.prototype.write = function (this: ServerResponse, ...args: unknown[]) {
      marks.markFirst("the reply's first write");
      return (write as (...a: unknown[]) => boolean).apply(this, args);
    } as typeof write;

    service.app.server.prependListener("request", () => marks.early("the request arrives"));

    const collections: PerformanceEntry[] = [];
    const observer = new PerformanceObserver((list) => collections.push(...list.getEntries()));
    observer.observe({ entryTypes: ["gc"] });
    const byMark = new Map<string, number[]>();
    const requests: [string, number][][] = [];
    for (let i = 0; i < WARM_UP + REQUESTS; i++) {
      marks.on = true;
      marks.early("the client sends");
      await ask(client, marks);
      marks.mark("the client has the reply");
      await settled(service, 5);
      marks.on = false;
      if (i < WARM_UP) continue;
      for (const [name, ms] of marks.taken()) byMark.set(name, [...(byMark.get(name) ?? []), ms]);
      // V8 reports a collection after it; the settlement's wait has let those of the request in.
      marks.addCollections(collections.splice(0));
      requests.push(marks.taken());
    }
    observer.disconnect();
    print(`${storage.label}: ${REQUESTS} sequential ${STREAM ? "streamed" : "JSON"} requests, ms since the job service took each (marks seen in at least 80% of them)`, byMark);
    printSlowest(requests, byMark);
  } finally {
    ServerResponse.prototype.end = end;
    ServerResponse.prototype.write = write;
    worker.close();
    await service.close();
    await storage.drop();
  }
}

/** One request, JSON or streamed; a stream marks its first token's arrival. */
async function ask(client: OpenAI, marks: Marks): Promise<void> {
  const request = { model: MODEL, messages: [{ role: "user" as const, content: "Hello" }], max_tokens: 8 };
  if (!STREAM) {
    await client.chat.completions.create(request);
    return;
  }
  for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
    if (chunk.choices[0]?.delta.content) marks.markFirst("the client has the first token");
  }
}

/**
 * The slowest requests (the slowest 1%, at least two), by when their client had what it waits for
 * (the first token of a stream, a JSON reply), each mark beside its p50: where a slow one fell
 * behind.
 */
function printSlowest(requests: [string, number][][], byMark: Map<string, number[]>): void {
  const awaited = STREAM ? "the client has the first token" : "the client has the reply";
  const at = (marks: [string, number][]) => marks.find(([name]) => name === awaited)?.[1] ?? 0;
  const slowest = [...requests].sort((a, b) => at(b) - at(a)).slice(0, Math.max(2, Math.ceil(requests.length / 100)));
  for (const marks of slowest) {
    console.log(`\na slowest request: ${awaited} at ${at(marks).toFixed(2)} ms (p50 ${percentile(byMark.get(awaited)!, 50).toFixed(2)})`);
    console.log("     ms     p50  mark");
    for (const [name, ms] of [...marks].sort((a, b) => a[1] - b[1])) {
      const p50 = byMark.has(name) ? percentile(byMark.get(name)!, 50).toFixed(2) : "";
      console.log(`${ms.toFixed(2).padStart(7)} ${p50.padStart(7)}  ${name}`);
    }
  }
}

function print(title: string, byMark: Map<string, number[]>): void {
  console.log(title);
  console.log("    p50     p90  seen  mark");
  const rows = [...byMark]
    .filter(([, times]) => times.length >= REQUESTS * 0.8)
    .map(([name, times]) => ({ name, seen: times.length, p50: percentile(times, 50), p90: percentile(times, 90) }))
    .sort((a, b) => a.p50 - b.p50);
  for (const row of rows) console.log(`${row.p50.toFixed(2).padStart(7)} ${row.p90.toFixed(2).padStart(7)} ${String(row.seen).padStart(5)}  ${row.name}`);
}

const dir = await mkdtemp(join(tmpdir(), "svc-request-steps-"));
try {
  for (const kind of [...embeddedStores(), ...(process.env.DATABASE_URL ? (["postgres"] as const) : [])]) await measure(kind, dir);
} finally {
  await rm(dir, { recursive: true, force: true });
}
