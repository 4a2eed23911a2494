/** Sign In With Solana's message and the rule deciding whether a signed one may open a session. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { generateKeypair } from "../../src/core/keys.ts";
import { formatSignInMessage, parseSignInMessage, SIGN_IN_STATEMENT, signInRefusal, type SignInFields } from "../../src/web/siws.ts";

const kp = generateKeypair();
const now = new Date("2026-11-22T12:00:00.000Z");
const expected = { origin: "https://app.example", chainId: "localnet", now };
const fields: SignInFields = {
  domain: "app.example",
  address: kp.address,
  statement: SIGN_IN_STATEMENT,
  uri: "https://app.example/",
  version: "1",
  chainId: "localnet",
  nonce: "0123456789abcdef",
  issuedAt: "2026-11-22T11:59:00.000Z",
  expirationTime: "2026-11-22T12:09:00.000Z",
};
const signed = (f: SignInFields, signer = kp) => {
  const message = new TextEncoder().encode(formatSignInMessage(f));
  return { address: kp.address, message, signature: signer.sign(message) };
};

test("the message has the standard layout and parses back to its fields", () => {
  const text = formatSignInMessage(fields);
  assert.equal(
    text,
    [
      "app.example wants you to sign in with your Solana account:",
      kp.address,
      "",
      SIGN_IN_STATEMENT,
      "",
      "URI: https://app.example/",
      "Version: 1",
      "Chain ID: localnet",
      "Nonce: 0123456789abcdef",
      "Issued At: 2026-11-22T11:59:00.000Z",
      "Expiration Time: 2026-11-22T12:09:00.000Z",
    ].join("\n"),
  );
  assert.deepEqual(parseSignInMessage(text), fields);
  assert.equal(parseSignInMessage(text.replace("Version: 1", "Versione: 1")), undefined);
  assert.equal(parseSignInMessage(`${text}\nResources:`), undefined);
});

test("a message signed by its account, for this app, in time, is accepted", () => {
  assert.equal(signInRefusal(signed(fields), expected), undefined);
  // A wallet whose clock runs a little ahead, signing the app's ten minutes from its own issue time.
  assert.equal(signInRefusal(signed({ ...fields, issuedAt: "2026-11-22T12:00:30.000Z", expirationTime: "2026-11-22T12:10:30.000Z" }), expected), undefined);
});

test("every field is checked", () => {
  const cases: [Partial<SignInFields>, RegExp][] = [
    [{ domain: "evil.example" }, /evil\.example/],
    [{ address: generateKeypair().address }, /another account/],
    [{ statement: "Send all your USDC" }, /statement/],
    [{ uri: "https://evil.example/" }, /URI/],
    [{ version: "2" }, /version/],
    [{ chainId: "mainnet" }, /chain/],
    [{ issuedAt: "2026-11-22T12:30:00.000Z" }, /future/],
    [{ expirationTime: "2026-11-22T11:59:59.000Z" }, /expired/],
    [{ expirationTime: "tomorrow" }, /ISO 8601/],
    [{ expirationTime: "2099-01-01T00:00:00.000Z" }, /longer than a sign-in's 10 minutes/],
    [{ issuedAt: "2026-11-22T11:00:00.000Z", expirationTime: "2026-11-22T12:05:00.000Z" }, /more than 10 minutes ago/],
    [{ issuedAt: "2026-11-22T12:00:30.000Z", expirationTime: "2026-11-22T12:00:10.000Z" }, /expires before it was issued/],
  ];
  for (const [change, reason] of cases) {
    assert.match(signInRefusal(signed({ ...fields, ...change }), expected) ?? "accepted", reason, JSON.stringify(change));
  }
});

test("a signature by another key, or over other bytes, is refused", () => {
  assert.match(signInRefusal(signed(fields, generateKeypair()), expected)!, /signature/);
  const good = signed(fields);
  const tampered = new Uint8Array(good.message);
  tampered[tampered.length - 1] = "1".charCodeAt(0);
  assert.match(signInRefusal({ ...good, message: tampered }, expected) ?? "", /signature|expired|ISO/);
  assert.match(signInRefusal({ ...good, message: new TextEncoder().encode("hello") }, expected)!, /not a Sign In With Solana message/);
});
