/**
 * `svc dev` killed (kill -9) right after two JSON jobs' admissions, the second one's table lock
 * waiting to be signed with the wallet's next jobs (the first, alone, locked at its admission),
 * then restarted: the jobs end failed with nothing charged and their reserved credits back, on
 * the ledger and on the chain alike. Whether
 * the kill came before the lock was recorded (nothing on the chain: the reservation is released)
 * or after (the lock is found and refunded), nothing is lost.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, test } from "node:test";
import OpenAI from "openai";
import { openChain } from "../../src/chain/chain.ts";
import { creditsToBaseUnits } from "../../src/core/units.ts";
import { loadOrCreateKeypair } from "../../src/core/keys.ts";
import { TRIGGER_WORD } from "../../src/inference/wiring-model.ts";
import { checkJobInvariants } from "../../src/jobs/job-invariants.ts";
import * as money from "../../src/jobs/money.ts";
import { checkInvariants } from "../../src/ledger/index.ts";
import { openDb } from "../../src/store/index.ts";
import { exited, killDevs, startDev } from "../support/dev-process.ts";
import { MODEL, tempDir } from "../support/service.ts";

const dir = await tempDir("svc-tables-restart-");
after(async () => {
  killDevs();
  await dir.remove();
});

test("kill -9 while a JSON job's table lock waits, then restart: nothing charged, every credit back", { timeout: 120_000 }, async () => {
  const first = await startDev(dir.path, ["--credits", "100", "--escrow", "tables"]);
  const auth = { authorization: `Bearer ${first.apiKey}` };
  const client = new OpenAI({ apiKey: first.apiKey!, baseURL: first.baseUrl, maxRetries: 0 });
  // Looping replies, long enough to be running when the process dies; their callers are cut off with it.
  const ask = () => client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: `Say ${TRIGGER_WORD}` }], temperature: 0, max_tokens: 1900 }).catch(() => undefined);
  const listed = async () => ((await (await fetch(`${first.baseUrl}/jobs?limit=2`, { headers: auth })).json()) as { data: { id: string }[] }).data.map((job) => job.id);
  const replies = [ask()];
  while ((await listed()).length < 1);
  replies.push(ask());
  let jobIds: string[] = [];
  while (jobIds.length < 2) jobIds = await listed();
  first.child.kill("SIGKILL");
  await exited(first.child);
  await Promise.all(replies);

  const second = await startDev(dir.path, ["--escrow", "tables"]);
  for (const jobId of jobIds) {
    const job = (await (await fetch(`${second.baseUrl}/jobs/${jobId}`, { headers: auth })).json()) as { status: string; credits_charged: number };
    assert.deepEqual([job.status, job.credits_charged], ["failed", 0]);
  }
  const account = (await (await fetch(`${second.baseUrl}/account`, { headers: auth })).json()) as { credits_remaining: number };
  assert.equal(account.credits_remaining, 100);
  second.child.kill("SIGINT");
  assert.equal(await exited(second.child), 0);

  const db = await openDb({ dataDir: dir.path });
  const chain = await openChain({ dataDir: dir.path });
  try {
    const wallet = (await loadOrCreateKeypair(join(dir.path, "keys"), "dev-wallet")).address;
    assert.equal(await money.availableCredits(db, wallet), 100);
    assert.equal(await chain.tokenBalance(chain.creditAccountAddress(wallet)), creditsToBaseUnits(100));
    assert.deepEqual(await checkInvariants(db), []);
    assert.deepEqual(await checkJobInvariants(db), []);
    assert.equal((await db.query("SELECT id FROM jobs WHERE status IN ('pending', 'processing', 'settling')")).length, 0);
  } finally {
    await chain.close();
    await db.close();
  }
});
