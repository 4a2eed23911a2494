/** The delivery signature against a vector computed independently (Python's hmac module). */
import assert from "node:assert/strict";
import { test } from "node:test";
import { signatureHeader } from "../../src/events/signature.ts";
import { verifySignature } from "../support/webhook-receiver.ts";

const body = '{"id":"evt_1","event":"job.completed"}';
const secret = "whsec_test_0123456789";

test("v1 is lowercase hex HMAC-SHA256 of `<t>.<raw body>`", () => {
  assert.equal(signatureHeader(secret, body, 1700000000), "t=1700000000,v1=43ec00181a3d27ee769c011f72e2af7efe73d6cf054ad6a40f5296649f3ece7a");
});

test("a receiver written from the docs accepts it, and refuses a changed body, secret or stale time", () => {
  const now = Math.floor(Date.now() / 1000);
  const header = signatureHeader(secret, body, now);
  assert.equal(verifySignature(Buffer.from(body), header, secret), true);
  assert.equal(verifySignature(Buffer.from(body.replace("1", "2")), header, secret), false);
  assert.equal(verifySignature(Buffer.from(body), header, `${secret}x`), false);
  assert.equal(verifySignature(Buffer.from(body), signatureHeader(secret, body, now - 301), secret), false);
});
