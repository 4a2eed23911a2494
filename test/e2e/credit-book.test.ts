/**
 * On the embedded store, the node is its ledger's only writer and holds its wallets' credits in
 * a book: a stream whose lock the book covers has its first token relayed before its admission's
 * statements run, here while the database is held by another transaction. A node that does not
 * hold the credits alone (soleLedgerWriter: false, as on a PostgreSQL shared by several nodes)
 * waits for the commit. Either way the job is recorded, charged once and settled, and the ledger
 * balances.
 */
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import OpenAI from "openai";
import { issueApiKey } from "../../src/accounts/accounts.ts";
import { signWalletSlot } from "../../src/chain/index.ts";
import { generateKeypair } from "../../src/core/index.ts";
import { checkInvariants, listTransfers } from "../../src/ledger/index.ts";
import { checkJobInvariants } from "../../src/jobs/job-invariants.ts";
import * as money from "../../src/jobs/money.ts";
import { getJob } from "../../src/jobs/job-repo.ts";
import { until } from "../support/eventually.ts";
import { MODEL, migratedTestDb, startTestGateway, type TestGateway } from "../support/service.ts";

const hi = [{ role: "user" as const, content: "Hi" }];

/** Holds the database's one connection (PGlite runs one transaction at a time) until `release`. */
function holdDatabase(gateway: TestGateway): { release(): Promise<void> } {
  let release!: () => void;
  const held = gateway.service.db.transaction(() => new Promise<void>((resolve) => (release = resolve)));
  return {
    release: async () => {
      release();
      await held;
    },
  };
}

/** A stream's first chunk, or "waiting" when none came within `ms`. */
async function firstChunk(gateway: TestGateway, ms: number): Promise<{ id: string; content: string } | "waiting"> {
  const asked = (async () => {
    const stream = await gateway.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 8, temperature: 0, stream: true });
    for await (const chunk of stream) return { id: chunk.id, content: chunk.choices[0]?.delta.content ?? "" };
    throw new Error("the stream ended without a chunk");
  })();
  const timer = new Promise<"waiting">((resolve) => setTimeout(() => resolve("waiting"), ms));
  return Promise.race([asked, timer]);
}

for (const sole of [true, false]) {
  describe(`a stream's first token ${sole ? "with" : "without"} the credit book`, () => {
    let gateway: TestGateway | undefined;
    after(() => gateway?.close());

    test(sole ? "relayed while the database is held; recorded and settled once it is free" : "waits for the admission's commit", async () => {
      gateway = await startTestGateway({ db: await migratedTestDb(), credits: 100, soleLedgerWriter: sole });
      // Known to the node: the wallet's credits (the book learns them from this job alone), its key and its table.
      await gateway.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 8, temperature: 0 });
      const database = holdDatabase(gateway);
      const chunk = await firstChunk(gateway, sole ? 30_000 : 1_500);
      await database.release();
      if (!sole) return assert.equal(chunk, "waiting", "the first token waited for the commit");
      assert.notEqual(chunk, "waiting");
      const jobId = (chunk as { id: string }).id.replace(/^chatcmpl-/, "");
      await until(() => getJob(gateway!.service.db, jobId), (job) => job?.status === "settled", "the job recorded and settled");
      assert.equal(await money.availableCredits(gateway.service.db, gateway.wallet), 100 - (await charged(gateway)));
      assert.deepEqual(await checkInvariants(gateway.service.db), []);
      assert.deepEqual(await checkJobInvariants(gateway.service.db), []);
    });
  });
}

describe("granted streams beside refused requests", () => {
  let gateway: TestGateway | undefined;
  after(() => gateway?.close());

  test("another wallet's 402 in the same moment does not break a stream the book granted", async () => {
    gateway = await startTestGateway({ db: await migratedTestDb(), credits: 1_000 });
    // A wallet the book knows (2 of its 3 credits are left after one job), whose next locks it cannot grant.
    const short = await gateway.newAccount(3);
    await short.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 8, temperature: 0 });
    await gateway.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 8, temperature: 0 });
    const streamed = async () => {
      const stream = await gateway!.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 8, temperature: 0, stream: true });
      let text = "";
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
      return text;
    };
    // 1,900 tokens lock 4 credits: refused, at once with the streams, several times over.
    const refused = () => short.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 1_900, temperature: 0 }).then(() => "served", (error: { status?: number }) => error.status);
    const results = await Promise.all(Array.from({ length: 8 }, () => [streamed(), refused()]).flat());
    results.forEach((result, i) => (i % 2 === 0 ? assert.ok(typeof result === "string" && result.length > 0, `stream ${i / 2} got its text`) : assert.equal(result, 402)));
    assert.deepEqual(await checkInvariants(gateway.service.db), []);
  });
});

async function charged(gateway: TestGateway): Promise<number> {
  const [row] = await gateway.service.db.query<{ charged: number | bigint }>("SELECT coalesce(sum(credits_charged), 0) AS charged FROM jobs WHERE wallet = $1", [gateway.wallet]);
  return Number(row!.charged);
}

/**
 * A JSON reply whose lock the book granted, and whose output is in before its admission's
 * statements begin, is charged in its admission's transaction, before its lock lands. Here the
 * admission waits up to 2 s for the output, so a slow machine takes that path too.
 */
describe("a JSON reply charged with its admission", () => {
  let gateway: TestGateway | undefined;
  after(() => gateway?.close());

  /** A funded wallet whose keypair the test holds, known to the book once it has run a job. */
  async function knownWallet(credits: number) {
    const keypair = generateKeypair();
    await gateway!.service.deposits.deposit(keypair.address, credits);
    const client = new OpenAI({ apiKey: await issueApiKey(gateway!.service.db, keypair.address), baseURL: gateway!.baseUrl, maxRetries: 0 });
    await client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 8, temperature: 0 });
    return { keypair, client };
  }

  async function jobOf(reply: { id: string }) {
    const jobId = reply.id.replace(/^chatcmpl-/, "");
    return (await getJob(gateway!.service.db, jobId))!;
  }

  test("settles and charges once, and the book keeps the ledger's figure", async () => {
    gateway = await startTestGateway({ db: await migratedTestDb(), credits: 0, admissionDeferMs: 2_000 });
    const { keypair, client } = await knownWallet(20);
    for (let i = 0; i < 3; i++) {
      const reply = await client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 8, temperature: 0 });
      assert.ok(reply.choices[0]!.message.content);
      const job = await jobOf(reply);
      await until(() => getJob(gateway!.service.db, job.id), (j) => j?.status === "settled", "the job settled");
    }
    const [row] = await gateway.service.db.query<{ charged: number | bigint }>("SELECT coalesce(sum(credits_charged), 0) AS charged FROM jobs WHERE wallet = $1", [keypair.address]);
    assert.equal(await money.availableCredits(gateway.service.db, keypair.address), 20 - Number(row!.charged));
    assert.deepEqual(await checkInvariants(gateway.service.db), []);
    assert.deepEqual(await checkJobInvariants(gateway.service.db), []);
  });

  test("its lock refused after the answer: the charge goes back and the job fails", async () => {
    gateway ??= await startTestGateway({ db: await migratedTestDb(), credits: 0, admissionDeferMs: 2_000 });
    const { keypair, client } = await knownWallet(20);
    const db = gateway.service.db;
    const before = await money.availableCredits(db, keypair.address);
    // Out of the service's sight: the wallet withdraws its whole vault with its own signature.
    const withdrawal = await gateway.service.chain.prepareWithdrawal({ wallet: keypair.address, credits: before });
    await gateway.service.chain.send(signWalletSlot(withdrawal.wire, keypair));
    const reply = await client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 8, temperature: 0 });
    const job = await until(() => jobOf(reply), (j) => j.status === "failed", "the job failed");
    assert.equal(job.failureReason, "escrow_failed");
    // Charged before the lock landed, and given back when the chain refused it.
    const returned = await listTransfers(db, { reference: job.id });
    assert.ok(returned.some((t) => t.code === "charge_returned"), JSON.stringify(returned.map((t) => t.code)));
    assert.equal(await money.availableCredits(db, keypair.address), before);
    assert.deepEqual(await checkInvariants(db), []);
    assert.deepEqual(await checkJobInvariants(db), []);
  });
});
