/**
 * The JSON-RPC server's limits, against a real embedded chain on loopback: what one request may
 * ask for (body, batch, account data, base58), how often an address may ask, how many
 * WebSocket connections and subscriptions it may hold, and that a reader who stops reading or a
 * body that never ends is cut off.
 */
import assert from "node:assert/strict";
import { connect } from "node:net";
import { after, before, describe, test } from "node:test";
import { WebSocket } from "ws";
import type { Address } from "@solana/kit";
import { openChain, startChainRpc, type Chain, type ChainRpcServer } from "../../src/chain/index.ts";
import { base58Encode } from "../../src/core/index.ts";
import { ESCROW_PROGRAM } from "../../src/chain/escrow-program/index.ts";
import { DEFAULT_RPC_LIMITS } from "../../src/chain/rpc/limits.ts";

interface Reply {
  id?: unknown;
  result?: unknown;
  error?: { code: number; message: string };
}

async function post(server: ChainRpcServer, body: unknown): Promise<{ status: number; json: unknown; bytes: number; retryAfter: string | null }> {
  const res = await fetch(server.url, { method: "POST", headers: { "content-type": "application/json" }, body: typeof body === "string" ? body : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, json: JSON.parse(text), bytes: text.length, retryAfter: res.headers.get("retry-after") };
}

const call = (method: string, params: unknown[] = [], id: unknown = 1) => ({ jsonrpc: "2.0", id, method, params });

/** The escrow program's data account: the largest account on the chain (the program's code). */
async function programData(server: ChainRpcServer): Promise<string> {
  const { json } = await post(server, call("getAccountInfo", [ESCROW_PROGRAM, { encoding: "base64" }]));
  const data = Buffer.from(((json as { result: { value: { data: [string, string] } } }).result.value.data)[0], "base64");
  return base58Encode(data.subarray(4, 36));
}

function openSocket(server: ChainRpcServer): Promise<WebSocket> {
  const socket = new WebSocket(server.wsUrl);
  return new Promise((resolve, reject) => {
    socket.once("open", () => resolve(socket));
    socket.once("error", reject);
  });
}

/** Sends one WebSocket call and waits for the reply with its id. */
function ask(socket: WebSocket, id: number, method: string, params: unknown[] = []): Promise<Reply> {
  return new Promise((resolve) => {
    const onMessage = (data: Buffer) => {
      const reply = JSON.parse(data.toString()) as Reply;
      if (reply.id !== id) return;
      socket.off("message", onMessage);
      resolve(reply);
    };
    socket.on("message", onMessage);
    socket.send(JSON.stringify(call(method, params, id)));
  });
}

const closed = (socket: WebSocket) => new Promise<number>((resolve) => socket.once("close", (code) => resolve(code)));

describe("the chain RPC server's limits", () => {
  let chain: Chain;
  let server: ChainRpcServer;
  before(async () => {
    chain = await openChain({ slotMs: 5 });
    server = await startChainRpc({ chain, port: 0, limits: { requestsPerSecondPerAddress: 1_000, requestBurstPerAddress: 1_000, maxBufferedBytesPerConnection: 16 * 1024 } });
  });
  after(async () => {
    await server.close();
    await chain.close();
  });

  test("a body over 50 KiB is 413 with a JSON-RPC error; a batch over 100 calls and an empty one are -32600", async () => {
    const big = await post(server, JSON.stringify(call("getSlot", ["x".repeat(DEFAULT_RPC_LIMITS.maxBodyBytes)])));
    assert.equal(big.status, 413);
    assert.equal((big.json as Reply).error?.code, -32600);
    const batch = await post(server, Array.from({ length: 101 }, (_, i) => call("getSlot", [], i)));
    assert.equal((batch.json as Reply).error?.code, -32600);
    assert.match((batch.json as Reply).error!.message, /at most 100 calls/);
    assert.equal(((await post(server, [])).json as Reply).error?.code, -32600);
    const hundred = await post(server, Array.from({ length: 100 }, (_, i) => call("getSlot", [], i)));
    assert.equal((hundred.json as Reply[]).filter((r) => typeof r.result === "number").length, 100);
  });

  test("account data beyond a request's budget is refused, never built: a batch naming the program's account 900 times", async () => {
    const code = await programData(server);
    const rssBefore = process.memoryUsage().rss;
    // Nine calls of a hundred addresses fit the 50 KiB body and ask for tens of MB of account data.
    const batch = Array.from({ length: 9 }, (_, i) => call("getMultipleAccounts", [Array(100).fill(code), { encoding: "base64" }], i));
    const { json, bytes } = await post(server, batch);
    const replies = json as Reply[];
    assert.equal(replies.length, 9);
    for (const refused of replies) assert.equal(refused.error?.code, -32602, "a hundred copies of the program are more than 1 MiB");
    assert.ok(bytes < 10_000, `the answer is ${bytes} bytes`);
    assert.ok(process.memoryUsage().rss - rssBefore < 100 * 1024 * 1024, "no answer of hundreds of MB was built");
  });

  test("the budget is the batch's: a call within it is served, the next past it refused", async () => {
    const code = await programData(server);
    // As many copies of the program's data as fit the budget (the program's size is the committed build's).
    const size = (await chain.backend.getAccount(code as Address))?.data.length ?? 0;
    const fit = Math.floor(DEFAULT_RPC_LIMITS.maxResponseDataBytes / size);
    assert.ok(fit >= 2 && fit * 2 * size > DEFAULT_RPC_LIMITS.maxResponseDataBytes, `${size} bytes an account`);
    const within = (id: number) => call("getMultipleAccounts", [Array(fit).fill(code), { encoding: "base64" }], id);
    const replies = (await post(server, [within(1), within(2)])).json as Reply[];
    const served = (replies[0]!.result as { value: unknown[] }).value;
    assert.equal(served.length, fit, `${fit} x ${size} bytes fit the budget`);
    assert.equal(replies[1]!.error?.code, -32602, `${2 * fit} x ${size} bytes do not`);
  });

  test("base58 of more than 128 bytes of account data is refused as Solana's nodes refuse it", async () => {
    const { json } = await post(server, call("getAccountInfo", [await programData(server), { encoding: "base58" }]));
    assert.deepEqual((json as Reply).error, { code: -32600, message: "Encoded binary (base 58) data should be less than 128 bytes, please use Base64 encoding." });
    const sliced = await post(server, call("getAccountInfo", [await programData(server), { encoding: "base58", dataSlice: { offset: 0, length: 64 } }]));
    assert.ok((sliced.json as Reply).result, "a slice of 64 bytes is served");
  });

  test("a connection that stops reading its notifications is dropped; one that reads stays", async () => {
    const slow = await openSocket(server);
    const reader = await openSocket(server);
    for (let i = 0; i < 64; i++) assert.equal(typeof (await ask(slow, i, "slotSubscribe")).result, "number");
    assert.equal(typeof (await ask(reader, 1, "slotSubscribe")).result, "number");
    assert.equal((await server.stats()).connections, 2);
    // The client's own socket stops reading: the kernel's buffers fill, then the server's queue.
    (slow as unknown as { _socket: { pause(): void } })._socket.pause();
    const deadline = Date.now() + 60_000;
    while ((await server.stats()).connections > 1 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal((await server.stats()).connections, 1, "the server dropped the connection that did not read");
    assert.equal(reader.readyState, WebSocket.OPEN, "the reading connection is still open");
    assert.equal((await server.stats()).subscriptions, 1, "and the dropped one's subscriptions with it");
    reader.close();
    slow.terminate();
  });
});

describe("the chain RPC server's limits per address and in all", () => {
  let chain: Chain;
  before(async () => {
    chain = await openChain({ slotMs: 100 });
  });
  after(() => chain.close());

  test("requests from one address beyond its burst: 429 with Retry-After and a JSON-RPC error", async () => {
    const server = await startChainRpc({ chain, port: 0, limits: { requestsPerSecondPerAddress: 1, requestBurstPerAddress: 3 } });
    try {
      const answers = [];
      for (let i = 0; i < 4; i++) answers.push(await post(server, call("getSlot")));
      assert.deepEqual(answers.map((a) => a.status), [200, 200, 200, 429]);
      assert.ok(Number(answers[3]!.retryAfter) >= 1);
      assert.equal((answers[3]!.json as Reply).error?.code, 429);
    } finally {
      await server.close();
    }
  });

  test("subscriptions per connection and in all, and connections per address, are bounded", async () => {
    const server = await startChainRpc({ chain, port: 0, limits: { maxSubscriptionsPerConnection: 3, maxSubscriptions: 5, maxConnectionsPerAddress: 2 } });
    try {
      const a = await openSocket(server);
      const b = await openSocket(server);
      const results = [];
      for (let i = 0; i < 4; i++) results.push(await ask(a, i, "slotSubscribe"));
      assert.deepEqual(results.map((r) => typeof r.result), ["number", "number", "number", "undefined"]);
      assert.match(results[3]!.error!.message, /at most 3 subscriptions/);
      const more = [await ask(b, 1, "slotSubscribe"), await ask(b, 2, "slotSubscribe"), await ask(b, 3, "slotSubscribe")];
      assert.deepEqual(more.map((r) => typeof r.result), ["number", "number", "undefined"]);
      assert.match(more[2]!.error!.message, /all the subscriptions it can/);
      const third = new WebSocket(server.wsUrl);
      assert.equal(await closed(third), 1013, "a third connection from the address is refused");
      await ask(a, 9, "slotUnsubscribe", [results[0]!.result]);
      assert.equal(typeof (await ask(b, 4, "slotSubscribe")).result, "number", "an unsubscribe frees a place");
      a.close();
      b.close();
    } finally {
      await server.close();
    }
  });

  test("a body sent a byte at a time is cut off at the request timeout with a 408", async () => {
    const server = await startChainRpc({ chain, port: 0, limits: { requestTimeoutMs: 1_500 } });
    try {
      const { port } = new URL(server.url);
      const socket = connect(Number(port), "127.0.0.1");
      socket.write(`POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n`);
      const trickle = setInterval(() => socket.writable && socket.write("{"), 200);
      let answer = "";
      socket.on("data", (d) => (answer += d.toString()));
      const started = Date.now();
      await new Promise((resolve) => socket.once("close", resolve));
      clearInterval(trickle);
      assert.ok(Date.now() - started < 5_000, `closed after ${Date.now() - started} ms`);
      assert.match(answer, /^HTTP\/1.1 408/);
      assert.match(answer, /"code":-32600/);
    } finally {
      await server.close();
    }
  });
});
