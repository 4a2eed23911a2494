/**
 * The playground against one real gateway with a real worker: over plain HTTP, a signed-in wallet
 * that has no API key streams a completion through its session, in the contract's chunks, and pays
 * for it as for any job (GET /v1/jobs/{id} agrees with the stream and the balance); the route's
 * bounds and refusals. Then the page in real Chromium: pick the model, write, send with Ctrl+Enter,
 * watch the answer and its receipt, which match GET /v1/jobs/{id}; a wallet without credits reads
 * the API's 402 message. With SVC_WEB_SCREENSHOTS=1 it writes docs/app/playground.png and playground-phone.png.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { chromium, type Browser, type Page } from "playwright-core";
import { reinstateWalletKey, suspendWalletKey } from "../../src/accounts/index.ts";
import { outputHash } from "../../src/core/index.ts";
import { generateKeypair, type Keypair } from "../../src/core/keys.ts";
import { jobConcluded } from "../support/eventually.ts";
import { migratedTestDb, MODEL, startTestGateway, type TestGateway } from "../support/service.ts";
import { shootBoth } from "./screenshots.ts";
import { appCall, signInAs } from "./sign-in.ts";
import { signedInPage } from "./test-wallet.ts";

const CHROMIUM = process.env.SVC_CHROMIUM ?? "/usr/bin/chromium";
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"];
const noBrowser = existsSync(CHROMIUM) ? false : `no browser at ${CHROMIUM} (install Debian's chromium, as .ci/run does): browser tests skipped`;

let gateway: TestGateway;
let origin: string;
before(async () => {
  gateway = await startTestGateway({ db: await migratedTestDb(), web: { nonceRateLimit: false } });
  origin = gateway.service.origin;
});
after(() => gateway?.close());

/** POSTs to the playground with the session's cookie and the app's Origin, as the page does. */
function playground(cookie: string, body: unknown): Promise<Response> {
  return fetch(`${origin}/app/api/playground/completions`, { method: "POST", headers: { origin, cookie, "content-type": "application/json" }, body: JSON.stringify(body) });
}

/** The job as /v1 shows it, read with a key the wallet makes afterwards through its session. */
async function v1Job(cookie: string, id: string): Promise<Record<string, any>> {
  const key = (await appCall(origin, cookie, "POST", "/api-key")).body.key as string;
  const res = await fetch(`${gateway.baseUrl}/jobs/${id}`, { headers: { authorization: `Bearer ${key}` } });
  assert.equal(res.status, 200);
  return (await res.json()) as Record<string, any>;
}

const credits = async (cookie: string) => (await appCall(origin, cookie, "GET", "/overview")).body.credits_remaining as number;
const ask = (content: string, extra: Record<string, unknown> = {}) => ({ model: MODEL, messages: [{ role: "user", content }], ...extra });

describe("playground API", () => {
  test("a wallet with no API key streams a completion through its session and pays for it as a job", async () => {
    const kp = generateKeypair();
    await gateway.service.deposits.deposit(kp.address, 500);
    const cookie = await signInAs(origin, kp);
    assert.equal((await appCall(origin, cookie, "GET", "/overview")).body.api_key_created_at, null);
    const models = await appCall(origin, cookie, "GET", "/models");
    assert.deepEqual(models.body.data.map((m: { id: string }) => m.id), [MODEL]);

    const res = await playground(cookie, ask("Say hello", { max_tokens: 16 }));
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type")!, /text\/event-stream/);
    const id = res.headers.get("x-svc-job-id")!;
    assert.match(id, /^job_/);
    const events = (await res.text()).split("\n\n").filter(Boolean).map((e) => e.replace(/^data: /, ""));
    assert.equal(events.at(-1), "[DONE]");
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    for (const chunk of chunks) {
      assert.equal(chunk.object, "chat.completion.chunk");
      assert.equal(chunk.id, `chatcmpl-${id}`);
    }
    const text = chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("");
    assert.ok(text.length > 0);
    const usage = chunks.at(-1).usage;
    assert.ok(usage.completion_tokens <= 16, "max_tokens reached the job");

    const concluded = await jobConcluded(gateway.service, id);
    const job = await v1Job(cookie, id);
    assert.equal(job.status, "settled");
    assert.equal(job.on_chain.proof_hash, outputHash(text), "the worker's proof is of the streamed text");
    assert.equal(job.credits_charged, concluded.creditsCharged);
    assert.ok(job.credits_charged > 0);
    assert.equal(await credits(cookie), 500 - job.credits_charged, "charged once, like any job");
    assert.deepEqual(job.usage, usage);
  });

  test("the playground's bounds: a session, its own Origin, a short conversation, max_tokens capped", async () => {
    const kp = generateKeypair();
    await gateway.service.deposits.deposit(kp.address, 500);
    const cookie = await signInAs(origin, kp);
    const refused = async (body: unknown, status: number, pattern: RegExp) => {
      const res = await playground(cookie, body);
      assert.equal(res.status, status);
      assert.match(((await res.json()) as { error: { message: string } }).error.message, pattern);
    };
    await refused(ask("Hi", { max_tokens: 513 }), 400, /512/);
    await refused(ask("x".repeat(4001)), 400, /4000/);
    await refused(ask("Hi", { tools: [] }), 400, /tools/);
    await refused({ model: MODEL, messages: Array.from({ length: 9 }, () => ({ role: "user", content: "Hi" })) }, 400, /messages/);
    await refused(ask("Hi", { model: "no/such-model" }), 400, /no\/such-model/);
    const noSession = await fetch(`${origin}/app/api/playground/completions`, { method: "POST", headers: { origin, "content-type": "application/json" }, body: JSON.stringify(ask("Hi")) });
    assert.equal(noSession.status, 401);
    const byKey = await fetch(`${origin}/app/api/playground/completions`, {
      method: "POST",
      headers: { origin, authorization: `Bearer ${gateway.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify(ask("Hi")),
    });
    assert.equal(byKey.status, 401, "an API key never spends through the app");
    const elsewhere = await fetch(`${origin}/app/api/playground/completions`, { method: "POST", headers: { origin: "https://evil.example", cookie, "content-type": "application/json" }, body: JSON.stringify(ask("Hi")) });
    assert.equal(elsewhere.status, 400, "another site cannot spend the session's credits");
    assert.equal(await credits(cookie), 500, "nothing refused was charged");
  });

  test("a wallet whose key is suspended spends nothing through its session either", async () => {
    const kp = generateKeypair();
    await gateway.service.deposits.deposit(kp.address, 500);
    const cookie = await signInAs(origin, kp);
    await appCall(origin, cookie, "POST", "/api-key");
    assert.equal((await suspendWalletKey(gateway.service.db, kp.address))?.changed, true);
    const res = await playground(cookie, ask("Hi"));
    assert.equal(res.status, 403);
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, "key_suspended");
    assert.equal(await credits(cookie), 500);
    await reinstateWalletKey(gateway.service.db, kp.address);
    const again = await playground(cookie, ask("Hi", { max_tokens: 4 }));
    assert.equal(again.status, 200);
    await again.text();
  });

  test("one completion at a time per wallet, 5 at once, and a wallet without credits is refused with 402", async () => {
    const kp = generateKeypair();
    await gateway.service.deposits.deposit(kp.address, 500);
    const cookie = await signInAs(origin, kp);
    const first = await playground(cookie, ask("Count to twenty", { max_tokens: 64 }));
    assert.equal(first.status, 200);
    const second = await playground(cookie, ask("Hi"));
    assert.equal(second.status, 429);
    assert.match(((await second.json()) as { error: { message: string } }).error.message, /one completion at a time/);
    await first.text();
    for (let i = 0; i < 4; i++) {
      const next = await playground(cookie, ask("Hi", { max_tokens: 1 }));
      assert.equal(next.status, 200);
      await next.text();
    }
    const sixth = await playground(cookie, ask("Hi", { max_tokens: 1 }));
    assert.equal(sixth.status, 429, "5 at once, then 20 a minute");
    assert.ok(Number(sixth.headers.get("retry-after")) >= 1);

    const broke = await signInAs(origin, generateKeypair());
    const res = await playground(broke, ask("Hi"));
    assert.equal(res.status, 402);
    const body = (await res.json()) as { error: { code: string; message: string } };
    assert.equal(body.error.code, "insufficient_credits");
  });
});

describe("playground in Chromium", { skip: noBrowser }, () => {
  let browser: Browser;
  before(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS });
  });
  after(() => browser?.close());

  async function signedIn(keypair: Keypair): Promise<Page> {
    const page = await signedInPage(browser, origin, keypair, { width: 1280, height: 900 });
    await page.getByRole("button", { name: "Playground" }).click();
    await page.getByRole("heading", { level: 2, name: "Playground" }).waitFor();
    return page;
  }

  test("write, send with Ctrl+Enter, watch it stream: the answer, the cost and the receipt match GET /v1/jobs/{id}", async () => {
    const kp = generateKeypair();
    await gateway.service.deposits.deposit(kp.address, 400);
    const page = await signedIn(kp);
    await page.getByRole("option", { name: MODEL }).waitFor({ state: "attached" });
    assert.equal(await page.getByLabel("Model").inputValue(), MODEL, "the first served model is picked");
    await page.getByLabel("Message").fill("Write one sentence about the sea.");
    await page.getByLabel("Message").press("Control+Enter");
    const receipt = page.getByRole("region", { name: "Receipt" });
    await receipt.getByText("Settlement transaction").waitFor();
    await receipt.getByText(/^sha256:/).waitFor();
    const answer = (await page.getByRole("log", { name: "Answer" }).textContent())!;
    const id = (await receipt.getByText(/^job_/).textContent())!;
    const cookie = await signInAs(origin, kp);
    const job = await v1Job(cookie, id);
    assert.equal(job.on_chain.proof_hash, outputHash(answer), "the page showed the text the worker proved");
    assert.equal(Number(await page.locator("#playground-cost").textContent()), job.credits_charged);
    const shown = (await receipt.textContent())!;
    for (const value of [job.on_chain.escrow_tx, job.on_chain.settlement_tx, job.on_chain.proof_hash]) assert.ok(shown.includes(value), value);
    assert.equal(await credits(cookie), 400 - job.credits_charged);
    await shootBoth(page, "playground");
    await page.context().close();
  });

  test("a wallet without credits reads the API's 402 message", async () => {
    const page = await signedIn(generateKeypair());
    await page.getByLabel("Message").fill("Hi");
    await page.getByRole("button", { name: "Send" }).click();
    await page.getByRole("alert").getByText(/credits/i).waitFor();
    const shown = await page.getByRole("alert").textContent();
    const res = await playground(await signInAs(origin, generateKeypair()), ask("Hi"));
    assert.equal(shown, ((await res.json()) as { error: { message: string } }).error.message);
    await page.context().close();
  });
});
