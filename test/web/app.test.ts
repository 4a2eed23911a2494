/**
 * The web app against one real gateway. First its server side over plain HTTP: the page and its
 * bundle, Sign In With Solana with single-use nonces, the session cookie and its limits (never on
 * /v1; API keys never on /app/api; other origins refused), the key and settings routes. Then the
 * app itself in real Chromium (Debian's package, driven by playwright-core) with a Wallet Standard
 * test wallet holding a real Ed25519 key. One browser is shared; each test has its own context
 * (its own cookies). The browser tests are skipped, saying so, when no browser exists. With
 * SVC_WEB_SCREENSHOTS=1 they also write the screenshots of docs/app.md to docs/app/.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { chromium, type Browser, type Page } from "playwright-core";
import { createSolanaRpc, type Base64EncodedWireTransaction } from "@solana/kit";
import { signWalletSlot, startChainRpc } from "../../src/chain/index.ts";
import { generateKeypair, type Keypair } from "../../src/core/keys.ts";
import { formatSignInMessage } from "../../src/web/index.ts";
import { jobConcluded } from "../support/eventually.ts";
import { migratedTestDb, MODEL } from "../support/service.ts";
import { testCert } from "../support/tls-cert.ts";
import { startWebhookGateway, type WebhookGateway } from "../support/webhook-gateway.ts";
import { startReceiver, type Receiver } from "../support/webhook-receiver.ts";
import { shootBoth } from "./screenshots.ts";
import { appCall, postSignIn, signInAs, signInInput } from "./sign-in.ts";
import { signedInPage } from "./test-wallet.ts";
import { keepEvents } from "../support/kept-events.ts";

const CHROMIUM = process.env.SVC_CHROMIUM ?? "/usr/bin/chromium";
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"];
const SECRET = "browser-test-signing-secret";
const SCREENSHOTS = process.env.SVC_WEB_SCREENSHOTS === "1" ? join(import.meta.dirname, "..", "..", "docs", "app") : undefined;
const hi = [{ role: "user" as const, content: "Hi" }];
const noBrowser = existsSync(CHROMIUM) ? false : `no browser at ${CHROMIUM} (install Debian's chromium, as .ci/run does): browser tests skipped`;
if (noBrowser) console.log(noBrowser);

// One gateway for the file: starting one costs seconds on a loaded machine.
let gateway: WebhookGateway;
let receiver: Receiver;
let origin: string;
before(async () => {
  receiver = await startReceiver(SECRET);
  const db = await migratedTestDb();
  // Every test signs in from this one address, more often than a person would; the sign-in limits have their own tests.
  gateway = await startWebhookGateway({ db, web: { nonceRateLimit: false }, webhooks: { allowLoopback: true, trustedCa: (await testCert()).cert, timeScale: 0.0003, deliveryTimeoutMs: 2_000 } });
  origin = gateway.service.origin;
});
after(async () => {
  await gateway?.close();
  await receiver?.close();
});

describe("web app API", () => {

  test("the page is served at / with its bundle; /docs/errors stays", async () => {
    const page = await fetch(`${origin}/`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get("content-type")!, /text\/html/);
    assert.match(page.headers.get("content-security-policy")!, /default-src 'self'/);
    const html = await page.text();
    const script = /src="(\/assets\/app-[0-9a-f]+\.js)"/.exec(html)?.[1];
    assert.ok(script, html);
    const js = await fetch(`${origin}${script}`);
    assert.equal(js.status, 200);
    assert.match(js.headers.get("content-type")!, /javascript/);
    assert.ok((await js.text()).includes("Connect wallet"));
    assert.equal((await fetch(`${origin}/docs/errors`)).status, 200);
  });

  test("a signed message opens a session cookie: HttpOnly, SameSite=Strict, scoped to /app/api", async () => {
    const kp = generateKeypair();
    const message = formatSignInMessage({ ...(await signInInput(origin)), address: kp.address });
    const answer = await postSignIn(origin, kp, message);
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    assert.equal(answer.body.wallet, kp.address);
    const cookie = answer.headers.get("set-cookie")!;
    assert.match(cookie, /^svc_session=[A-Za-z0-9_-]{43}; Path=\/app\/api; Max-Age=\d+; HttpOnly; SameSite=Strict$/, "no Secure over plain http");
    assert.equal((await appCall(origin, answer.cookie!, "GET", "/session")).body.wallet, kp.address);

    const replayed = await postSignIn(origin, kp, message);
    assert.equal(replayed.status, 401, "the same signed message a second time");
    assert.match(replayed.body.error.message, /already used/);

    await appCall(origin, answer.cookie!, "DELETE", "/session");
    assert.equal((await appCall(origin, answer.cookie!, "GET", "/session")).status, 401, "signed out");
  });

  test("an expired message, a made-up nonce and another origin's message are refused", async () => {
    const kp = generateKeypair();
    const input = await signInInput(origin);
    const past = { issuedAt: new Date(Date.now() - 20 * 60_000).toISOString(), expirationTime: new Date(Date.now() - 10 * 60_000).toISOString() };
    const expired = await postSignIn(origin, kp, formatSignInMessage({ ...input, ...past, address: kp.address }));
    assert.equal(expired.status, 401);
    assert.match(expired.body.error.message, /expired/);
    const madeUp = await postSignIn(origin, kp, formatSignInMessage({ ...input, nonce: "f".repeat(32), address: kp.address }));
    assert.equal(madeUp.status, 401);
    const elsewhere = await postSignIn(origin, kp, formatSignInMessage({ ...input, domain: "evil.example", uri: "https://evil.example/", address: kp.address }));
    assert.equal(elsewhere.status, 401);
    assert.ok(await signInAs(origin, kp), "a fresh message still works");
  });

  test("state-changing requests from another origin, or none, are refused", async () => {
    const cookie = await signInAs(origin, generateKeypair());
    const evil = await appCall(origin, cookie, "POST", "/api-key", undefined, { origin: "https://evil.example" });
    assert.equal(evil.status, 400);
    assert.equal(evil.body.error.param, "origin");
    const res = await fetch(`${origin}/app/api/session/nonce`, { method: "POST" });
    assert.equal(res.status, 400, "no Origin header at all");
    assert.equal((await appCall(origin, cookie, "GET", "/overview", undefined, { origin: "https://evil.example" })).status, 200, "reads carry no risk");
  });

  test("API keys never open /app/api; a session cookie never works on /v1", async () => {
    const byKey = await appCall(origin, "", "GET", "/overview", undefined, { authorization: `Bearer ${gateway.apiKey}` });
    assert.equal(byKey.status, 401);
    assert.match(byKey.body.error.message, /API keys cannot/);
    const cookie = await signInAs(origin, generateKeypair());
    const v1 = await fetch(`${gateway.baseUrl}/account`, { headers: { cookie } });
    assert.equal(v1.status, 401);
  });

  test("a session acts only for its own wallet", async () => {
    const [alice, bob] = [generateKeypair(), generateKeypair()];
    const [aliceCookie, bobCookie] = [await signInAs(origin, alice), await signInAs(origin, bob)];
    await gateway.service.deposits.deposit(bob.address, 300);
    const hook = await appCall(origin, bobCookie, "POST", "/webhooks", { url: "https://127.0.0.1:9/hook", events: ["credit.low"], secret: "s".repeat(20) });
    assert.equal(hook.status, 200, JSON.stringify(hook.body));
    assert.deepEqual((await appCall(origin, aliceCookie, "GET", "/webhooks")).body.data, []);
    assert.equal((await appCall(origin, aliceCookie, "DELETE", `/webhooks/${hook.body.id}`)).status, 404);
    assert.equal((await appCall(origin, aliceCookie, "POST", `/webhooks/${hook.body.id}/replay`)).status, 404);
    assert.equal((await appCall(origin, aliceCookie, "GET", "/overview")).body.credits_remaining, 0);
    assert.equal((await appCall(origin, bobCookie, "GET", "/overview")).body.credits_remaining, 300);
    await gateway.service.deposits.deposit(bob.address, 200);
    const deposits = (await appCall(origin, bobCookie, "GET", "/deposits")).body.data;
    assert.deepEqual(deposits.map((d: { credits_added: number }) => d.credits_added), [200, 300], "newest first");
    assert.match(deposits[0].deposit_tx, /^[1-9A-HJ-NP-Za-km-z]{64,88}$/);
    assert.deepEqual((await appCall(origin, aliceCookie, "GET", "/deposits")).body.data, []);
    // A cookie naming another wallet's session is just an unknown session.
    assert.equal((await appCall(origin, `${aliceCookie.slice(0, -2)}xx`, "GET", "/overview")).status, 401);
  });

  test("create, replace and revoke the key; each takes effect on the next request", async () => {
    const kp = generateKeypair();
    await gateway.service.deposits.deposit(kp.address, 500);
    const cookie = await signInAs(origin, kp);
    const first = await appCall(origin, cookie, "POST", "/api-key");
    assert.match(first.body.key, /^svc_live_[A-Za-z0-9]{32}$/);
    const client = (key: string) => new OpenAI({ apiKey: key, baseURL: gateway.baseUrl, maxRetries: 0 });
    const reply = await client(first.body.key).chat.completions.create({ model: MODEL, messages: hi });
    assert.ok(reply.choices[0]!.message.content);
    const overview = await appCall(origin, cookie, "GET", "/overview");
    assert.equal(overview.body.api_key_created_at, first.body.created_at);
    assert.ok(!JSON.stringify(overview.body).includes(first.body.key), "the key is never shown again");

    const second = await appCall(origin, cookie, "POST", "/api-key");
    await assert.rejects(client(first.body.key).models.list(), { status: 401 });
    await client(second.body.key).models.list();
    await appCall(origin, cookie, "DELETE", "/api-key");
    await assert.rejects(client(second.body.key).models.list(), { status: 401 });
    assert.equal((await appCall(origin, cookie, "GET", "/overview")).body.api_key_created_at, null);
  });

  test("the low-balance threshold is used by credit.low from then on", async () => {
    const kp = generateKeypair();
    await keepEvents(gateway.service.db, kp.address);
    await gateway.service.deposits.deposit(kp.address, 1000);
    const cookie = await signInAs(origin, kp);
    assert.equal((await appCall(origin, cookie, "PUT", "/settings", { credit_low_threshold: -1 })).status, 400);
    assert.equal((await appCall(origin, cookie, "PUT", "/settings", { credit_low_threshold: 1000 })).status, 200);
    const key = (await appCall(origin, cookie, "POST", "/api-key")).body.key as string;
    await new OpenAI({ apiKey: key, baseURL: gateway.baseUrl, maxRetries: 0 }).chat.completions.create({ model: MODEL, messages: hi });
    const events = await gateway.service.db.query<{ body: string }>("SELECT body FROM events WHERE account = $1 AND name = 'credit.low'", [kp.address]);
    assert.equal(events.length, 1);
    const data = JSON.parse(events[0]!.body).data;
    assert.equal(data.threshold, 1000);
    assert.ok(data.credits_remaining < 1000, "the default of 100 would not have fired here");
  });

  test("'Use the dev wallet' exists only when the service was given one", async () => {
    assert.equal((await appCall(origin, "", "POST", "/session/dev")).status, 404);
    const dev = generateKeypair();
    gateway.service.enableDevSignIn(dev);
    assert.equal((await appCall(origin, "", "GET", "/config")).body.dev_wallet, dev.address);
    const answer = await appCall(origin, "", "POST", "/session/dev");
    assert.equal(answer.status, 200);
    assert.equal(answer.body.wallet, dev.address);
  });
});

describe("web app in Chromium", { skip: noBrowser }, () => {
  let browser: Browser;
  before(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS });
    if (SCREENSHOTS) await mkdir(SCREENSHOTS, { recursive: true });
  });
  after(() => browser?.close());

  /** A page whose browser holds a wallet for `keypair`, signed in through it. */
  function signedIn(keypair: Keypair, options: { withSignIn?: boolean; width?: number } = {}): Promise<Page> {
    return signedInPage(browser, origin, keypair, options);
  }

  const shot = (page: Page, name: string) => shootBoth(page, name);

  test("sign in with solana:signIn, see the balance, sign out; the signMessage fallback signs in too", async () => {
    const kp = generateKeypair();
    await gateway.service.deposits.deposit(kp.address, 250);
    const page = await signedIn(kp);
    assert.equal(await page.getByLabel("Credits remaining").textContent(), "250");
    const [deposit] = await gateway.service.db.query<{ signature: string }>("SELECT signature FROM chain_actions WHERE kind = 'deposit' AND subject = $1", [kp.address]);
    await page.getByRole("table", { name: "Deposits" }).getByText(deposit!.signature).waitFor();
    await shot(page, "overview");
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("button", { name: "Connect wallet" }).waitFor();
    await page.reload();
    await page.getByRole("button", { name: "Connect wallet" }).waitFor();
    await page.context().close();

    const fallback = await signedIn(kp, { withSignIn: false });
    assert.equal(await fallback.getByLabel("Credits remaining").textContent(), "250");
    await fallback.context().close();
  });

  test("create a key and use it with the openai SDK; replace it and the old one is refused; revoke", async () => {
    const kp = generateKeypair();
    await gateway.service.deposits.deposit(kp.address, 500);
    const page = await signedIn(kp);
    await page.getByRole("button", { name: "API key" }).click();
    await page.getByRole("button", { name: "Create API key" }).click();
    const first = await page.getByLabel("New API key").inputValue();
    assert.match(first, /^svc_live_[A-Za-z0-9]{32}$/);
    await shot(page, "api-key");
    const client = (key: string) => new OpenAI({ apiKey: key, baseURL: gateway.baseUrl, maxRetries: 0 });
    const reply = await client(first).chat.completions.create({ model: MODEL, messages: hi });
    assert.ok(reply.choices[0]!.message.content);
    // Answered before its worker's batch settles it: the job's page below shows the settlement.
    await jobConcluded(gateway.service, reply.id.replace(/^chatcmpl-/, ""));

    await page.getByRole("button", { name: "Replace API key" }).click();
    await page.waitForFunction((old) => (document.querySelector("input[readonly]") as HTMLInputElement | null)?.value !== old, first);
    const second = await page.getByLabel("New API key").inputValue();
    await assert.rejects(client(first).chat.completions.create({ model: MODEL, messages: hi }), { status: 401 });
    await client(second).models.list();
    await page.getByRole("button", { name: "Revoke API key" }).click();
    await page.getByRole("button", { name: "Create API key" }).waitFor();
    await assert.rejects(client(second).models.list(), { status: 401 });

    await page.getByRole("button", { name: "Jobs" }).click();
    const table = page.getByRole("table", { name: "Jobs" });
    await table.waitFor();
    await table.getByRole("button", { name: /^Details of job_/ }).first().click();
    const detail = page.getByRole("region", { name: "Job detail" });
    await detail.getByText("Settlement transaction").waitFor();
    const id = (await detail.getByRole("heading").textContent())!.replace("Job ", "");
    const job = (await gateway.service.jobs.getJob(kp.address, id))!;
    assert.ok(job.settlementTx && job.proofHash);
    for (const shown of [job.escrowTx!, job.settlementTx, job.proofHash]) assert.ok((await detail.textContent())!.includes(shown), shown);
    await shot(page, "jobs");
    await page.context().close();
  });

  test("add a webhook, its deliveries fail, replay them: delivered and active again", async () => {
    const kp = generateKeypair();
    const page = await signedIn(kp);
    await page.getByRole("button", { name: "Webhooks" }).click();
    await page.getByLabel("Endpoint URL").fill(`${receiver.origin}/browser`);
    await page.getByLabel("Signing secret").fill(SECRET);
    await page.getByLabel("credit.topup").check();
    let up = false;
    receiver.script("/browser", () => (up ? 200 : 500));
    await page.getByRole("button", { name: "Add webhook" }).click();
    const item = page.getByRole("listitem", { name: `${receiver.origin}/browser` });
    await item.getByText("active").waitFor();

    await gateway.service.deposits.deposit(kp.address, 100);
    await receiver.waitFor("/browser", 5);
    for (let i = 0; i < 100; i++) {
      await page.getByRole("button", { name: "Overview" }).click();
      await page.getByRole("button", { name: "Webhooks" }).click();
      if (await item.getByText("failed", { exact: true }).isVisible()) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    await item.getByRole("table", { name: "Failed deliveries" }).getByText("credit.topup").waitFor();
    await shot(page, "webhooks");
    up = true;
    await item.getByRole("button", { name: "Replay failed deliveries" }).click();
    await item.getByText("active").waitFor();
    const all = await receiver.waitFor("/browser", 6);
    assert.equal(all[5]!.envelope.id, all[0]!.envelope.id, "the failed event, delivered on replay");
    assert.ok(all[5]!.verified);
    await item.getByRole("button", { name: "Delete" }).click();
    await page.getByText("No webhooks yet.").waitFor();
    await page.context().close();
  });

  test("a new low-balance threshold is the one credit.low fires at", async () => {
    const kp = generateKeypair();
    await keepEvents(gateway.service.db, kp.address);
    await gateway.service.deposits.deposit(kp.address, 1000);
    const page = await signedIn(kp);
    await page.getByRole("button", { name: "Settings" }).click();
    await page.getByLabel("Low-balance threshold").fill("1000");
    await page.getByRole("button", { name: "Save" }).click();
    await page.getByRole("status").waitFor();
    await shot(page, "settings");
    await page.getByRole("button", { name: "API key" }).click();
    await page.getByRole("button", { name: "Create API key" }).click();
    const key = await page.getByLabel("New API key").inputValue();
    await new OpenAI({ apiKey: key, baseURL: gateway.baseUrl, maxRetries: 0 }).chat.completions.create({ model: MODEL, messages: hi });
    const [event] = await gateway.service.db.query<{ body: string }>("SELECT body FROM events WHERE account = $1 AND name = 'credit.low'", [kp.address]);
    assert.equal(JSON.parse(event!.body).data.threshold, 1000);
    await page.context().close();
  });

  test("get test USDC, add 150 credits, be refused 99, withdraw 50, pay 100 by QR code: the wallet signs each transaction", async () => {
    gateway.service.enableDevSignIn(generateKeypair()); // svc dev's faucet is offered while there is a dev wallet
    const kp = generateKeypair();
    const page = await signedIn(kp);
    await page.getByRole("button", { name: "Credits", exact: true }).click();
    await page.getByRole("button", { name: "Get test USDC" }).click();
    await page.getByRole("status").getByText("Got 1000 credits' worth of test USDC.").waitFor();
    await page.getByLabel("Credits to add").fill("99");
    await page.getByRole("button", { name: "Add credits" }).click();
    await page.getByRole("alert").getByText(/at least 100 credits/).waitFor();
    await page.getByLabel("Credits to add").fill("150");
    await page.getByRole("button", { name: "Add credits" }).click();
    await page.getByRole("status").getByText(/Added 150 credits .* Credits remaining: 150\./).waitFor();
    const { chain, db } = gateway.service;
    assert.equal(await chain.creditBalance(kp.address), 1_500_000n, "in the vault on-chain");
    const [deposit] = await db.query<{ state: string }>("SELECT state FROM chain_actions WHERE kind = 'wallet_deposit' AND subject = $1", [kp.address]);
    assert.equal(deposit?.state, "confirmed");
    await page.getByLabel("Credits to withdraw").fill("50");
    await page.getByRole("button", { name: "Withdraw" }).click();
    await page.getByRole("status").getByText(/Withdrew 50 credits .* Credits remaining: 100\./).waitFor();
    assert.equal(await chain.walletUsdc(kp.address), 1000n * 10_000n - 1_500_000n + 500_000n, "the 50 credits' USDC is back in the wallet's own account");
    await page.getByRole("table", { name: "Withdrawals" }).getByText("posted").waitFor();

    // The QR code: a script pays its transaction request as a phone wallet would, and the page notices.
    await page.getByLabel("Credits to add").fill("100");
    await page.getByRole("button", { name: "Pay with a phone wallet" }).click();
    await page.getByRole("img", { name: "Payment QR code" }).waitFor();
    await shot(page, "credits");
    const link = await page.getByRole("link", { name: "the payment link" }).getAttribute("href");
    const requestUrl = decodeURIComponent(link!.slice("solana:".length));
    const fetched = (await (await fetch(requestUrl, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ account: kp.address }) })).json()) as { transaction: string };
    const rpc = await startChainRpc({ chain, port: 0 });
    try {
      const signed = signWalletSlot(new Uint8Array(Buffer.from(fetched.transaction, "base64")), kp);
      await createSolanaRpc(rpc.url).sendTransaction(Buffer.from(signed).toString("base64") as Base64EncodedWireTransaction, { encoding: "base64" }).send();
      await page.getByRole("status").getByText(/Added 100 credits .* Credits remaining: 200\./).waitFor();
    } finally {
      await rpc.close();
    }
    await page.context().close();
  });

  test("keyboard alone, at phone width: the dev wallet signs in and every page fits the screen", async () => {
    const dev = generateKeypair();
    gateway.service.enableDevSignIn(dev);
    const context = await browser.newContext({ viewport: { width: 375, height: 740 } });
    const page = await context.newPage();
    await page.goto(`${origin}/`);
    await page.getByRole("button", { name: "Use the dev wallet" }).waitFor();
    await shootBoth(page, "sign-in");
    for (let i = 0; i < 5 && !(await page.evaluate(() => document.activeElement?.textContent === "Use the dev wallet")); i++) await page.keyboard.press("Tab");
    await page.keyboard.press("Enter");
    await page.getByRole("button", { name: "Sign out" }).waitFor();
    for (const name of ["Overview", "Credits", "API key", "Webhooks", "Jobs", "Settings"]) {
      await page.getByRole("button", { name, exact: true }).focus();
      await page.keyboard.press("Enter");
      await page.getByRole("heading", { level: 2, name }).waitFor();
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 0, `${name} is ${overflow}px wider than a phone`);
    }
    await context.close();
  });
});
