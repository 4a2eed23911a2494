/**
 * A flooding worker: one authenticated connection sending messages as fast as it can
 * is cut off, and so is each reconnection, while paying requests keep their latency. The flooder
 * is a separate process, as an attacker would be. The p50 latency of paid requests without and
 * during the flood is printed.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { CloseCode } from "../../src/network/protocol.ts";
import { MODEL, type TestGateway } from "../support/service.ts";
import { startWorkerFixture, type WorkerFixture } from "../support/worker-fixture.ts";

const REQUESTS = 15;
const FLOODER = join(import.meta.dirname, "..", "support", "flooder.ts");

let fixture: WorkerFixture;
let gateway: TestGateway;
let honestAddress: string;

before(async () => {
  // Paid requests run back to back here for up to 20 s, faster than the default per-IP limit
  // allows (50 a second): that limit is not what this test is about. The worker endpoint keeps
  // its own handshake limit. At a couple of credits a request, 1,000 credits ran out within the
  // 20 s on a quick machine.
  fixture = await startWorkerFixture({ credits: 100_000, rateLimit: false });
  gateway = fixture.gateway;
  honestAddress = (await fixture.attach()).address;
});
after(() => fixture.close());

/** p50 of sequential paid requests: `REQUESTS` of them, and more while `more()` says so. */
async function p50OfPaidRequests(more: () => boolean = () => false): Promise<number> {
  const times: number[] = [];
  while (times.length < REQUESTS || more()) {
    const started = performance.now();
    const reply = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 5, temperature: 0 });
    assert.ok(reply.choices[0]!.message.content);
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  return Math.round(times[times.length >> 1]!);
}

test("a flooding connection is dropped and paying requests keep their latency", async () => {
  // Warm-up: the gateway loads the model's vocabulary on its first request.
  await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 2 });
  const quiet = await p50OfPaidRequests();

  const flooder = spawn(process.execPath, ["--import", "tsx", FLOODER, gateway.service.origin], { stdio: ["ignore", "pipe", "inherit"] });
  let output = "";
  flooder.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  try {
    // The flood is under way once its first connection has been cut off.
    const deadline = Date.now() + 30_000;
    while (!output.includes('"code"') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    // Measured across several floods, each cut off and followed by a reconnection.
    const ends = () => output.trim().split("\n").map((line) => JSON.parse(line) as { sent?: number; code?: number; refused?: boolean });
    const floodsBefore = ends().filter((e) => e.code !== undefined).length;
    const measuring = Date.now() + 20_000;
    const flooded = await p50OfPaidRequests(() => ends().filter((e) => e.code !== undefined).length < floodsBefore + 2 && Date.now() < measuring);
    const cut = ends().filter((e) => e.code !== undefined);
    console.log(`paid requests p50: ${quiet} ms quiet, ${flooded} ms during the flood;`, JSON.stringify({ connectionsCut: cut.length, messagesSent: cut.reduce((n, e) => n + e.sent!, 0), refusedAtTheDoor: ends().filter((e) => e.refused).length }));
    assert.ok(cut.length > 0, `the flooder was cut off: ${output}`);
    for (const end of cut) assert.equal(end.code, CloseCode.tooManyMessages);
    assert.ok(flooded < Math.max(3 * quiet, quiet + 300), `p50 ${flooded} ms during the flood against ${quiet} ms without`);
    assert.equal(gateway.service.pool.health(honestAddress)?.standing, "good", "the honest worker kept its place");
  } finally {
    flooder.kill();
  }
});
