/**
 * Against a real gateway on loopback: GET /v1/openapi.json documents every public route with the
 * methods the router takes (read back from the 405 table, which Fastify's own route
 * registrations build), in the shape of OpenAPI 3.1; schema failures answer the spec's error body
 * naming the field; and a body-less request with `Content-Type: application/json` is accepted on
 * every route that takes no body.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { generateKeypair } from "../../src/core/keys.ts";
import { openApiDocument, openApiPath } from "../../src/http/openapi.ts";
import { appSession } from "../support/app-session.ts";
import { httpText, rawRequest } from "../support/raw-http.ts";
import { MODEL, migratedTestDb, startTestGateway, type TestGateway } from "../support/service.ts";

type Doc = {
  openapi: string;
  info: { title: string; version: string };
  servers: { url: string }[];
  paths: Record<string, Record<string, { parameters: { name: string; in: string }[]; requestBody?: unknown; responses: Record<string, unknown> }>>;
  components: { schemas: Record<string, unknown>; securitySchemes: Record<string, unknown> };
};

/** The endpoints API.md lists (the dispute route is not built yet), plus this document itself. */
const SPEC_ROUTES: [string, string][] = [
  ["post", "/chat/completions"],
  ["get", "/models"],
  ["get", "/models/{model_id}"],
  ["get", "/account"],
  ["get", "/jobs"],
  ["get", "/jobs/{id}"],
  ["post", "/webhooks"],
  ["get", "/webhooks"],
  ["delete", "/webhooks/{id}"],
  ["get", "/openapi.json"],
];

let gateway: TestGateway;
let doc: Doc;

before(async () => {
  // Each route is tried with requests it refuses, one after another, from one address.
  gateway = await startTestGateway({ db: await migratedTestDb(), webhooks: { allowHttpLocalhost: true }, refusalLimit: false });
  const response = await fetch(`${gateway.baseUrl}/openapi.json`);
  assert.equal(response.status, 200, "no API key needed");
  assert.match(response.headers.get("content-type") ?? "", /^application\/json/);
  doc = (await response.json()) as Doc;
});
after(() => gateway.close());

const auth = () => ({ authorization: `Bearer ${gateway.apiKey}` });

/** A concrete URL for a documented path. */
function concrete(path: string): string {
  return path.replace("{model_id}", MODEL).replace("{id}", "x_1");
}

function refsIn(value: unknown, found: string[] = []): string[] {
  if (Array.isArray(value)) value.forEach((v) => refsIn(v, found));
  else if (typeof value === "object" && value !== null) {
    for (const [key, inner] of Object.entries(value)) {
      if (key === "$ref" && typeof inner === "string") found.push(inner);
      else refsIn(inner, found);
    }
  }
  return found;
}

describe("GET /v1/openapi.json", () => {
  test("is an OpenAPI 3.1 document in shape", () => {
    assert.match(doc.openapi, /^3\.1\.\d+$/);
    assert.equal(typeof doc.info.title, "string");
    assert.equal(typeof doc.info.version, "string");
    assert.deepEqual(doc.servers, [{ url: "/v1" }]);
    assert.ok(Object.keys(doc.components.schemas).length > 5);
    for (const ref of refsIn(doc)) {
      const name = /^#\/components\/schemas\/(.+)$/.exec(ref)?.[1];
      assert.ok(name && name in doc.components.schemas, `${ref} resolves`);
    }
    for (const [path, operations] of Object.entries(doc.paths)) {
      assert.match(path, /^\//);
      const placeholders = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      for (const [method, operation] of Object.entries(operations)) {
        assert.ok(Object.keys(operation.responses).length > 0, `${method} ${path} has responses`);
        const declared = operation.parameters.filter((p) => p.in === "path").map((p) => p.name);
        assert.deepEqual(declared.sort(), placeholders.sort(), `${method} ${path} declares its path parameters`);
      }
    }
  });

  test("lists every endpoint of the spec, with its request and error bodies", () => {
    for (const [method, path] of SPEC_ROUTES) assert.ok(doc.paths[path]?.[method], `${method.toUpperCase()} ${path}`);
    const completion = doc.paths["/chat/completions"]!.post!;
    assert.ok(completion.requestBody, "the completion's body is documented");
    assert.deepEqual(completion.responses["4XX"], {
      description: "The spec's error body (docs/errors.md)",
      content: { "application/json": { schema: { $ref: "#/components/schemas/ErrorBody" } } },
    });
    assert.deepEqual(
      doc.paths["/jobs"]!.get!.parameters.map((p) => p.name),
      ["limit", "before", "after", "status", "model"],
    );
  });

  test("documents Idempotency-Key on the POST routes that read it, and on no other", () => {
    const keyed = Object.entries(doc.paths).flatMap(([path, methods]) =>
      Object.entries(methods).filter(([, op]) => op.parameters.some((p) => p.name === "Idempotency-Key" && p.in === "header")).map(([method]) => `${method} ${path}`),
    );
    assert.deepEqual(keyed.sort(), ["post /chat/completions", "post /jobs/{id}/dispute", "post /webhooks"]);
  });

  test("documents exactly the methods the router takes on each /v1 path", async () => {
    for (const [path, operations] of Object.entries(doc.paths)) {
      // The 405 table is derived from Fastify's own route registrations.
      const response = await rawRequest(gateway.baseUrl, httpText("PROPFIND", `/v1${concrete(path)}`));
      assert.equal(response.status, 405, path);
      const routed = response.headers.allow!.split(", ").filter((m) => m !== "HEAD");
      assert.deepEqual(Object.keys(operations).map((m) => m.toUpperCase()).sort(), routed, path);
    }
  });

  test("the generator keeps to /v1, leaves HEAD out and names the model wildcard", () => {
    const generated = openApiDocument(
      [
        { method: ["GET", "HEAD"], url: "/v1/models/*" },
        { method: "GET", url: "/healthz" },
        { method: "DELETE", url: "/v1/webhooks/:id", config: { public: true } },
      ],
      [{ $id: "Thing", type: "object" }],
      "test",
    ) as unknown as Doc;
    assert.deepEqual(Object.keys(generated.paths), ["/models/{model_id}", "/webhooks/{id}"]);
    assert.deepEqual(Object.keys(generated.paths["/models/{model_id}"]!), ["get"]);
    assert.deepEqual((generated.paths["/webhooks/{id}"]!.delete as unknown as { security: unknown[] }).security, []);
    assert.deepEqual(generated.components.schemas.Thing, { type: "object" });
    assert.equal(openApiPath("/v1/jobs/:id"), "/jobs/{id}");
  });

  test("is exempt from the burst limit, like the health endpoints", async () => {
    const limited = await startTestGateway({ db: await migratedTestDb(), rateLimit: { ratePerSecond: 0.001, burst: 2 } });
    try {
      for (let i = 0; i < 5; i++) assert.equal((await fetch(`${limited.baseUrl}/openapi.json`)).status, 200);
      for (let i = 0; i < 2; i++) await fetch(`${limited.baseUrl}/models`);
      assert.equal((await fetch(`${limited.baseUrl}/models`)).status, 429, "the limit does hold elsewhere");
    } finally {
      await limited.close();
    }
  });
});

describe("schema failures are the spec's error body", () => {
  async function post(path: string, body: unknown) {
    const response = await fetch(`${gateway.baseUrl}${path}`, { method: "POST", headers: { ...auth(), "content-type": "application/json" }, body: JSON.stringify(body) });
    return { status: response.status, error: ((await response.json()) as { error: { code: string; param: string | null; message: string } }).error };
  }

  test("param names the field, the message says what it must be", async () => {
    const hi = [{ role: "user", content: "hi" }];
    const cases: [unknown, string, RegExp][] = [
      [{ model: MODEL, messages: [{ role: "tool", content: "x" }] }, "messages[0].role", /must be one of 'system', 'user', 'assistant'/],
      [{ model: MODEL, messages: hi, temperature: 3 }, "temperature", /between 0 and 2; got 3/],
      [{ model: MODEL, messages: hi, temperature: "1" }, "temperature", /must be a number/],
      [{ model: MODEL, messages: hi, max_tokens: 1.5 }, "max_tokens", /must be an integer/],
      [{ model: MODEL, messages: hi, stop: ["a", "b", "c", "d", "e"] }, "stop", /at most 4/],
      [{ model: MODEL, messages: hi, stop: 5 }, "stop", /must be a string or an array of strings/],
      [{ model: MODEL, messages: [] }, "messages", /at least one/],
      [{ messages: hi }, "model", /'model' is required/],
      [[1, 2], "body", /JSON object/],
    ];
    for (const [body, param, message] of cases) {
      const { status, error } = await post("/chat/completions", body);
      assert.equal(status, 400, JSON.stringify(body));
      assert.equal(error.code, "invalid_request");
      assert.equal(error.param, param, JSON.stringify(body));
      assert.match(error.message, message);
      assert.doesNotMatch(error.message, /not valid JSON/);
    }
    const webhook = await post("/webhooks", { url: "http://localhost:9/x", events: ["job.completed", "job.exploded"], secret: "s".repeat(16) });
    assert.equal(webhook.error.param, "events");
    assert.match(webhook.error.message, /'events\[1\]' must be one of .*job\.completed.*; got "job\.exploded"/);
  });

  test("a query's field is named too; JSON that does not parse is still said so", async () => {
    const listed = await fetch(`${gateway.baseUrl}/jobs?status=lost`, { headers: auth() });
    assert.equal(listed.status, 400);
    assert.equal(((await listed.json()) as { error: { param: string } }).error.param, "status");
    const broken = await fetch(`${gateway.baseUrl}/chat/completions`, { method: "POST", headers: { ...auth(), "content-type": "application/json" }, body: "{" });
    assert.match(((await broken.json()) as { error: { message: string } }).error.message, /not valid JSON/);
  });
});

describe("a body-less request with Content-Type: application/json", () => {
  /** Sent as fetch sends it, with an explicit zero length, and as an empty chunked body. */
  async function variants(method: string, url: string, headers: Record<string, string>): Promise<number[]> {
    const json = { ...headers, "content-type": "application/json" };
    const path = new URL(url).pathname;
    const viaFetch = (await fetch(url, { method, headers: json })).status;
    const zero = (await rawRequest(gateway.baseUrl, httpText(method, path, { ...json, "content-length": "0" }))).status;
    const chunked = (await rawRequest(gateway.baseUrl, httpText(method, path, json, "", true))).status;
    return [viaFetch, zero, chunked];
  }

  test("is accepted on every /v1 route without a body", async () => {
    for (const [path, operations] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        if (operation.requestBody) continue;
        for (const status of await variants(method.toUpperCase(), `${gateway.baseUrl}${concrete(path)}`, auth())) {
          assert.ok(status === 200 || status === 404, `${method.toUpperCase()} ${path}: ${status}`);
        }
      }
    }
  });

  test("DELETE /v1/webhooks/{id} deletes, as a client sending the header on every request does it", async () => {
    for (const via of ["fetch", "zero", "chunked"] as const) {
      const created = await fetch(`${gateway.baseUrl}/webhooks`, {
        method: "POST",
        headers: { ...auth(), "content-type": "application/json" },
        body: JSON.stringify({ url: "http://localhost:9/hook", events: ["job.completed"], secret: "s".repeat(16) }),
      });
      const { id } = (await created.json()) as { id: string };
      const headers = { ...auth(), "content-type": "application/json" };
      const path = `/v1/webhooks/${id}`;
      const status =
        via === "fetch"
          ? (await fetch(`${gateway.service.origin}${path}`, { method: "DELETE", headers })).status
          : (await rawRequest(gateway.baseUrl, httpText("DELETE", path, via === "zero" ? { ...headers, "content-length": "0" } : headers, "", via === "chunked"))).status;
      assert.equal(status, 200, via);
    }
  });

  test("is accepted on the web app's routes without a body", async () => {
    const origin = gateway.service.origin;
    const cookie = await appSession(origin, generateKeypair());
    const headers = { origin, cookie };
    const routes: [string, string][] = [
      ["POST", "/app/api/session/nonce"],
      ["GET", "/app/api/overview"],
      ["POST", "/app/api/api-key"],
      ["DELETE", "/app/api/api-key"],
      ["GET", "/app/api/jobs"],
      ["POST", "/app/api/webhooks/wh_1/replay"],
      ["DELETE", "/app/api/webhooks/wh_1"],
    ];
    for (const [method, path] of routes) {
      for (const status of await variants(method, `${origin}${path}`, headers)) assert.ok(status === 200 || status === 404, `${method} ${path}: ${status}`);
    }
    // Signing out ends the session, so once.
    const signedOut = await fetch(`${origin}/app/api/session`, { method: "DELETE", headers: { ...headers, "content-type": "application/json" } });
    assert.equal(signedOut.status, 200);
  });
});
