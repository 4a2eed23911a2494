/**
 * Three `svc serve` processes sharing a PostgreSQL database, a chain (`svc chain serve`) and
 * NATS, each with a `svc worker` of its own running a slow upstream model. Requests to every
 * gateway are served, spread over the three workers. Then kill -9 of one gateway in the middle of
 * its streams: a survivor takes over its lease and ends those jobs refunded, charging nothing for
 * them, well within the 120-second rule; the survivors go on serving.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import * as money from "../../src/jobs/money.ts";
import { openDb } from "../../src/store/index.ts";
import { startGatewayProcesses, type GatewayProcesses } from "../support/gateway-processes.ts";
import { startUpstream, type UpstreamServer } from "../support/upstream-server.ts";

const url = process.env.DATABASE_URL;
const natsUrl = process.env.NATS_URL ?? "nats://127.0.0.1:4222";
const MODEL = "Qwen/Qwen3-1.7B";
const hi = [{ role: "user" as const, content: "Hi" }];

describe("kill -9 of a gateway node mid-stream", { skip: url ? false : "DATABASE_URL is not set: the nodes share PostgreSQL" }, () => {
  let nodes: GatewayProcesses;
  let upstream: UpstreamServer;

  before(async () => {
    nodes = await startGatewayProcesses({ databaseUrl: url!, natsUrl });
    // Long, slow streams: 200 ms per token, repeated up to max_tokens.
    upstream = await startUpstream("vllm", { model: MODEL, loop: true, pieceDelayMs: 200, reply: [" tick"] });
    for (const name of ["a", "b", "c"]) await nodes.startGateway(name);
    for (const origin of nodes.origins) await nodes.startWorker(origin, [`${MODEL}=${upstream.baseUrl}`]);
  });
  after(async () => {
    await nodes.close();
    await upstream.close();
  });

  test("the survivor refunds the dead node's jobs; nothing is charged for them", async (t) => {
    // A wallet funded and keyed through a short-lived node on the same database and chain.
    const { wallet, apiKey } = await nodes.fundedKey(500);
    const [a, b, c] = nodes.origins.map((origin) => new OpenAI({ apiKey, baseURL: `${origin}/v1`, maxRetries: 0 }));
    // Each node hears the others' workers within a few announcements.
    const servedBy = new Set<string>();
    for (let i = 0; i < 30 && servedBy.size < 3; i++) {
      const { response } = await [a, b, c][i % 3]!.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 2 }).withResponse();
      servedBy.add(response.headers.get("x-svc-worker")!);
    }
    assert.equal(servedBy.size, 3, "requests to the gateways were spread over the three workers");

    const streams = await Promise.all([1, 2, 3].map(() => a!.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 200, stream: true }).withResponse()));
    const streamedJobs = streams.map((s) => s.response.headers.get("x-svc-job-id")!);
    const firstChunks = await Promise.all(streams.map(async (s) => (await s.data[Symbol.asyncIterator]().next()).value));
    assert.ok(firstChunks.every(Boolean), "every stream started");
    const killedAt = Date.now();
    nodes.gateways[0]!.child.kill("SIGKILL");
    await nodes.gateways[0]!.exited();

    const db = await openDb({ databaseUrl: nodes.dbUrl });
    try {
      let jobs: { status: string; credits_charged: number; refund_tx: string | null; completed_at: Date | null }[] = [];
      for (;;) {
        jobs = await db.query("SELECT status, credits_charged, refund_tx, completed_at FROM jobs WHERE id = ANY($1::text[])", [streamedJobs]);
        // Ended: failed or refunded, and completed, which a job is once its refund has confirmed and
        // released its reservation (a job reads `failed` from the moment its refund is recorded).
        if (jobs.length === 3 && jobs.every((j) => (j.status === "failed" || j.status === "refunded") && j.completed_at !== null)) break;
        assert.ok(Date.now() - killedAt < 110_000, `ended within the 120 s rule: ${JSON.stringify(jobs)}`);
        await new Promise((r) => setTimeout(r, 250));
      }
      const tookMs = Date.now() - killedAt;
      assert.ok(jobs.every((j) => j.credits_charged === 0 && j.refund_tx), JSON.stringify(jobs));
      const charged = await db.query<{ sum: string }>("SELECT coalesce(sum(credits_charged), 0) AS sum FROM jobs WHERE wallet = $1", [wallet]);
      assert.equal(await money.availableCredits(db, wallet), 500 - Number(charged[0]!.sum), `nothing charged for them; ended ${tookMs} ms after the kill`);
      t.diagnostic(`the dead node's jobs were refunded ${tookMs} ms after the kill`);
    } finally {
      await db.close();
    }
    for (const survivor of [b!, c!]) {
      const answer = await survivor.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 3 });
      assert.ok(answer.choices[0]!.message.content, "the survivors still serve");
    }
  });
});
