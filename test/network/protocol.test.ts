/** The worker protocol's messages are checked field by field, and the challenge answer is bound to its gateway. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { generateKeypair } from "../../src/core/keys.ts";
import { ProtocolError, UnknownMessageError, parseGatewayMessage, parseWorkerMessage } from "../../src/network/protocol-parse.ts";
import { closeReason, connectUrl } from "../../src/network/protocol.ts";
import { authMessage, publicKeyOf, verifyEd25519 } from "../../src/network/worker-auth.ts";

const signature = Buffer.alloc(64, 7).toString("base64");
const hash = `sha256:${"ab".repeat(32)}`;

describe("worker messages", () => {
  test("well-formed ones parse to exactly their fields", () => {
    const hello = { type: "hello", protocol: 1, address: "x", signature, models: [{ id: "m", contextWindow: 2048, extra: 1 }], concurrency: 2 };
    assert.deepEqual(parseWorkerMessage(JSON.stringify(hello)), { ...hello, models: [{ id: "m", contextWindow: 2048 }] });
    const done = { type: "done", jobId: "job_1", finishReason: "length", usage: { promptTokens: 3, completionTokens: 4 }, outputHash: hash, signature };
    assert.deepEqual(parseWorkerMessage(JSON.stringify(done)), done);
    assert.deepEqual(parseWorkerMessage(JSON.stringify({ ...done, text: "the rest" })), { ...done, text: "the rest" });
    assert.deepEqual(parseWorkerMessage('{"type":"heartbeat","junk":true}'), { type: "heartbeat" });
  });

  test("anything else is a ProtocolError naming what is wrong", () => {
    const bad: Array<[unknown, RegExp]> = [
      ["[1]", /must be an object/],
      ['{"type":"delta","jobId":"j"}', /text must be a string/],
      ['{"type":"delta","jobId":"","text":"a"}', /jobId must not be empty/],
      [`{"type":"done","jobId":"j","finishReason":"eos","usage":{"promptTokens":1,"completionTokens":1},"outputHash":"${hash}","signature":"${signature}"}`, /finishReason/],
      [`{"type":"done","jobId":"j","finishReason":"stop","usage":{"promptTokens":-1,"completionTokens":1},"outputHash":"${hash}","signature":"${signature}"}`, /usage.promptTokens/],
      [`{"type":"done","jobId":"j","finishReason":"stop","usage":{"promptTokens":1,"completionTokens":1},"outputHash":"${hash}","signature":"AAAA"}`, /64 bytes/],
      [`{"type":"hello","protocol":1,"address":"x","signature":"${signature}","models":[],"concurrency":0}`, /concurrency/],
      [`{"type":"hello","protocol":1,"address":"x","signature":"${signature}","models":[{"id":"m","contextWindow":1.5}],"concurrency":1}`, /contextWindow/],
      [`{"type":"done","jobId":"j","finishReason":"stop","usage":{"promptTokens":1,"completionTokens":1},"outputHash":"${hash}","signature":"${signature}","text":7}`, /text must be a string/],
      ['{"type":"count_result","requestId":1,"tokens":"9"}', /tokens/],
      ['{"type":"become_gateway"}', /unknown message type/],
    ];
    for (const [text, pattern] of bad) assert.throws(() => parseWorkerMessage(text as string), (e: Error) => e instanceof ProtocolError && pattern.test(e.message), String(text));
  });
});

describe("gateway messages", () => {
  test("a job's request is checked before an engine sees it", () => {
    const request = { messages: [{ role: "user", content: "Hi" }], maxTokens: 5, temperature: 0, topP: 1, stop: [], frequencyPenalty: 0, presencePenalty: 0, seed: 3 };
    assert.deepEqual(parseGatewayMessage(JSON.stringify({ type: "job", jobId: "job_1", model: "m", request })), { type: "job", jobId: "job_1", model: "m", request });
    assert.deepEqual(parseGatewayMessage(JSON.stringify({ type: "job", jobId: "job_1", model: "m", request, stream: false })), { type: "job", jobId: "job_1", model: "m", request, stream: false });
    assert.throws(() => parseGatewayMessage(JSON.stringify({ type: "job", jobId: "job_1", model: "m", request, stream: "no" })), /stream must be true or false/);
    for (const change of [{ maxTokens: 0 }, { temperature: 3 }, { messages: [{ role: "tool", content: "x" }] }, { stop: [1] }, { seed: 1.5 }]) {
      assert.throws(() => parseGatewayMessage(JSON.stringify({ type: "job", jobId: "job_1", model: "m", request: { ...request, ...change } })), ProtocolError);
    }
    assert.throws(() => parseGatewayMessage('{"type":"settled","jobId":"j","earnedBaseUnits":"-5","settlementTx":"t"}'), /whole number/);
  });

  test("a settlement to sign names 1-255 jobs, each with a slot of a table, a u64 charge and its tokens", () => {
    const job = { jobId: "job_1", slot: 3, charge: "18446744073709551615", promptTokens: 5, completionTokens: 7 };
    const message = { type: "sign_settlement", requestId: 9, table: "T", jobs: [job] };
    assert.deepEqual(parseGatewayMessage(JSON.stringify(message)), message);
    const broken = [{ jobs: [] }, { jobs: Array(256).fill(job) }, { jobs: [{ ...job, slot: 255 }] }, { jobs: [{ ...job, charge: "18446744073709551616" }] }, { jobs: [{ ...job, charge: "1.5" }] }, { jobs: [{ ...job, completionTokens: -1 }] }, { table: "" }];
    for (const change of broken) {
      assert.throws(() => parseGatewayMessage(JSON.stringify({ ...message, ...change })), (e: unknown) => e instanceof ProtocolError && (e.about as { requestId: number } | undefined)?.requestId === 9, JSON.stringify(change).slice(0, 80));
    }
    assert.deepEqual(parseWorkerMessage(JSON.stringify({ type: "settlement_signature", requestId: 9, signature: Buffer.alloc(64).toString("base64") })).type, "settlement_signature");
    assert.throws(() => parseWorkerMessage(JSON.stringify({ type: "settlement_signature", requestId: 9, signature: Buffer.alloc(63).toString("base64") })), ProtocolError);
  });
});

describe("the challenge answer", () => {
  test("verifies only for its key, message and host", () => {
    const key = generateKeypair();
    const message = authMessage("127.0.0.1:8080", "challenge");
    const signed = key.sign(message);
    assert.ok(verifyEd25519(key.address, message, signed));
    assert.ok(!verifyEd25519(generateKeypair().address, message, signed), "another address");
    assert.ok(!verifyEd25519(key.address, authMessage("127.0.0.1:8081", "challenge"), signed), "another gateway");
    assert.ok(!verifyEd25519(key.address, message, signed.subarray(1)), "a short signature");
    assert.ok(!verifyEd25519("not-base58!", message, signed));
    assert.equal(publicKeyOf(`1${key.address}`), undefined, "a non-canonical spelling of the address");
  });
});

test("URLs and close reasons", () => {
  assert.equal(connectUrl("http://127.0.0.1:8080").href, "ws://127.0.0.1:8080/v1/workers/connect");
  assert.equal(connectUrl("https://gw.example/v1?x=1").href, "wss://gw.example/v1/workers/connect");
  assert.throws(() => connectUrl("ftp://gw.example"));
  assert.ok(Buffer.byteLength(closeReason("é".repeat(200))) <= 123);
  assert.equal(closeReason("short"), "short");
});

describe("what a worker can fail alone", () => {
  const request = { messages: [{ role: "user", content: "Hi" }], maxTokens: 5, temperature: 1, topP: 1, stop: [], frequencyPenalty: 0, presencePenalty: 0 };

  test("a job or count it cannot read names the job or count, so only that one fails", () => {
    const job = JSON.stringify({ type: "job", jobId: "job_7", model: "m", request: { ...request, seed: 1e20 } });
    assert.throws(() => parseGatewayMessage(job), (e: unknown) => e instanceof ProtocolError && /seed/.test(e.message) && (e.about as { jobId: string }).jobId === "job_7");
    const count = JSON.stringify({ type: "count", requestId: 9, model: "m", messages: [{ role: "robot", content: "x" }] });
    assert.throws(() => parseGatewayMessage(count), (e: unknown) => e instanceof ProtocolError && (e.about as { requestId: number }).requestId === 9);
    // Without a readable id there is nothing to fail but the connection.
    assert.throws(() => parseGatewayMessage(JSON.stringify({ type: "job", jobId: 7 })), (e: unknown) => e instanceof ProtocolError && e.about === undefined);
  });

  test("an unknown message type is told apart from a malformed one; job_error carries whose fault it was", () => {
    assert.throws(() => parseGatewayMessage('{"type":"from_the_future"}'), UnknownMessageError);
    assert.deepEqual(parseWorkerMessage('{"type":"job_error","jobId":"j","message":"m","fault":"request"}'), { type: "job_error", jobId: "j", message: "m", fault: "request" });
    assert.throws(() => parseWorkerMessage('{"type":"job_error","jobId":"j","message":"m","fault":"gateway"}'), /fault/);
  });
});
