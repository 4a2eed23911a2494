/** Signing secrets at rest: sealed under a key outside the database, bound to their webhook. */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { stat } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";
import { loadSecretKey, parseKey, secretBox, SECRET_KEY_ENV } from "../../src/events/secret-box.ts";
import { tempDir } from "../support/service.ts";

const secret = "a-signing-secret-of-some-length";

test("sealed secrets open with the same key and webhook id only", () => {
  const key = randomBytes(32);
  const box = secretBox(key);
  const sealed = box.seal(secret, "wh_A");
  assert.ok(!sealed.includes(secret));
  assert.notEqual(box.seal(secret, "wh_A"), sealed, "a fresh IV every time");
  assert.equal(box.open(sealed, "wh_A"), secret);
  assert.throws(() => box.open(sealed, "wh_B"), "moved to another webhook's row");
  assert.throws(() => secretBox(randomBytes(32)).open(sealed, "wh_A"), "another key");
  const [format, iv, tag, body] = sealed.split(":");
  const flipped = Buffer.from(body!, "base64");
  flipped[0]! ^= 1;
  assert.throws(() => box.open([format, iv, tag, flipped.toString("base64")].join(":"), "wh_A"), "tampered");
});

test("the key: option, then environment, then a 0600 key file in the data dir, else per process", async () => {
  const explicit = randomBytes(32);
  assert.equal(await loadSecretKey({ secretKey: explicit, env: {} }), explicit);
  const hex = randomBytes(32).toString("hex");
  assert.deepEqual(Buffer.from(await loadSecretKey({ env: { [SECRET_KEY_ENV]: hex } })), Buffer.from(hex, "hex"));
  assert.throws(() => parseKey("too-short"));

  const dir = await tempDir();
  try {
    const first = await loadSecretKey({ dataDir: dir.path, env: {} });
    const again = await loadSecretKey({ dataDir: dir.path, env: {} });
    assert.deepEqual(again, first, "the file is reused");
    const mode = (await stat(join(dir.path, "keys", "webhook-secrets.key"))).mode & 0o777;
    assert.equal(mode, 0o600);
  } finally {
    await dir.remove();
  }
  const a = await loadSecretKey({ env: {} });
  assert.equal(await loadSecretKey({ env: {} }), a, "without a data dir: one random key for the process");
  assert.notDeepEqual(a, explicit);
});

test("two services creating the key file at once end up with the same key", async () => {
  const dir = await tempDir();
  try {
    const keys = await Promise.all([1, 2, 3, 4].map(() => loadSecretKey({ dataDir: dir.path, env: {} })));
    for (const k of keys) assert.deepEqual(k, keys[0]);
  } finally {
    await dir.remove();
  }
});
