/**
 * Adding and withdrawing credits through the web app's server routes, with a wallet that really
 * signs (an Ed25519 key, filling its slot of the prepared transaction as a wallet's
 * signTransaction does), on a real gateway and chain: deposits into the vault, withdrawals out
 * of it, the refusals, a signed copy that is not the prepared one, a withdrawal racing paid
 * requests, and svc dev's dev wallet, which the server signs for.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { issueApiKey } from "../../src/accounts/index.ts";
import { createSolanaRpc, type Base64EncodedWireTransaction } from "@solana/kit";
import { signWalletSlot, startChainRpc } from "../../src/chain/index.ts";
import { generateKeypair, type Keypair } from "../../src/core/keys.ts";
import { creditsToBaseUnits } from "../../src/core/units.ts";
import { checkJobInvariants } from "../../src/jobs/job-invariants.ts";
import * as money from "../../src/jobs/money.ts";
import { checkInvariants } from "../../src/ledger/index.ts";
import { assertChainAgrees } from "../support/chain-checks.ts";
import { MODEL, migratedTestDb, startTestGateway, type TestGateway } from "../support/service.ts";
import { appCall, signInAs, type AppCall } from "./sign-in.ts";
import { keepEvents } from "../support/kept-events.ts";

let gateway: TestGateway;
let origin: string;
before(async () => {
  // These tests sign in a wallet each; the sign-in limits have their own tests (sign-in-limits.test.ts).
  gateway = await startTestGateway({ db: await migratedTestDb(), credits: 0, rateLimit: false, web: { nonceRateLimit: false } });
  origin = gateway.service.origin;
});
after(() => gateway.close());

/** A wallet holding `usdcCredits` worth of test USDC in its own account, signed in. */
async function walletWithUsdc(usdcCredits: number): Promise<{ key: Keypair; cookie: string }> {
  const key = generateKeypair();
  await keepEvents(gateway.service.db, key.address);
  if (usdcCredits > 0) await gateway.service.chain.grantUsdc({ to: key.address, amount: creditsToBaseUnits(usdcCredits) });
  return { key, cookie: await signInAs(origin, key) };
}

/** Prepares, signs as the wallet would, and submits; returns the submit's answer. */
async function pay(w: { key: Keypair; cookie: string }, path: "/deposits" | "/withdrawals", credits: number) {
  const prepared = await appCall(origin, w.cookie, "POST", path, { credits });
  assert.equal(prepared.status, 200, JSON.stringify(prepared.body));
  const signed = signWalletSlot(new Uint8Array(Buffer.from(prepared.body.transaction, "base64")), w.key);
  return appCall(origin, w.cookie, "POST", `/payments/${prepared.body.id}`, { transaction: Buffer.from(signed).toString("base64") });
}

describe("credits in and out of the vault", () => {
  test("add 150 credits: the wallet signs, the service pays the fee, the vault and the ledger have them, credit.topup fires", async () => {
    const w = await walletWithUsdc(500);
    const { chain, db } = gateway.service;
    const payer = (await chain.backend.getAccount(w.key.address as never))?.lamports ?? 0n;
    const answer = await pay(w, "/deposits", 150);
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    assert.deepEqual([answer.body.credits, answer.body.credits_remaining], [150, 150]);
    assert.equal(await chain.creditBalance(w.key.address), creditsToBaseUnits(150));
    assert.equal(await chain.walletUsdc(w.key.address), creditsToBaseUnits(350));
    assert.equal((await chain.backend.getAccount(w.key.address as never))?.lamports ?? 0n, payer, "the wallet paid no fee");
    assert.equal(await money.availableCredits(db, w.key.address), 150);
    await assertChainAgrees(gateway.service, w.key.address);
    const tx = await chain.readTransaction(answer.body.signature);
    assert.equal(tx.feePayer, chain.feePayer);
    const deposits = await appCall(origin, w.cookie, "GET", "/deposits");
    assert.deepEqual(deposits.body.data.map((d: { credits_added: number; deposit_tx: string }) => [d.credits_added, d.deposit_tx]), [[150, answer.body.signature]]);
    const events = await db.query<{ body: string }>("SELECT body FROM events WHERE name = 'credit.topup' AND account = $1", [w.key.address]);
    assert.equal(events.length, 1);
  });

  test("99 credits, more than the wallet holds, and a signed copy that is not the prepared one are refused; nothing is sent", async () => {
    const w = await walletWithUsdc(200);
    const small = await appCall(origin, w.cookie, "POST", "/deposits", { credits: 99 });
    assert.deepEqual([small.status, small.body.error.param], [400, "credits"]);
    assert.match(small.body.error.message, /at least 100 credits/);
    const big = await appCall(origin, w.cookie, "POST", "/deposits", { credits: 201 });
    assert.deepEqual([big.status, big.body.error.param], [400, "credits"]);
    assert.match(big.body.error.message, /holds 200 credits' worth/);

    const prepared = await appCall(origin, w.cookie, "POST", "/deposits", { credits: 100 });
    const wire = new Uint8Array(Buffer.from(prepared.body.transaction, "base64"));
    const edited = wire.slice();
    edited[edited.length - 1]! ^= 1; // the memo's last byte
    // The fee payer signs first; the wallet's slot is the second. Another key fills it here.
    const byAnotherKey = wire.slice();
    byAnotherKey.set(generateKeypair().sign(wire.subarray(1 + 64 * wire[0]!)), 1 + 64);
    for (const transaction of [signWalletSlot(edited, w.key), byAnotherKey]) {
      const refused = await appCall(origin, w.cookie, "POST", `/payments/${prepared.body.id}`, { transaction: Buffer.from(transaction).toString("base64") });
      assert.equal(refused.status, 400, JSON.stringify(refused.body));
    }
    const unsigned = await appCall(origin, w.cookie, "POST", `/payments/${prepared.body.id}`, { transaction: prepared.body.transaction });
    assert.match(unsigned.body.error.message, /signature does not verify/);
    const other = await walletWithUsdc(0);
    assert.equal((await appCall(origin, other.cookie, "POST", `/payments/${prepared.body.id}`, { transaction: prepared.body.transaction })).status, 404, "another wallet's session");
    assert.equal(await gateway.service.chain.creditBalance(w.key.address), 0n);
    assert.equal(await money.availableCredits(gateway.service.db, w.key.address), 0);
  });

  test("withdraw 50: the USDC is back in the wallet's own account; more than is free is refused", async () => {
    const w = await walletWithUsdc(150);
    await pay(w, "/deposits", 150);
    const answer = await pay(w, "/withdrawals", 50);
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    assert.equal(answer.body.credits_remaining, 100);
    const { chain } = gateway.service;
    assert.equal(await chain.walletUsdc(w.key.address), creditsToBaseUnits(50));
    assert.equal(await chain.creditBalance(w.key.address), creditsToBaseUnits(100));
    await assertChainAgrees(gateway.service, w.key.address);
    const listed = await appCall(origin, w.cookie, "GET", "/withdrawals");
    assert.deepEqual(listed.body.data.map((x: { credits: number; state: string; withdrawal_tx: string }) => [x.credits, x.state, x.withdrawal_tx]), [[50, "posted", answer.body.signature]]);
    const tooMuch = await appCall(origin, w.cookie, "POST", "/withdrawals", { credits: 101 });
    assert.deepEqual([tooMuch.status, tooMuch.body.error.param], [400, "credits"]);
  });

  test("two equal withdrawals prepared at once are two transactions, both sent; a submit repeated answers 409 conflict", async () => {
    const w = await walletWithUsdc(150);
    await pay(w, "/deposits", 150);
    const pair = await Promise.all([0, 1].map(() => appCall(origin, w.cookie, "POST", "/withdrawals", { credits: 50 })));
    assert.notEqual(pair[0]!.body.transaction, pair[1]!.body.transaction, "each carries a nonce of its own");
    const submit = (prepared: AppCall) => {
      const signed = Buffer.from(signWalletSlot(new Uint8Array(Buffer.from(prepared.body.transaction, "base64")), w.key)).toString("base64");
      return appCall(origin, w.cookie, "POST", `/payments/${prepared.body.id}`, { transaction: signed });
    };
    const sent = [await submit(pair[0]!), await submit(pair[1]!)];
    assert.deepEqual(sent.map((a) => a.status), [200, 200], JSON.stringify(sent.map((a) => a.body)));
    const again = await submit(pair[0]!);
    assert.equal(again.status, 409, JSON.stringify(again.body));
    assert.equal(again.body.error.code, "conflict");
    assert.match(again.body.error.message, /withdrawal was already submitted/);
    assert.equal(again.body.error.details.signature, sent[0]!.body.signature);
    assert.equal(await money.availableCredits(gateway.service.db, w.key.address), 50);
    assert.equal(await gateway.service.chain.walletUsdc(w.key.address), creditsToBaseUnits(100));
    const listed = await appCall(origin, w.cookie, "GET", "/withdrawals");
    assert.deepEqual(listed.body.data.map((x: { credits: number; state: string }) => [x.credits, x.state]), [[50, "posted"], [50, "posted"]]);
    await assertChainAgrees(gateway.service, w.key.address);
    assert.deepEqual(await checkInvariants(gateway.service.db), []);
  });

  test("concurrent submits of one prepared withdrawal or deposit: one is sent, the others answer 409, none 500", async () => {
    const w = await walletWithUsdc(300);
    for (const [path, credits] of [["/deposits", 200], ["/withdrawals", 80]] as const) {
      const prepared = await appCall(origin, w.cookie, "POST", path, { credits });
      const signed = Buffer.from(signWalletSlot(new Uint8Array(Buffer.from(prepared.body.transaction, "base64")), w.key)).toString("base64");
      const answers = await Promise.all([0, 1, 2].map(() => appCall(origin, w.cookie, "POST", `/payments/${prepared.body.id}`, { transaction: signed })));
      assert.deepEqual(answers.map((a) => a.status).sort(), [200, 409, 409], JSON.stringify(answers.map((a) => a.body)));
      const sent = answers.find((a) => a.status === 200)!;
      for (const refused of answers.filter((a) => a.status === 409)) {
        assert.match(refused.body.error.message, new RegExp(`${path.slice(1, -1)} was already submitted as transaction ${sent.body.signature}`));
      }
    }
    assert.equal(await money.availableCredits(gateway.service.db, w.key.address), 120);
    assert.equal(await gateway.service.chain.walletUsdc(w.key.address), creditsToBaseUnits(180));
    await assertChainAgrees(gateway.service, w.key.address);
    assert.deepEqual(await checkInvariants(gateway.service.db), []);
  });

  test("a withdrawal racing paid requests never takes what escrow holds; ledger and chain agree after", async () => {
    const w = await walletWithUsdc(100);
    await pay(w, "/deposits", 100);
    const client = new OpenAI({ apiKey: await issueApiKey(gateway.service.db, w.key.address), baseURL: gateway.baseUrl, maxRetries: 0 });
    const prepared = await appCall(origin, w.cookie, "POST", "/withdrawals", { credits: 100 });
    const signed = Buffer.from(signWalletSlot(new Uint8Array(Buffer.from(prepared.body.transaction, "base64")), w.key)).toString("base64");
    const [withdrawal, ...jobs] = await Promise.all([
      appCall(origin, w.cookie, "POST", `/payments/${prepared.body.id}`, { transaction: signed }),
      ...Array.from({ length: 4 }, () => client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 5 }).then(() => 200, (e: { status?: number }) => e.status)),
    ]);
    const served = jobs.filter((s) => s === 200).length;
    assert.ok(withdrawal!.status === 200 ? served === 0 : withdrawal!.status === 400, `withdrawal ${withdrawal!.status}, jobs ${jobs.join(",")}`);
    const left = await money.availableCredits(gateway.service.db, w.key.address);
    assert.ok(left >= 0);
    await assertChainAgrees(gateway.service, w.key.address);
    assert.deepEqual(await checkInvariants(gateway.service.db), []);
    assert.deepEqual(await checkJobInvariants(gateway.service.db), []);
  });
});

describe("Solana Pay: a phone wallet pays the QR code's transaction request", () => {
  test("it fetches the transaction, signs it and sends it itself; the service credits it and the page's poll sees it", async () => {
    const rpc = await startChainRpc({ chain: gateway.service.chain, port: 0 });
    try {
      const w = await walletWithUsdc(300);
      const request = await appCall(origin, w.cookie, "POST", "/deposits/qr", { credits: 120 });
      assert.equal(request.status, 200, JSON.stringify(request.body));
      assert.equal(request.body.solana_pay_url, `solana:${encodeURIComponent(request.body.url)}`);
      assert.match(request.body.qr_svg, /^<svg[^>]*>.*<\/svg>$/s);
      const label = (await (await fetch(request.body.url)).json()) as { label: string; icon: string };
      assert.equal(label.label, "svc credits");
      assert.equal((await fetch(label.icon)).headers.get("content-type"), "image/svg+xml");
      const post = (account: string) => fetch(request.body.url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ account }) });
      assert.equal((await post(generateKeypair().address)).status, 400, "another account cannot pay this wallet's request");
      const waiting = await appCall(origin, w.cookie, "GET", `/deposits/qr/${request.body.id}`);
      assert.equal(waiting.body.state, "waiting");

      const answer = (await (await post(w.key.address)).json()) as { transaction: string; message: string };
      assert.match(answer.message, /Add 120 credits/);
      const signed = signWalletSlot(new Uint8Array(Buffer.from(answer.transaction, "base64")), w.key);
      await createSolanaRpc(rpc.url).sendTransaction(Buffer.from(signed).toString("base64") as Base64EncodedWireTransaction, { encoding: "base64" }).send();
      let state = waiting.body;
      for (let i = 0; i < 100 && state.state !== "confirmed"; i++) {
        await new Promise((r) => setTimeout(r, 50));
        state = (await appCall(origin, w.cookie, "GET", `/deposits/qr/${request.body.id}`)).body;
      }
      assert.deepEqual([state.state, state.credits_remaining], ["confirmed", 120]);
      assert.equal(await money.availableCredits(gateway.service.db, w.key.address), 120);
      await assertChainAgrees(gateway.service, w.key.address);
      const topups = await gateway.service.db.query("SELECT 1 FROM events WHERE name = 'credit.topup' AND account = $1", [w.key.address]);
      assert.equal(topups.length, 1);
      assert.equal((await post(w.key.address)).status, 404, "a request is paid once");
    } finally {
      await rpc.close();
    }
  });
});

describe("svc dev's dev wallet", () => {
  test("gets test USDC, adds credits and withdraws without a browser wallet: the server signs for it", async () => {
    const dev = generateKeypair();
    gateway.service.enableDevSignIn(dev);
    const cookie = await signInAs(origin, dev);
    const usdc = await appCall(origin, cookie, "POST", "/test-usdc");
    assert.equal(usdc.status, 200, JSON.stringify(usdc.body));
    assert.equal((await appCall(origin, cookie, "GET", "/wallet-funds")).body.usdc_credits, 1000);
    const prepared = await appCall(origin, cookie, "POST", "/deposits", { credits: 300 });
    const added = await appCall(origin, cookie, "POST", `/payments/${prepared.body.id}`, { dev_wallet: true });
    assert.equal(added.status, 200, JSON.stringify(added.body));
    assert.equal(added.body.credits_remaining, 300);
    const other = await walletWithUsdc(200);
    const theirs = await appCall(origin, other.cookie, "POST", "/deposits", { credits: 100 });
    const refused = await appCall(origin, other.cookie, "POST", `/payments/${theirs.body.id}`, { dev_wallet: true });
    assert.deepEqual([refused.status, refused.body.error.param], [400, "dev_wallet"], "only the dev wallet is signed for");
    await assertChainAgrees(gateway.service, dev.address);
  });

  test("test USDC: each grant is its own transaction that minted, even asked for at once; past 3 a wallet is told to wait", async () => {
    gateway.service.enableDevSignIn(generateKeypair());
    const w = await walletWithUsdc(0);
    // At once, so all three are built within one blockhash: the same bytes unless the faucet makes them distinct.
    const grants = await Promise.all([0, 1, 2].map(() => appCall(origin, w.cookie, "POST", "/test-usdc")));
    assert.deepEqual(grants.map((g) => g.status), [200, 200, 200], JSON.stringify(grants.map((g) => g.body)));
    assert.equal(new Set(grants.map((g) => g.body.usdc_tx)).size, 3, "three distinct transactions");
    assert.equal(await gateway.service.chain.walletUsdc(w.key.address), creditsToBaseUnits(3000), "each grant minted its 1,000 credits' worth");
    assert.equal((await appCall(origin, w.cookie, "GET", "/wallet-funds")).body.usdc_credits, 3000);
    const limited = await appCall(origin, w.cookie, "POST", "/test-usdc");
    assert.equal(limited.status, 429, JSON.stringify(limited.body));
    assert.equal(limited.body.error.code, "rate_limited");
    assert.ok(limited.body.error.details.retry_after >= 1);
    assert.equal(limited.headers.get("retry-after"), String(limited.body.error.details.retry_after));
    assert.equal(await gateway.service.chain.walletUsdc(w.key.address), creditsToBaseUnits(3000), "nothing more was minted");
    const other = await walletWithUsdc(0);
    assert.equal((await appCall(origin, other.cookie, "POST", "/test-usdc")).status, 200, "the limit is per wallet");
  });
});
