/**
 * The app's guidance and records in real Chromium, against one real gateway whose seed worker
 * serves two catalog models: the Overview's three first steps (credits, a key, a first request
 * made by running the Node snippet the page copies), the Usage page's chart against what
 * GET /v1/jobs says the jobs cost, and the Jobs page's filters, paging and receipt. Skipped,
 * saying so, when no browser exists (as app.test.ts).
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { chromium, type Browser, type Page } from "playwright-core";
import { issueApiKey } from "../../src/accounts/index.ts";
import { generateKeypair, type Keypair } from "../../src/core/keys.ts";
import { WorkerNode } from "../../src/worker/worker-node.ts";
import { jobConcluded } from "../support/eventually.ts";
import { migratedTestDb, MODEL, startTestGateway, testEngine, type TestGateway } from "../support/service.ts";
import { appCall, signInAs } from "./sign-in.ts";
import { signedInPage } from "./test-wallet.ts";

const CHROMIUM = process.env.SVC_CHROMIUM ?? "/usr/bin/chromium";
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"];
const REPO = join(import.meta.dirname, "..", "..");
/** A second catalog model, served by the same small engine, so that the chart and the filters have two. */
const OTHER = "Qwen/Qwen3-1.7B";
const noBrowser = existsSync(CHROMIUM) ? false : `no browser at ${CHROMIUM} (install Debian's chromium, as .ci/run does): browser tests skipped`;
if (noBrowser) console.log(noBrowser);

interface ApiJob {
  id: string;
  status: string;
  model: string;
  credits_charged: number;
  on_chain: { settlement_tx: string | null };
}

let gateway: TestGateway;
let origin: string;
let browser: Browser;
before(async () => {
  const engine = await testEngine();
  const worker = new WorkerNode(generateKeypair(), new Map([[MODEL, engine], [OTHER, engine]]));
  gateway = await startTestGateway({ db: await migratedTestDb(), credits: 0, rateLimit: false, web: { nonceRateLimit: false }, workers: [worker] });
  origin = gateway.service.origin;
  if (!noBrowser) browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS });
});
after(async () => {
  await browser?.close();
  await gateway?.close();
});

/** A page whose browser holds a wallet for `keypair`, signed in through it; the page may use the clipboard. */
function signedIn(keypair: Keypair, width = 1100): Promise<Page> {
  return signedInPage(browser, origin, keypair, { width, clipboard: true });
}

async function openPage(page: Page, name: string): Promise<void> {
  await page.getByRole("navigation").getByRole("button", { name, exact: true }).click();
  await page.getByRole("heading", { level: 2, name }).waitFor();
}

async function fitsWidth(page: Page, what: string): Promise<void> {
  // Measured after the next frame, once the layout for the new width is done.
  const { overflow, wide } = await page.evaluate(async () => {
    await new Promise(requestAnimationFrame);
    const wide = [...document.querySelectorAll("body *")].filter((e) => e.getBoundingClientRect().right > window.innerWidth);
    return { overflow: document.documentElement.scrollWidth - window.innerWidth, wide: wide.slice(0, 5).map((e) => `${e.tagName.toLowerCase()}.${e.className}`) };
  });
  assert.ok(overflow <= 0, `${what} is ${overflow}px wider than the window: ${wide.join(", ")}`);
}

/** Each first step's state as the Overview shows it, once the steps are shown. */
async function stepStates(page: Page): Promise<Record<string, string>> {
  await page.getByRole("heading", { name: "Get started" }).waitFor();
  const states: Record<string, string> = {};
  for (const step of ["credits", "key", "request"]) {
    states[step] = (await page.locator(`[data-step="${step}"] .steps-state`).textContent())!;
  }
  return states;
}

/** The wallet's jobs as GET /v1/jobs lists them, every page. */
async function apiJobs(apiKey: string): Promise<ApiJob[]> {
  const jobs: ApiJob[] = [];
  for (let cursor = ""; ; ) {
    const res = await fetch(`${gateway.baseUrl}/jobs?limit=100${cursor}`, { headers: { authorization: `Bearer ${apiKey}` } });
    const page = (await res.json()) as { data: ApiJob[]; next_cursor: string | null };
    jobs.push(...page.data);
    if (!page.next_cursor) return jobs;
    cursor = `&before=${page.next_cursor}`;
  }
}

async function ask(client: OpenAI, model: string): Promise<string> {
  const reply = await client.chat.completions.create({ model, messages: [{ role: "user", content: "Hi" }], max_tokens: 4 });
  const id = reply.id.replace(/^chatcmpl-/, "");
  await jobConcluded(gateway.service, id);
  return id;
}

describe("the usage and first-steps routes", () => {
  test("GET /usage: the 30 UTC days up to today, the wallet's own charges by day and model; GET /first-steps follows the wallet", async () => {
    const kp = generateKeypair();
    const cookie = await signInAs(origin, kp);
    const fresh = (await appCall(origin, cookie, "GET", "/first-steps")).body;
    assert.deepEqual(fresh.steps, { credits: false, api_key: false, first_request: false });
    assert.equal(fresh.base_url, `${origin}/v1`);
    assert.deepEqual([...fresh.models].sort(), [MODEL, OTHER].sort());
    assert.ok(fresh.models.includes(fresh.model));
    const empty = (await appCall(origin, cookie, "GET", "/usage")).body;
    assert.deepEqual([empty.credits_spent, empty.jobs, empty.models, empty.data.length], [0, 0, [], 30]);

    await gateway.service.deposits.deposit(kp.address, 1000);
    const apiKey = await issueApiKey(gateway.service.db, kp.address);
    const client = new OpenAI({ apiKey, baseURL: gateway.baseUrl, maxRetries: 0 });
    await ask(client, MODEL);
    await ask(client, MODEL);
    const other = await gateway.newAccount(1000);
    await ask(other.client, MODEL);
    assert.deepEqual((await appCall(origin, cookie, "GET", "/first-steps")).body.steps, { credits: true, api_key: true, first_request: true });

    const usage = (await appCall(origin, cookie, "GET", "/usage")).body;
    const charged = (await apiJobs(apiKey)).reduce((n, j) => n + j.credits_charged, 0);
    const today = new Date().toISOString().slice(0, 10);
    assert.equal(usage.data.at(-1).day, today, "today last");
    assert.equal(usage.data[0].day, new Date(Date.now() - 29 * 86_400_000).toISOString().slice(0, 10));
    assert.deepEqual(usage.data.at(-1), { day: today, credits: charged, jobs: 2, models: [{ model: MODEL, credits: charged, jobs: 2 }] });
    assert.deepEqual([usage.credits_spent, usage.jobs, usage.models], [charged, 2, [{ model: MODEL, credits: charged, jobs: 2 }]], "the other wallet's job is not counted");

    await appCall(origin, cookie, "DELETE", "/api-key");
    assert.equal((await appCall(origin, cookie, "GET", "/first-steps")).body.steps.api_key, false, "a revoked key is no key");
  });
});

describe("the app guides and accounts, in Chromium", { skip: noBrowser }, () => {
  test("a new wallet's three steps, at phone width: undone, then done one by one, the copied Node snippet answers, then folded", async () => {
    const kp = generateKeypair();
    const page = await signedIn(kp, 375);
    assert.deepEqual(await stepStates(page), { credits: "To do", key: "To do", request: "To do" });
    await fitsWidth(page, "the Overview with its steps, at phone width,");

    await page.getByRole("link", { name: "Add credits on the Credits page" }).click();
    await page.getByRole("heading", { level: 2, name: "Credits" }).waitFor();
    await gateway.service.deposits.deposit(kp.address, 500);
    await openPage(page, "Overview");
    assert.deepEqual(await stepStates(page), { credits: "Done", key: "To do", request: "To do" });

    await page.getByRole("link", { name: "Create one on the API key page" }).click();
    await page.getByRole("button", { name: "Create API key" }).click();
    const key = await page.getByLabel("New API key").inputValue();
    await openPage(page, "Overview");
    assert.deepEqual(await stepStates(page), { credits: "Done", key: "Done", request: "To do" });

    // Copied by keyboard alone, then run as it is with the key in its environment variable.
    await page.getByRole("button", { name: "Copy Node (openai)" }).focus();
    await page.keyboard.press("Enter");
    await page.getByText("Copied.").waitFor();
    const snippet = await page.evaluate(() => navigator.clipboard.readText());
    assert.ok(snippet.includes(`baseURL: "${origin}/v1"`), snippet);
    const served = ((await (await fetch(`${gateway.baseUrl}/models`, { headers: { authorization: `Bearer ${key}` } })).json()) as { data: { id: string }[] }).data.map((m) => m.id);
    assert.ok(served.includes(/model: "([^"]+)"/.exec(snippet)?.[1] ?? ""), `a model GET /v1/models lists: ${snippet}`);
    const run = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", snippet], { cwd: REPO, env: { ...process.env, SVC_API_KEY: key } });
    assert.ok(run.stdout.trim().length > 0, "the snippet printed the answer");
    const [job] = await apiJobs(key);
    assert.ok(job, "the snippet's request made a job");
    const curl = await page.getByLabel("curl", { exact: true }).textContent();
    assert.ok(curl!.startsWith(`curl ${origin}/v1/chat/completions`), curl!);

    await openPage(page, "Usage");
    await openPage(page, "Overview");
    await page.getByText("You're set up").waitFor();
    assert.equal(await page.getByRole("heading", { name: "Get started" }).count(), 0, "the steps folded");
    await page.context().close();
  });

  test("the usage chart and totals show what the jobs cost; the jobs filter, page both ways and show a receipt", async () => {
    const kp = generateKeypair();
    await gateway.service.deposits.deposit(kp.address, 5000);
    const apiKey = await issueApiKey(gateway.service.db, kp.address);
    const client = new OpenAI({ apiKey, baseURL: gateway.baseUrl, maxRetries: 0 });
    // 22 jobs of one model and 2 of the other: more than the Jobs page's 20 a page.
    const ids = await Promise.all([...Array.from({ length: 22 }, () => ask(client, MODEL)), ask(client, OTHER), ask(client, OTHER)]);
    const jobs = await apiJobs(apiKey);
    assert.equal(jobs.length, ids.length);
    const costOf = (model: string) => jobs.filter((j) => j.model === model && j.status === "settled").reduce((n, j) => n + j.credits_charged, 0);
    assert.ok(costOf(MODEL) > 0 && costOf(OTHER) > 0);

    const page = await signedIn(kp);
    await openPage(page, "Usage");
    const chart = page.getByRole("img", { name: /Credits spent per day/ });
    await chart.waitFor();
    const bars = await chart.locator("rect[data-model]").evaluateAll((rects) => rects.map((r) => ({ model: r.getAttribute("data-model")!, credits: Number(r.getAttribute("data-credits")) })));
    const charted = (model: string) => bars.filter((b) => b.model === model).reduce((n, b) => n + b.credits, 0);
    assert.deepEqual([charted(MODEL), charted(OTHER)], [costOf(MODEL), costOf(OTHER)]);
    const table = page.getByRole("table", { name: "Credits spent per day, by model" });
    const rows = await table.locator("tbody tr").evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent)));
    assert.deepEqual(rows.map((r) => [r[1], Number(r[2]), Number(r[3])]).sort(), [[MODEL, costOf(MODEL), 22], [OTHER, costOf(OTHER), 2]].sort());
    assert.equal(await page.getByLabel("Credits in 30 days").textContent(), (costOf(MODEL) + costOf(OTHER)).toLocaleString("en-US"));

    await openPage(page, "Jobs");
    const shownIds = async () => {
      const labels = await page.getByRole("table", { name: "Jobs" }).getByRole("button", { name: /^Details of job_/ }).evaluateAll((bs) => bs.map((b) => b.getAttribute("aria-label")!));
      return labels.map((l) => l.replace("Details of ", ""));
    };
    const newest = jobs.map((j) => j.id);
    await page.getByLabel("Model").selectOption(OTHER);
    await page.waitForFunction(() => document.querySelectorAll("table tbody tr").length === 2);
    assert.deepEqual(await shownIds(), jobs.filter((j) => j.model === OTHER).map((j) => j.id));
    await page.getByLabel("Status").selectOption("failed");
    await page.getByText("No jobs match.").waitFor();
    await page.getByLabel("Model").selectOption("");
    await page.getByLabel("Status").selectOption("settled");
    await page.waitForFunction(() => document.querySelectorAll("table tbody tr").length === 20);
    assert.deepEqual(await shownIds(), newest.slice(0, 20));
    assert.ok(await page.getByRole("button", { name: "Newer" }).isDisabled());
    await page.getByRole("button", { name: "Older" }).click();
    await page.waitForFunction(() => document.querySelectorAll("table tbody tr").length === 4);
    assert.deepEqual(await shownIds(), newest.slice(20));
    assert.ok(await page.getByRole("button", { name: "Older" }).isDisabled());
    await page.getByRole("button", { name: "Newer" }).click();
    await page.waitForFunction(() => document.querySelectorAll("table tbody tr").length === 20);
    assert.deepEqual(await shownIds(), newest.slice(0, 20), "the 20 just newer than that page");
    assert.ok(await page.getByRole("button", { name: "Newer" }).isDisabled());

    const target = jobs.find((j) => j.model === OTHER)!;
    await page.getByLabel("Model").selectOption(OTHER);
    await page.getByRole("button", { name: `Details of ${target.id}` }).click();
    const receipt = page.getByRole("region", { name: "Job detail" });
    await receipt.getByRole("heading", { name: `Job ${target.id}` }).waitFor();
    assert.ok(target.on_chain.settlement_tx);
    const text = (await receipt.textContent())!;
    assert.ok(text.includes(target.on_chain.settlement_tx), "the settlement transaction");
    assert.equal(await receipt.getByLabel("svc verify command", { exact: true }).textContent(), `SVC_API_KEY=<your API key> svc verify ${target.id} --base-url ${origin}/v1`);
    await page.setViewportSize({ width: 375, height: 740 });
    await fitsWidth(page, "the Jobs page with a receipt, at phone width,");
    await openPage(page, "Usage");
    await chart.waitFor();
    await fitsWidth(page, "the Usage page at phone width");
    await page.context().close();
  });
});
