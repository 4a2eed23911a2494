/**
 * `svc dev` as a real process: first start prints the key, a `kill -9` in the middle of a stream
 * and a restart leave no job unfinished and every credit accounted for, on the ledger and on the
 * chain; Ctrl-C stops it cleanly; `--new-key` replaces the key.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, test } from "node:test";
import OpenAI from "openai";
import { openChain } from "../../src/chain/chain.ts";
import { creditsToBaseUnits } from "../../src/core/units.ts";
import { loadOrCreateKeypair } from "../../src/core/keys.ts";
import { checkJobInvariants } from "../../src/jobs/job-invariants.ts";
import * as money from "../../src/jobs/money.ts";
import { TRIGGER_WORD } from "../../src/inference/wiring-model.ts";
import { checkInvariants } from "../../src/ledger/index.ts";
import { openDb } from "../../src/store/index.ts";
import { exited, killDevs, startDev } from "../support/dev-process.ts";
import { MODEL, tempDir } from "../support/service.ts";

const dir = await tempDir("svc-restart-");
after(async () => {
  // A failed assertion must not leave a server running (it would keep this test process alive).
  killDevs();
  await dir.remove();
});

test("kill -9 during a stream, then restart: nothing unfinished, every credit accounted for", { timeout: 120_000 }, async () => {
  const first = await startDev(dir.path, ["--credits", "100"]);
  assert.ok(first.apiKey, "the first start prints the API key");
  assert.match(first.output(), /curl /);
  const client = new OpenAI({ apiKey: first.apiKey!, baseURL: first.baseUrl, maxRetries: 0 });

  // A looping reply long enough to be cut off mid-stream.
  const { data: stream, response } = await client.chat.completions
    .create({ model: MODEL, messages: [{ role: "user", content: `Say ${TRIGGER_WORD}` }], temperature: 0, max_tokens: 1900, stream: true })
    .withResponse();
  const jobId = response.headers.get("x-svc-job-id")!;
  let chunks = 0;
  try {
    for await (const _ of stream) {
      if (++chunks === 5) first.child.kill("SIGKILL");
    }
  } catch {
    // The connection dies with the process.
  }
  await exited(first.child);
  assert.ok(chunks >= 5);

  const second = await startDev(dir.path);
  assert.equal(second.apiKey, undefined, "a restart does not print (or change) the key");
  const auth = { authorization: `Bearer ${first.apiKey}` };
  const job = (await (await fetch(`${second.baseUrl}/jobs/${jobId}`, { headers: auth })).json()) as { status: string; credits_charged: number };
  assert.equal(job.status, "failed");
  assert.equal(job.credits_charged, 0);
  const account = (await (await fetch(`${second.baseUrl}/account`, { headers: auth })).json()) as { credits_remaining: number; wallet: string };
  assert.equal(account.credits_remaining, 100);

  // The service still works after the restart.
  const reply = await new OpenAI({ apiKey: first.apiKey!, baseURL: second.baseUrl, maxRetries: 0 }).chat.completions.create({
    model: MODEL,
    messages: [{ role: "user", content: "Hi" }],
    temperature: 0,
    max_tokens: 4,
  });
  assert.equal(reply.choices[0]!.finish_reason, "length");

  second.child.kill("SIGINT");
  assert.equal(await exited(second.child), 0, "Ctrl-C shuts down cleanly");

  // --new-key: a new key is printed and the old one stops working at once.
  const third = await startDev(dir.path, ["--new-key"]);
  assert.ok(third.apiKey && third.apiKey !== first.apiKey);
  assert.equal((await fetch(`${third.baseUrl}/account`, { headers: auth })).status, 401);
  assert.equal((await fetch(`${third.baseUrl}/account`, { headers: { authorization: `Bearer ${third.apiKey}` } })).status, 200);
  third.child.kill("SIGINT");
  assert.equal(await exited(third.child), 0);

  // Read the data dir directly: ledger and chain agree.
  const db = await openDb({ dataDir: dir.path });
  const chain = await openChain({ dataDir: dir.path });
  try {
    const wallet = (await loadOrCreateKeypair(join(dir.path, "keys"), "dev-wallet")).address;
    assert.equal(wallet, account.wallet);
    const credits = await money.availableCredits(db, wallet);
    assert.equal(credits, 98, "100 less the one settled 2-credit job");
    assert.equal(await chain.tokenBalance(chain.creditAccountAddress(wallet)), creditsToBaseUnits(credits));
    assert.deepEqual(await checkInvariants(db), []);
    assert.deepEqual(await checkJobInvariants(db), []);
    const open = await db.query("SELECT id FROM jobs WHERE status IN ('pending', 'processing', 'settling')");
    assert.deepEqual(open, []);
  } finally {
    await chain.close();
    await db.close();
  }
});
