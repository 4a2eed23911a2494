/**
 * The bounds on signing in, on a real gateway: sign-in nonces per client address and in total
 * (each one is a database row until it is used or expires), expired nonces swept, and a signed
 * message that claims to be valid longer than its nonce, or was issued far from now, refused.
 */
import assert from "node:assert/strict";
import { request } from "node:http";
import { after, before, describe, test } from "node:test";
import { generateKeypair } from "../../src/core/keys.ts";
import type { SessionStore } from "../../src/web/context.ts";
import { SignInNonces } from "../../src/web/nonces.ts";
import { NONCE_TTL_MS } from "../../src/web/sessions.ts";
import { formatSignInMessage } from "../../src/web/index.ts";
import { migratedTestDb, startTestGateway, type TestGateway } from "../support/service.ts";
import { postSignIn, signInInput } from "./sign-in.ts";
import { minusMs } from "../../src/store/index.ts";

/** POST /app/api/session/nonce from `localAddress` (any 127.x.y.z reaches a loopback server). */
function nonceFrom(origin: string, localAddress: string, path = "/session/nonce"): Promise<{ status: number; body: Record<string, any>; retryAfter: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = request(`${origin}/app/api${path}`, { method: "POST", localAddress, headers: { origin } }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (text += chunk));
      res.on("end", () => resolve({ status: res.statusCode!, body: JSON.parse(text) as Record<string, any>, retryAfter: res.headers["retry-after"] as string | undefined }));
    });
    req.on("error", reject);
    req.end();
  });
}

async function nonceRows(gateway: TestGateway): Promise<number> {
  const [row] = await gateway.service.db.query<{ n: bigint }>("SELECT count(*) AS n FROM web_sign_in_nonces");
  return Number(row!.n);
}

describe("with the default limits", () => {
  let gateway: TestGateway;
  let origin: string;
  before(async () => {
    gateway = await startTestGateway({ db: await migratedTestDb(), credits: 0 });
    origin = gateway.service.origin;
  });
  after(() => gateway.close());

  test("one address gets 10 nonces at once, then 429 rate_limited with retry_after; another address is not held back", async () => {
    const answers = [];
    for (let i = 0; i < 11; i++) answers.push(await nonceFrom(origin, "127.0.0.2"));
    assert.deepEqual(answers.map((a) => a.status), [...Array(10).fill(200), 429], JSON.stringify(answers.at(-1)!.body));
    const refused = answers.at(-1)!;
    assert.equal(refused.body.error.code, "rate_limited");
    assert.match(refused.body.error.message, /10 at once, then 5 a minute/);
    // 5 a minute: the next token is 12 s away.
    assert.ok(refused.body.error.details.retry_after >= 1 && refused.body.error.details.retry_after <= 12, JSON.stringify(refused.body));
    assert.equal(refused.retryAfter, String(refused.body.error.details.retry_after));
    assert.equal(await nonceRows(gateway), 10, "the refused ask wrote no row");
    assert.equal((await nonceFrom(origin, "127.0.0.3")).status, 200);
  });

  test("svc dev's dev sign-in takes its nonce within the same limit: each one also opens a session", async () => {
    gateway.service.enableDevSignIn(generateKeypair());
    const answers = [];
    for (let i = 0; i < 11; i++) answers.push(await nonceFrom(origin, "127.0.0.5", "/session/dev"));
    assert.deepEqual(answers.map((a) => a.status), [...Array(10).fill(200), 429]);
    assert.equal(answers.at(-1)!.body.error.code, "rate_limited");
    const [row] = await gateway.service.db.query<{ n: bigint }>("SELECT count(*) AS n FROM web_sessions");
    assert.equal(row!.n, 10n);
  });

  test("a message valid until 2099, or issued far in the future or past, is refused; the app's own message signs in", async () => {
    const kp = generateKeypair();
    const input = await signInInput(origin);
    const at = (ms: number) => new Date(Date.now() + ms).toISOString();
    const cases: [Record<string, string>, RegExp][] = [
      [{ expirationTime: "2099-01-01T00:00:00.000Z" }, /valid for longer than a sign-in's 10 minutes/],
      [{ issuedAt: at(3_600_000), expirationTime: at(3_900_000) }, /issued in the future/],
      [{ issuedAt: "2020-01-01T00:00:00.000Z", expirationTime: "2099-01-01T00:00:00.000Z" }, /issued more than 10 minutes ago/],
    ];
    for (const [change, reason] of cases) {
      const refused = await postSignIn(origin, kp, formatSignInMessage({ ...input, ...change, address: kp.address }));
      assert.equal(refused.status, 401, JSON.stringify(change));
      assert.equal(refused.body.error.code, "invalid_api_key");
      assert.match(refused.body.error.message, reason);
      assert.equal(refused.cookie, undefined);
    }
    const signedIn = await postSignIn(origin, kp, formatSignInMessage({ ...input, address: kp.address }));
    assert.equal(signedIn.status, 200, "the refusals left the nonce for the app's own message");
    assert.ok(signedIn.cookie);
  });

  test("a message that expires later than its nonce is refused, even within the 10 minutes", async () => {
    const kp = generateKeypair();
    const input = await signInInput(origin);
    const later = (iso: string) => new Date(Date.parse(iso) + 30_000).toISOString();
    const shifted = await postSignIn(origin, kp, formatSignInMessage({ ...input, issuedAt: later(input.issuedAt), expirationTime: later(input.expirationTime), address: kp.address }));
    assert.equal(shifted.status, 401, JSON.stringify(shifted.body));
    assert.match(shifted.body.error.message, /later than its nonce's/);
    assert.equal(shifted.cookie, undefined);
  });
});

describe("with at most 3 nonces outstanding", () => {
  let gateway: TestGateway;
  let origin: string;
  before(async () => {
    gateway = await startTestGateway({ db: await migratedTestDb(), credits: 0, web: { nonceRateLimit: false, maxOutstandingNonces: 3 } });
    origin = gateway.service.origin;
  });
  after(() => gateway.close());

  test("past the cap every address is refused until a nonce is used; expired rows are swept", async () => {
    const { db } = gateway.service;
    await db.query(`INSERT INTO web_sign_in_nonces (nonce, expires_at) VALUES ('stale', ${minusMs(db, "now()", "60000")})`);
    const inputs = [];
    for (let i = 0; i < 3; i++) inputs.push(await signInInput(origin));
    const rows = await db.query<{ nonce: string }>("SELECT nonce FROM web_sign_in_nonces ORDER BY nonce");
    assert.deepEqual(rows.map((r) => r.nonce), inputs.map((i) => i.nonce).sort(), "the expired row was swept");

    for (const address of ["127.0.0.1", "127.0.0.4"]) {
      const full = await nonceFrom(origin, address);
      assert.equal(full.status, 429, JSON.stringify(full.body));
      assert.equal(full.body.error.code, "rate_limited");
      assert.match(full.body.error.message, /3 nonces are handed out and not used yet/);
      // The oldest outstanding nonce expires in about 10 minutes.
      assert.ok(full.body.error.details.retry_after > 500 && full.body.error.details.retry_after <= 600, JSON.stringify(full.body));
    }
    const kp = generateKeypair();
    const signedIn = await postSignIn(origin, kp, formatSignInMessage({ ...inputs[0]!, address: kp.address }));
    assert.equal(signedIn.status, 200, JSON.stringify(signedIn.body));
    assert.equal((await nonceFrom(origin, "127.0.0.4")).status, 200, "a used nonce frees its place");
    assert.equal((await nonceFrom(origin, "127.0.0.4")).status, 429);
    assert.equal(await nonceRows(gateway), 3);
  });
});

test("an outstanding nonce stops counting once it expires", async () => {
  let issued = 0;
  const store = {
    issueNonce: async (now: Date) => ({ nonce: `n${issued++}`, expiresAt: new Date(now.getTime() + NONCE_TTL_MS) }),
    sweepNonces: async () => undefined,
  } as unknown as SessionStore;
  const nonces = new SignInNonces(store, { nonceRateLimit: false, maxOutstandingNonces: 2 });
  const t0 = Date.now();
  await nonces.issue("a", new Date(t0));
  await nonces.issue("b", new Date(t0 + 1000));
  await assert.rejects(nonces.issue("c", new Date(t0 + 2000)), (e: { code: string; details: { retry_after: number } }) => e.code === "rate_limited" && e.details.retry_after === 598);
  await nonces.issue("c", new Date(t0 + NONCE_TTL_MS + 1));
  await assert.rejects(nonces.issue("d", new Date(t0 + NONCE_TTL_MS + 2)), { code: "rate_limited" });
});
