/**
 * A Wallet Standard wallet for browser tests, registered in the page before the app loads
 * (page.addInitScript). It holds a real Ed25519 key (imported into the page's WebCrypto) and
 * really signs; its `solana:signIn` builds the Sign In With Solana text itself, as a wallet
 * extension does, so the app's and the server's reading of the standard are checked against an
 * independent writer. `withSignIn: false` leaves only `solana:signMessage`, the fallback path.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import type { Keypair } from "../../src/core/keys.ts";

const PKCS8_ED25519_PREFIX = "302e020100300506032b657004220420";

export interface TestWalletInit {
  name: string;
  address: string;
  publicKey: number[];
  pkcs8: number[];
  withSignIn: boolean;
}

export function testWalletInit(keypair: Keypair, options: { name?: string; withSignIn?: boolean } = {}): TestWalletInit {
  const pkcs8 = Buffer.concat([Buffer.from(PKCS8_ED25519_PREFIX, "hex"), Buffer.from(keypair.secretKey.subarray(0, 32))]);
  return {
    name: options.name ?? "Test Wallet",
    address: keypair.address,
    publicKey: [...keypair.publicKey],
    pkcs8: [...pkcs8],
    withSignIn: options.withSignIn ?? true,
  };
}

const PAGE_SOURCE = readFileSync(join(import.meta.dirname, "test-wallet.page.js"), "utf8");

/** The init script that registers the wallet (for `context.addInitScript`). */
export function testWalletScript(init: TestWalletInit): { content: string } {
  return { content: `${PAGE_SOURCE}\nregisterTestWallet(${JSON.stringify(init)});` };
}

/**
 * A page of the app at `origin` in a new browser context holding this test wallet for `keypair`,
 * signed in through it as a person would (Connect wallet, Test Wallet, Sign in). `clipboard`
 * lets the page read and write the clipboard.
 */
export async function signedInPage(
  browser: Browser,
  origin: string,
  keypair: Keypair,
  options: { width?: number; height?: number; withSignIn?: boolean; clipboard?: boolean } = {},
): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: options.width ?? 1100, height: options.height ?? 800 } });
  if (options.clipboard) await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin });
  await context.addInitScript(testWalletScript(testWalletInit(keypair, options.withSignIn === undefined ? {} : { withSignIn: options.withSignIn })));
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  await page.goto(`${origin}/`);
  await page.getByRole("button", { name: "Connect wallet" }).click();
  await page.getByRole("button", { name: "Test Wallet" }).click();
  await page.getByRole("button", { name: "Sign in", exact: true }).click();
  await page.getByRole("button", { name: "Sign out" }).waitFor();
  return page;
}
