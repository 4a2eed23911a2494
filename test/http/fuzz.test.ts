/**
 * A fuzz of the HTTP API (test/network/protocol-fuzz.test.ts fuzzes the worker side): thousands
 * of generated requests (methods, paths, ids, query strings, headers, bodies) against a real
 * gateway on loopback. Never a 500, never a body
 * outside the spec's shapes, no rejected request charges anything, and a paying request is still
 * answered within a generous bound while the fuzz runs.
 *
 * Bounded in count and time: FUZZ_CASES (default 3000) or FUZZ_BUDGET_MS (default 20 s), whichever
 * comes first. The seed is printed; FUZZ_SEED=<n> replays the same cases.
 */
import assert from "node:assert/strict";
import { performance } from "node:perf_hooks";
import { after, before, test } from "node:test";
import { issueApiKey } from "../../src/accounts/accounts.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import { ERROR_CODES, type ErrorCode } from "../../src/core/errors.ts";
import { creditsToBaseUnits } from "../../src/core/units.ts";
import * as money from "../../src/jobs/money.ts";
import { checkInvariants } from "../../src/ledger/index.ts";
import { percentile } from "../../bench/support.ts";
import { appSession } from "../support/app-session.ts";
import { httpText, rawRequest, type RawResponse } from "../support/raw-http.ts";
import { MODEL, migratedTestDb, startTestGateway, type TestGateway } from "../support/service.ts";
import { fuzzCase, Picker, seededRandom, type FuzzCase, type FuzzKeys } from "./fuzz-cases.ts";

const SEED = Number(process.env.FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
const CASES = Number(process.env.FUZZ_CASES ?? 3000);
const BUDGET_MS = Number(process.env.FUZZ_BUDGET_MS ?? 20_000);
const IN_FLIGHT = 8;
const FUZZ_CREDITS = 2000;
/** A paying request while the fuzz runs must be answered within this (a noisy, shared machine). */
const PAYING_BOUND_MS = 15_000;

let gateway: TestGateway;
let fuzzWallet: string;
let keys: FuzzKeys;

before(async () => {
  // The burst limit would turn most of the fuzz into 429s; it has its own tests.
  gateway = await startTestGateway({ db: await migratedTestDb(), rateLimit: { ratePerSecond: 1e6, burst: 1e6 }, refusalLimit: false });
  const fuzzer = await gateway.newAccount(FUZZ_CREDITS);
  const other = generateKeypair();
  await gateway.service.deposits.deposit(other.address, 100);
  const revoked = await issueApiKey(gateway.service.db, other.address);
  await issueApiKey(gateway.service.db, other.address);
  fuzzWallet = fuzzer.wallet;
  keys = { valid: fuzzer.apiKey, revoked, session: await appSession(gateway.service.origin, other) };
});
after(() => gateway.close());

/** What is wrong with an answer, or undefined when it is one the spec allows. */
function fault(c: FuzzCase, r: RawResponse): string | undefined {
  if (r.status === 0) return "no HTTP answer";
  if (r.status >= 500 && r.status !== 503 && r.status !== 504) return `status ${r.status}`;
  if (!r.headers["x-request-id"]) return "no x-request-id";
  if ((r.status === 503 || r.status === 429) && !/^\d+$/.test(r.headers["retry-after"] ?? "")) return `a ${r.status} without Retry-After`;
  const type = r.headers["content-type"] ?? "";
  if (c.method === "HEAD" || r.status === 204) return r.body === "" ? undefined : "a body on HEAD or 204";
  if (type.startsWith("text/event-stream")) return sseFault(r.body);
  // The pages: the error reference, and the web app at the root.
  if (type.startsWith("text/html") && r.status === 200 && (c.path.startsWith("/docs/errors") || /^\/+$/.test(c.path.split("?")[0]!))) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(r.body);
  } catch {
    return `a non-JSON body (${type}): ${r.body.slice(0, 80)}`;
  }
  // Readiness answers 503 with its own report, not an error (docs/api.md, "Health").
  if (c.path.startsWith("/readyz") && c.method === "GET") return undefined;
  return r.status >= 400 ? errorFault(r.status, parsed) : undefined;
}

function errorFault(status: number, body: unknown): string | undefined {
  const error = (body as { error?: unknown } | null)?.error;
  const problem = errorObjectFault(error);
  if (problem) return problem;
  const { code } = error as { code: ErrorCode };
  return ERROR_CODES[code].status === status ? undefined : `code ${code} with status ${status}`;
}

/** The spec's error object: a known code, its type, a message, a docs link, a param or null. */
function errorObjectFault(error: unknown): string | undefined {
  if (!error || typeof error !== "object") return "an error without the error object";
  const e = error as Record<string, unknown>;
  const info = ERROR_CODES[e.code as ErrorCode];
  if (!info) return `unknown code ${String(e.code)}`;
  if (e.type !== info.type || typeof e.message !== "string" || typeof e.docs !== "string") return `the fields of ${String(e.code)}`;
  if (!(e.param === null || typeof e.param === "string")) return "param";
  return undefined;
}

/** A stream is `data:` events of JSON, ending in [DONE] or one error event. */
function sseFault(body: string): string | undefined {
  for (const event of body.split("\n\n").filter((e) => e.trim() !== "")) {
    const data = /^data: (.*)$/s.exec(event.trim())?.[1];
    if (data === undefined) return `an SSE event without data: ${event.slice(0, 80)}`;
    if (data === "[DONE]") continue;
    let parsed: { error?: unknown };
    try {
      parsed = JSON.parse(data) as { error?: unknown };
    } catch {
      return `an SSE event that is not JSON: ${data.slice(0, 80)}`;
    }
    if (parsed.error !== undefined) return errorObjectFault(parsed.error);
  }
  return undefined;
}

interface FuzzResult {
  sent: number;
  byStatus: Map<number, number>;
  faults: string[];
  /** Job ids of completions answered 200: the only jobs that may charge. */
  answeredJobs: Set<string>;
}

async function runFuzz(picker: Picker, deadline: number): Promise<FuzzResult> {
  const result: FuzzResult = { sent: 0, byStatus: new Map(), faults: [], answeredJobs: new Set() };
  const lane = async () => {
    while (result.sent < CASES && performance.now() < deadline) {
      const c = fuzzCase(picker, keys);
      result.sent++;
      const response = await rawRequest(gateway.baseUrl, httpText(c.method, c.path, c.headers, c.body, c.chunked), 60_000).catch(
        (e: Error) => ({ status: 0, headers: {}, body: e.message }) as RawResponse,
      );
      result.byStatus.set(response.status, (result.byStatus.get(response.status) ?? 0) + 1);
      const problem = fault(c, response);
      if (problem) result.faults.push(`${problem}\n  request: ${c.method} ${c.path.slice(0, 120)} ${JSON.stringify(c.headers).slice(0, 200)} ${c.body.slice(0, 200)}`);
      const jobId = response.headers["x-svc-job-id"];
      if (response.status === 200 && jobId) result.answeredJobs.add(jobId);
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, lane));
  return result;
}

/** Paying requests one after another until `done`, each timed from send to full answer. */
async function payWhile(done: () => boolean): Promise<number[]> {
  const times: number[] = [];
  while (!done()) {
    const start = performance.now();
    const reply = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hello" }], temperature: 0, max_tokens: 4 });
    times.push(performance.now() - start);
    assert.equal(reply.choices[0]!.finish_reason, "length");
    await new Promise((r) => setTimeout(r, 200));
  }
  return times;
}

async function openJobs(wallet: string): Promise<number> {
  const rows = await gateway.service.db.query("SELECT id FROM jobs WHERE wallet = $1 AND status IN ('pending', 'processing', 'settling')", [wallet]);
  return rows.length;
}

test(`fuzz the HTTP surface (seed ${SEED})`, { timeout: 180_000 }, async (t) => {
  t.diagnostic(`FUZZ_SEED=${SEED} FUZZ_CASES=${CASES} FUZZ_BUDGET_MS=${BUDGET_MS}`);
  const baseline = await payWhile(((n) => () => n-- <= 0)(3));
  let fuzzing = true;
  const paying = payWhile(() => !fuzzing);
  const started = performance.now();
  const result = await runFuzz(new Picker(seededRandom(SEED)), started + BUDGET_MS).finally(() => (fuzzing = false));
  const elapsedMs = performance.now() - started;
  const during = await paying;

  const statuses = [...result.byStatus].sort(([a], [b]) => a - b).map(([s, n]) => `${s}:${n}`).join(" ");
  t.diagnostic(`${result.sent} cases in ${(elapsedMs / 1000).toFixed(1)} s (${IN_FLIGHT} in flight); statuses ${statuses}`);
  t.diagnostic(`paying request before the fuzz: p50 ${percentile(baseline, 50).toFixed(0)} ms`);
  t.diagnostic(`paying request during the fuzz: ${during.length} requests, p50 ${percentile(during, 50).toFixed(0)} ms, max ${Math.max(...during).toFixed(0)} ms`);

  assert.deepEqual(result.faults.slice(0, 10), [], `${result.faults.length} answers outside the spec (replay with FUZZ_SEED=${SEED})`);
  assert.ok(result.sent >= Math.min(500, CASES), `only ${result.sent} cases ran`);
  assert.ok(during.length >= 1 && Math.max(...during) < PAYING_BOUND_MS, `a paying request took ${Math.max(...during).toFixed(0)} ms`);

  // Only answered completions charge: every job that charged anything was answered with a 200.
  for (let i = 0; i < 200 && (await openJobs(fuzzWallet)) > 0; i++) await new Promise((r) => setTimeout(r, 50));
  assert.equal(await openJobs(fuzzWallet), 0, "no job left open");
  const jobs = await gateway.service.db.query<{ id: string; credits_charged: number }>("SELECT id, credits_charged FROM jobs WHERE wallet = $1", [fuzzWallet]);
  const charged = jobs.filter((j) => j.credits_charged > 0);
  for (const job of charged) assert.ok(result.answeredJobs.has(job.id), `job ${job.id} charged ${job.credits_charged} without a 200`);
  const spent = charged.reduce((sum, j) => sum + j.credits_charged, 0);
  const credits = await money.availableCredits(gateway.service.db, fuzzWallet);
  assert.equal(credits, FUZZ_CREDITS - spent, "the balance moved only by what answered completions charged");
  assert.equal(await gateway.service.chain.creditBalance(fuzzWallet), creditsToBaseUnits(credits), "the chain agrees with the ledger");
  assert.deepEqual(await checkInvariants(gateway.service.db), []);
  t.diagnostic(`${jobs.length} jobs on the fuzzing wallet, ${charged.length} charged (${spent} credits), all answered 200`);
});
