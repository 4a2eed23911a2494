/**
 * Every page of the web app at a phone's width and by keyboard alone, in real Chromium against a
 * real gateway with a real worker. The wallet has credits, a key and a job (run from the
 * playground through its session), so the tables, the chart and the receipts have rows. At
 * 390 × 844 no page scrolls sideways (wide tables scroll inside their own box); with only Tab and
 * Enter a wallet signs in, walks the nav (each button says which page is current, each focus is
 * outlined) and sends a playground message with Ctrl+Enter. With SVC_WEB_SCREENSHOTS=1 it writes
 * the Usage page's two screenshots (the other pages' are written where their tests set them up).
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { chromium, type Browser, type Page } from "playwright-core";
import { generateKeypair, type Keypair } from "../../src/core/keys.ts";
import { jobConcluded } from "../support/eventually.ts";
import { migratedTestDb, MODEL, startTestGateway, type TestGateway } from "../support/service.ts";
import { PHONE, shootBoth } from "./screenshots.ts";
import { appCall, signInAs } from "./sign-in.ts";
import { testWalletInit, testWalletScript } from "./test-wallet.ts";

const CHROMIUM = process.env.SVC_CHROMIUM ?? "/usr/bin/chromium";
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"];
const noBrowser = existsSync(CHROMIUM) ? false : `no browser at ${CHROMIUM} (install Debian's chromium, as .ci/run does): browser tests skipped`;
if (noBrowser) console.log(noBrowser);
const NAV = ["Overview", "Credits", "API key", "Webhooks", "Jobs", "Usage", "Playground", "Settings"];

let gateway: TestGateway;
let origin: string;
let browser: Browser;
/** A wallet with credits, a key and one settled job. */
let wallet: Keypair;
before(async () => {
  if (noBrowser) return;
  gateway = await startTestGateway({ db: await migratedTestDb(), web: { nonceRateLimit: false } });
  origin = gateway.service.origin;
  browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS });
  wallet = generateKeypair();
  await gateway.service.deposits.deposit(wallet.address, 800);
  const cookie = await signInAs(origin, wallet);
  await appCall(origin, cookie, "POST", "/api-key");
  const res = await fetch(`${origin}/app/api/playground/completions`, {
    method: "POST",
    headers: { origin, cookie, "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Hello" }], max_tokens: 24 }),
  });
  assert.equal(res.status, 200);
  await res.text();
  await jobConcluded(gateway.service, res.headers.get("x-svc-job-id")!);
});
after(async () => {
  await browser?.close();
  await gateway?.close();
});

async function openApp(viewport: { width: number; height: number }): Promise<Page> {
  const context = await browser.newContext({ viewport });
  await context.addInitScript(testWalletScript(testWalletInit(wallet)));
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  await page.goto(`${origin}/`);
  return page;
}

/** How many CSS pixels the page is wider than its window: 0 or less when nothing scrolls sideways. */
const overflow = (page: Page) => page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);

/** Presses Tab until the focus is on the control whose text is `name`; fails after `most` presses. */
async function tabTo(page: Page, name: string, most = 12): Promise<void> {
  for (let i = 0; i < most; i++) {
    await page.keyboard.press("Tab");
    if (await page.evaluate((n) => document.activeElement?.textContent?.trim() === n, name)) return;
  }
  assert.fail(`'${name}' is not reached by ${most} presses of Tab`);
}

/** The focused element's outline, which :focus-visible must draw. */
const focusOutline = (page: Page) => page.evaluate(() => {
  const style = getComputedStyle(document.activeElement!);
  return style.outlineStyle === "none" ? "0px" : style.outlineWidth;
});

describe("every page at phone width and by keyboard", { skip: noBrowser }, () => {
  test("at 390 × 844 no page scrolls sideways, the nav wraps within the screen", async () => {
    const page = await openApp(PHONE);
    await page.getByRole("button", { name: "Connect wallet" }).waitFor();
    assert.ok((await overflow(page)) <= 0, "the sign-in page");
    await page.getByRole("button", { name: "Connect wallet" }).click();
    await page.getByRole("button", { name: "Test Wallet" }).click();
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.getByRole("button", { name: "Sign out" }).waitFor();
    for (const name of NAV) {
      const button = page.getByRole("navigation", { name: "Pages" }).getByRole("button", { name, exact: true });
      const box = (await button.boundingBox())!;
      assert.ok(box.x >= 0 && box.x + box.width <= PHONE.width, `the ${name} button is on the screen`);
      await button.click();
      await page.getByRole("heading", { level: 2, name }).waitFor();
      if (name === "Jobs") await page.getByRole("button", { name: /^Details of job_/ }).first().click();
      if (name === "Jobs") await page.getByRole("region", { name: "Job detail" }).waitFor();
      if (name === "Usage") await page.getByRole("img", { name: /Credits spent per day/ }).waitFor();
      if (name === "API key") await page.getByRole("button", { name: "Replace API key" }).click();
      if (name === "API key") await page.getByLabel("New API key").waitFor();
      const extra = await overflow(page);
      assert.ok(extra <= 0, `${name} is ${extra}px wider than the screen`);
      if (name === "Usage") await shootBoth(page, "usage");
    }
    await page.context().close();
  });

  test("by keyboard alone: sign in, walk the nav (aria-current, a visible outline), send a playground message with Ctrl+Enter", async () => {
    const page = await openApp({ width: 1280, height: 800 });
    await page.getByRole("button", { name: "Connect wallet" }).waitFor();
    await tabTo(page, "Connect wallet");
    await page.keyboard.press("Enter");
    await tabTo(page, "Test Wallet");
    await page.keyboard.press("Enter");
    await tabTo(page, "Sign in");
    await page.keyboard.press("Enter");
    await page.getByRole("button", { name: "Sign out" }).waitFor();

    await tabTo(page, NAV[0]!);
    for (const [i, name] of NAV.entries()) {
      // Each nav button is the next stop of Tab after the one before.
      if (i > 0) await page.keyboard.press("Tab");
      assert.equal(await page.evaluate(() => document.activeElement?.textContent), name);
      assert.notEqual(await focusOutline(page), "0px", `${name} shows where the focus is`);
      await page.keyboard.press("Enter");
      await page.getByRole("heading", { level: 2, name }).waitFor();
      assert.equal(await page.getByRole("button", { name, exact: true }).getAttribute("aria-current"), "page");
      const others = await page.locator('nav button[aria-current="page"]').count();
      assert.equal(others, 1, "one page is current");
    }

    await page.getByRole("button", { name: "Playground" }).focus();
    await page.keyboard.press("Enter");
    await page.getByRole("option", { name: MODEL }).waitFor({ state: "attached" });
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Settings", "the rest of the nav first");
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => document.activeElement?.tagName), "SELECT", "the model picker");
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => document.activeElement?.tagName), "TEXTAREA", "the message");
    assert.notEqual(await focusOutline(page), "0px");
    await page.keyboard.type("Hi");
    await page.keyboard.press("Control+Enter");
    await page.getByRole("region", { name: "Receipt" }).waitFor();
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Send", "the send button follows the message");
    await page.context().close();
  });
});
