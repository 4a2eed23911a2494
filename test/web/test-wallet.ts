/**
 * A Wallet Standard wallet for browser tests, registered in the page before the app loads
 * (page.addInitScript). It holds a real Ed25519 key (imported into the page's WebCrypto) and
 * really signs; its `solana:signIn` builds the Sign In With Solana text itself, as a wallet
 * extension does, so the app's and the server's reading of the standard are checked against an
 * independent writer. `withSignIn: false` leaves only `solana:signMessage`, the fallback path.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
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
