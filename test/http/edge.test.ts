/**
 * The HTTP edge against a real gateway on loopback: every answer has the spec's error body, even
 * for requests Node's parser or Fastify's router refuse; 405 with `Allow` for any method a route
 * does not take; request ids, Retry-After, CORS and the request log line.
 */
import assert from "node:assert/strict";
import net from "node:net";
import { Writable } from "node:stream";
import { after, before, describe, test } from "node:test";
import { pino } from "pino";
import { generateKeypair } from "../../src/core/keys.ts";
import { appSession } from "../support/app-session.ts";
import { MODEL, migratedTestDb, startTestGateway, type TestGateway } from "../support/service.ts";
import { httpText, parseRawResponse, rawRequest, type RawResponse } from "../support/raw-http.ts";

let gateway: TestGateway;
const logLines: Record<string, unknown>[] = [];

before(async () => {
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split("\n")) if (line.trim() !== "") logLines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  // These tests send many requests the gateway refuses, one after another, from one address.
  gateway = await startTestGateway({ db: await migratedTestDb(), logger: pino({ level: "info" }, sink), webhooks: { allowHttpLocalhost: true }, refusalLimit: false });
});
after(() => gateway.close());

const auth = () => ({ Authorization: `Bearer ${gateway.apiKey}` });
const raw = (text: string) => rawRequest(gateway.baseUrl, text);

function assertSpecError(response: RawResponse, status: number, code: string): void {
  assert.equal(response.status, status, response.body);
  assert.match(response.headers["content-type"] ?? "", /^application\/json/);
  const { error } = JSON.parse(response.body) as { error: Record<string, unknown> };
  assert.equal(error.code, code);
  for (const field of ["message", "type", "docs"]) assert.equal(typeof error[field], "string", field);
  assert.ok("param" in error);
  assert.match(response.headers["x-request-id"] ?? "", /\S/, "an error has a request id too");
}

describe("every error is the spec's error", () => {
  test("ids no resource can have answer 404 without reaching the database", async () => {
    assertSpecError(await raw(httpText("GET", "/v1/jobs/job_%00", auth())), 404, "not_found");
    assertSpecError(await raw(httpText("DELETE", "/v1/webhooks/%00", auth())), 404, "not_found");
    assertSpecError(await raw(httpText("GET", `/v1/jobs/job_${"a".repeat(5000)}`, auth())), 404, "not_found");
    assertSpecError(await raw(httpText("DELETE", `/v1/webhooks/${"w".repeat(500)}`, auth())), 404, "not_found");
  });

  test("the web app's API refuses such ids too, for a signed-in wallet", async () => {
    const cookie = await appSession(gateway.service.origin, generateKeypair());
    assertSpecError(await raw(httpText("GET", "/app/api/webhooks/%00/deliveries", { Cookie: cookie })), 404, "not_found");
  });

  test("what Node's parser and Fastify's router refuse still gets the spec's body", async () => {
    assertSpecError(await raw(httpText("GET", "/v1/jobs/%zz", auth())), 400, "invalid_request");
    const longUrl = await raw(httpText("GET", `/v1/jobs/job_${"a".repeat(20_000)}`, auth()));
    assertSpecError(longUrl, 431, "headers_too_large");
    const bigHeader = await raw(httpText("GET", "/v1/models", { ...auth(), "X-Big": "a".repeat(20 * 1024) }));
    assertSpecError(bigHeader, 431, "headers_too_large");
    assert.equal(bigHeader.headers.connection, "close");
    assertSpecError(await raw("NOT HTTP AT ALL\r\n\r\n"), 400, "invalid_request");
  });

  test("two Authorization headers are refused with a body naming the header", async () => {
    const key = `Bearer ${gateway.apiKey}`;
    const response = await raw(httpText("GET", "/v1/account", [["Authorization", key], ["Authorization", key]]));
    assertSpecError(response, 400, "invalid_request");
    assert.equal((JSON.parse(response.body) as { error: { param: string } }).error.param, "authorization");
  });

  test("any method a route does not take answers 405 with Allow; unknown paths 404", async () => {
    const cases: [string, string, string][] = [
      ["OPTIONS", "/v1/models", "GET, HEAD"],
      ["TRACE", "/v1/models", "GET, HEAD"],
      ["PROPFIND", "/v1/models", "GET, HEAD"],
      ["PUT", "/v1/models/svc-dev/wiring-model", "GET, HEAD"],
      ["HEAD", "/v1/chat/completions", "POST"],
      ["GET", "/v1/chat/completions", "POST"],
      ["PATCH", "/v1/jobs/job_01JABCDEFGHJKMNPQRSTVWXYZ0", "GET, HEAD"],
      ["POST", "/v1/webhooks/wh_1", "DELETE"],
      ["MKCOL", "/v1/webhooks", "GET, HEAD, POST"],
      ["OPTIONS", "/app/api/session", "DELETE, GET, HEAD, POST"],
      ["GET", "/app/api/session/nonce", "POST"],
    ];
    for (const [method, path, allow] of cases) {
      const response = await raw(httpText(method, path));
      assert.equal(response.status, 405, `${method} ${path}`);
      assert.equal(response.headers.allow, allow, `${method} ${path}`);
      if (method !== "HEAD") assertSpecError(response, 405, "method_not_allowed");
    }
    assertSpecError(await raw(httpText("GET", "/v1/nothing-here")), 404, "not_found");
    assertSpecError(await raw(httpText("OPTIONS", "/nothing-here")), 404, "not_found");
  });

  test("a body-less request with Content-Type: application/json is accepted where no body is taken", async () => {
    const created = await fetch(`${gateway.baseUrl}/webhooks`, {
      method: "POST",
      headers: { ...auth(), "content-type": "application/json" },
      body: JSON.stringify({ url: "http://localhost:9/hook", events: ["job.completed"], secret: "s".repeat(16) }),
    });
    assert.equal(created.status, 200, await created.clone().text());
    const { id } = (await created.json()) as { id: string };
    const json = { ...auth(), "Content-Type": "application/json" };
    const deleted = await raw(httpText("DELETE", `/v1/webhooks/${id}`, json));
    assert.equal(deleted.status, 200, deleted.body);
    assert.deepEqual(JSON.parse(deleted.body), { id, object: "webhook", deleted: true });
    assert.equal((await raw(httpText("GET", "/v1/account", json))).status, 200);
    assert.equal((await raw(httpText("DELETE", `/v1/webhooks/${id}`, { ...auth(), "Content-Type": "text/plain" }))).status, 404);
    // A body in another media type is still refused.
    assertSpecError(await raw(httpText("POST", "/v1/chat/completions", { ...auth(), "Content-Type": "text/plain" }, "hello")), 400, "invalid_request");
  });
});

describe("headers people expect and the request log", () => {
  test("a 503 carries Retry-After like a 429", async () => {
    // A catalog model that no worker of this gateway hosts.
    const response = await fetch(`${gateway.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { ...auth(), "content-type": "application/json" },
      body: JSON.stringify({ model: "Qwen/Qwen3-1.7B", messages: [{ role: "user", content: "hi" }] }),
    });
    assert.equal(response.status, 503);
    const { error } = (await response.json()) as { error: { code: string; details: { retry_after: number } } };
    assert.equal(error.code, "no_workers_available");
    assert.equal(response.headers.get("retry-after"), String(Math.ceil(error.details.retry_after)));
  });

  test("x-request-id on every response, echoed when sane, surfaced by the SDK, and in the log line", async () => {
    const models = await fetch(`${gateway.baseUrl}/models`, { headers: { "x-request-id": "client-chosen.id_1" } });
    assert.equal(models.headers.get("x-request-id"), "client-chosen.id_1");
    const insane = await fetch(`${gateway.baseUrl}/models`, { headers: { "x-request-id": "x".repeat(300) } });
    assert.match(insane.headers.get("x-request-id") ?? "", /^req_[0-9a-f]{24}$/);

    const completion = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], temperature: 0, max_tokens: 5 });
    const requestId = (completion as unknown as { _request_id?: string })._request_id;
    assert.match(requestId ?? "", /^req_[0-9a-f]{24}$/, "the openai SDK reads x-request-id");
    const jobId = completion.id.replace(/^chatcmpl-/, "");
    const line = await waitForLog((l) => l.request_id === requestId);
    assert.equal(line.msg, "completion");
    assert.equal(line.status, 200);
    assert.equal(line.model, MODEL);
    assert.equal(line.job_id, jobId);
    assert.equal(line.completion_tokens, completion.usage!.completion_tokens);
    assert.equal(line.prompt_tokens, completion.usage!.prompt_tokens);
    assert.equal(typeof line.credits_remaining, "number");
    assert.equal(typeof line.ms, "number");
  });

  test("CORS on /v1: preflight 204, responses readable (streams too); none on /app/api", async () => {
    const origin = "https://chat.example";
    const preflight = await fetch(`${gateway.baseUrl}/chat/completions`, {
      method: "OPTIONS",
      headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "authorization, content-type, x-stainless-os" },
    });
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers.get("access-control-allow-origin"), "*");
    assert.equal(preflight.headers.get("access-control-allow-methods"), "POST");
    assert.match(preflight.headers.get("access-control-allow-headers") ?? "", /authorization, content-type/);

    const stream = await fetch(`${gateway.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { ...auth(), origin, "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Hi" }], stream: true, max_tokens: 3 }),
    });
    assert.equal(stream.status, 200);
    assert.match(stream.headers.get("content-type") ?? "", /text\/event-stream/);
    await stream.text();
    assert.equal(stream.headers.get("access-control-allow-origin"), "*");
    const exposed = stream.headers.get("access-control-expose-headers") ?? "";
    for (const header of ["x-request-id", "x-svc-job-id", "x-svc-credits-remaining", "x-svc-settlement-tx"]) assert.ok(exposed.includes(header), header);
    assert.match(stream.headers.get("x-request-id") ?? "", /^req_/);

    const app = await fetch(`${gateway.baseUrl.replace(/\/v1$/, "")}/app/api/session`, { method: "OPTIONS", headers: { origin, "access-control-request-method": "POST" } });
    assert.equal(app.status, 405);
    assert.equal(app.headers.get("access-control-allow-origin"), null, "the cookie-authenticated app API allows no other origin");
  });
});

async function waitForLog(match: (line: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
  for (let i = 0; i < 200; i++) {
    const line = logLines.find(match);
    if (line) return line;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error("no such log line");
}


describe("every stage of a request is bounded in time", () => {
  let slow: TestGateway;
  before(async () => {
    slow = await startTestGateway({ db: await migratedTestDb(), requestTimeoutMs: 1_500 });
  });
  after(() => slow.close());

  /** Opens a connection, sends `head` and then `trickle` one byte every 200 ms; resolves with the answer and when it came. */
  function trickling(head: string, trickle = ""): Promise<{ response: RawResponse; ms: number }> {
    const { hostname, port } = new URL(slow.baseUrl);
    const started = Date.now();
    return new Promise((resolve) => {
      const chunks: Buffer[] = [];
      const socket = net.connect(Number(port), hostname, () => socket.write(head));
      let sent = 0;
      const timer = setInterval(() => sent < trickle.length && socket.writable && socket.write(trickle[sent++]!), 200);
      socket.on("data", (d: Buffer) => chunks.push(d));
      socket.on("error", () => undefined);
      socket.on("close", () => {
        clearInterval(timer);
        resolve({ response: parseRawResponse(Buffer.concat(chunks).toString("utf8")), ms: Date.now() - started });
      });
    });
  }

  test("a body sent a byte at a time: 408 request_timeout with the spec's body, at the request timeout", async () => {
    const body = JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Hi" }] });
    const head = `POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${slow.apiKey}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
    const { response, ms } = await trickling(head, body);
    assertSpecError(response, 408, "request_timeout");
    assert.ok(ms < 4_000, `closed after ${ms} ms`);
  });

  test("headers that never end, and a silent connection: 408 within the request timeout", async () => {
    const headerOnly = await trickling("GET /v1/models HTTP/1.1\r\nHost: localhost\r\n", "X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    assertSpecError(headerOnly.response, 408, "request_timeout");
    assert.ok(headerOnly.ms < 4_000, `closed after ${headerOnly.ms} ms`);
    const silent = await trickling("");
    assert.ok(silent.ms < 4_000, `a silent connection closed after ${silent.ms} ms`);
  });

  test("request bodies are bounded per address: 3.5 MB prompts, refused after reading, meet 429 past 16 MiB", async () => {
    const body = JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "a".repeat(3_500_000) }] });
    const statuses: number[] = [];
    // The bucket refills at 4 MiB a second while the bodies travel: stop at the first refusal.
    while (statuses.length < 8 && !statuses.includes(429)) {
      const res = await fetch(`${slow.baseUrl}/chat/completions`, { method: "POST", headers: { authorization: `Bearer ${slow.apiKey}`, "content-type": "application/json" }, body });
      statuses.push(res.status);
      if (res.status === 429) assert.match(((await res.json()) as { error: { message: string } }).error.message, /MiB of request bodies a second/);
      else await res.text();
    }
    assert.deepEqual(statuses.slice(0, 4), [400, 400, 400, 400], "16 MiB at once pass");
    assert.ok(statuses.length <= 6 && statuses.at(-1) === 429, `then 429: ${statuses.join(", ")}`);
    assert.equal((await fetch(`${slow.baseUrl}/models`, { headers: { authorization: `Bearer ${slow.apiKey}` } })).status, 200, "a request without a body still passes");
  });

  test("an address whose requests keep being refused is answered 429 before they are read, until its bucket refills", async () => {
    const limited = await startTestGateway({ db: await migratedTestDb(), refusalLimit: { ratePerSecond: 1, burst: 3 } });
    try {
      const bad = () => fetch(`${limited.baseUrl}/chat/completions`, { method: "POST", headers: { authorization: `Bearer ${limited.apiKey}`, "content-type": "application/json" }, body: "{" });
      const statuses = [];
      for (let i = 0; i < 5; i++) statuses.push((await bad()).status);
      assert.deepEqual(statuses, [400, 400, 400, 400, 429], "three refusals at once, a fourth empties the bucket");
      const good = await fetch(`${limited.baseUrl}/models`, { headers: { authorization: `Bearer ${limited.apiKey}` } });
      assert.equal(good.status, 429, "the address waits, whatever it sends");
      const wait = Number(good.headers.get("retry-after"));
      assert.ok(wait >= 1 && wait <= 2, `retry after ${wait} s`);
      await new Promise((resolve) => setTimeout(resolve, wait * 1000 + 100));
      assert.equal((await fetch(`${limited.baseUrl}/models`, { headers: { authorization: `Bearer ${limited.apiKey}` } })).status, 200);
    } finally {
      await limited.close();
    }
  });

  test("behind a trusted proxy the limits count each forwarded client, not the proxy", async () => {
    const proxied = await startTestGateway({ db: await migratedTestDb(), refusalLimit: { ratePerSecond: 1, burst: 2 }, trustProxy: ["127.0.0.1"] });
    try {
      const from = (client: string, body = "{") => fetch(`${proxied.baseUrl}/chat/completions`, { method: "POST", headers: { authorization: `Bearer ${proxied.apiKey}`, "content-type": "application/json", "x-forwarded-for": client }, body });
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await from("203.0.113.7")).status);
      assert.deepEqual(statuses, [400, 400, 400, 429], "one client refused too often");
      const other = await fetch(`${proxied.baseUrl}/models`, { headers: { authorization: `Bearer ${proxied.apiKey}`, "x-forwarded-for": "198.51.100.9" } });
      assert.equal(other.status, 200, "another client behind the same proxy is not");
    } finally {
      await proxied.close();
    }
  });

  test("3,000 headers get the spec's body", async () => {
    const many = Array.from({ length: 3_000 }, (_, i): [string, string] => [`X-H${i}`, "1"]);
    const response = await rawRequest(slow.baseUrl, httpText("GET", "/v1/models", [["Authorization", `Bearer ${slow.apiKey}`], ...many]));
    assert.match(response.headers["content-type"] ?? "", /^application\/json/, `${response.status} ${response.body}`);
  });
});
