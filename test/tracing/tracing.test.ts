/**
 * OpenTelemetry traces of requests, exported over OTLP/HTTP to a collector on loopback: a real
 * service in-process, a paid stream and a JSON reply through the `openai` SDK, and after their
 * settlements confirm, the spans the collector received tie each request to its admission, its
 * run on the worker, its settlement batch and the chain's sends. Without an OTLP endpoint in the
 * environment the service starts no SDK; with a collector that never answers, requests are
 * answered as usual and the close waits for it only so long.
 */
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import { after, describe, test } from "node:test";
import { context, createContextKey, ROOT_CONTEXT, trace } from "@opentelemetry/api";
import { TRACE_FLUSH_MS, tracer } from "../../src/tracing/index.ts";
import { jobConcluded } from "../support/eventually.ts";
import { MODEL, migratedTestDb, startTestGateway } from "../support/service.ts";

const hi = [{ role: "user" as const, content: "Hi" }];
const ENDPOINT_VARS = ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] as const;
const SPAN_KIND_SERVER = 2;
const SPAN_KIND_CLIENT = 3;
/** A caller's own span, as a W3C traceparent names it; and a header that names none. */
const CALLER = { traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7" };
const TRACEPARENTS = { json: `00-${CALLER.traceId}-${CALLER.spanId}-01`, stream: "00-not-a-trace-context" };

/** An attribute as OTLP/JSON writes it. */
interface OtlpAttribute {
  key: string;
  value: { stringValue?: string; intValue?: number | string; boolValue?: boolean; doubleValue?: number };
}

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: OtlpAttribute[];
  links?: { traceId: string; spanId: string; attributes?: OtlpAttribute[] }[];
  status?: { code?: number };
}

/** A received span with its attributes read, and its resource's. */
interface ReceivedSpan extends OtlpSpan {
  attrs: Record<string, string | number | boolean | undefined>;
  resource: Record<string, string | number | boolean | undefined>;
}

/** The OTLP/JSON ExportTraceServiceRequest, as the HTTP exporter posts it. */
interface ExportTraceServiceRequest {
  resourceSpans: { resource?: { attributes?: OtlpAttribute[] }; scopeSpans: { spans: OtlpSpan[] }[] }[];
}

function attributesOf(list: OtlpAttribute[] | undefined): ReceivedSpan["attrs"] {
  const read = ({ value }: OtlpAttribute) => value.stringValue ?? value.boolValue ?? value.doubleValue ?? (value.intValue === undefined ? undefined : Number(value.intValue));
  return Object.fromEntries((list ?? []).map((a) => [a.key, read(a)]));
}

/** An OTLP/HTTP traces receiver on loopback: POST /v1/traces, JSON bodies. */
async function startCollector(): Promise<{ origin: string; spans: ReceivedSpan[]; posts: number; close(): Promise<void> }> {
  const received = { spans: [] as ReceivedSpan[], posts: 0 };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      if (req.method !== "POST" || req.url !== "/v1/traces" || !String(req.headers["content-type"]).startsWith("application/json")) {
        res.writeHead(404).end();
        return;
      }
      received.posts++;
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as ExportTraceServiceRequest;
      for (const { resource, scopeSpans } of body.resourceSpans) {
        for (const span of scopeSpans.flatMap((s) => s.spans)) received.spans.push({ ...span, attrs: attributesOf(span.attributes), resource: attributesOf(resource?.attributes) });
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address() as { port: number };
  return {
    origin: `http://127.0.0.1:${address.port}`,
    get spans() {
      return received.spans;
    },
    get posts() {
      return received.posts;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const saved = Object.fromEntries(ENDPOINT_VARS.map((name) => [name, process.env[name]]));
function restoreEnv(): void {
  for (const name of ENDPOINT_VARS) {
    if (saved[name] === undefined) delete process.env[name];
    else process.env[name] = saved[name];
  }
}

describe("tracing", () => {
  after(restoreEnv);

  test("without an OTLP endpoint the service starts no SDK: the API's tracer stays the no-op one", async () => {
    for (const name of ENDPOINT_VARS) delete process.env[name];
    const gateway = await startTestGateway({ db: await migratedTestDb() });
    try {
      assert.equal(tracer(), undefined, "the service holds no tracer");
      await gateway.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 4 });
      const probe = trace.getTracer("probe").startSpan("probe");
      assert.equal(probe.isRecording(), false, "the global tracer provider is the no-op one");
      probe.end();
      // No context manager either: a context set by `with` is not seen by what runs later.
      const key = createContextKey("probe");
      const seen = await context.with(ROOT_CONTEXT.setValue(key, 1), async () => {
        await new Promise((resolve) => setImmediate(resolve));
        return context.active().getValue(key);
      });
      assert.equal(seen, undefined);
    } finally {
      await gateway.close();
    }
  });

  test("a paid stream and a JSON reply arrive as traces: request, admission, run, settlement batch and the chain's sends; a caller's traceparent is linked", async () => {
    const collector = await startCollector();
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = collector.origin;
    const gateway = await startTestGateway({ db: await migratedTestDb() });
    const nodeId = gateway.service.nodeId;
    let jobIds: { stream: string; json: string };
    try {
      assert.ok(tracer(), "the service traces");
      const streamed = await gateway.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 8, stream: true }, { headers: { traceparent: TRACEPARENTS.stream } }).withResponse();
      for await (const chunk of streamed.data) void chunk;
      const json = await gateway.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 8 }, { headers: { traceparent: TRACEPARENTS.json } }).withResponse();
      jobIds = { stream: streamed.response.headers.get("x-svc-job-id")!, json: json.response.headers.get("x-svc-job-id")! };
      for (const id of Object.values(jobIds)) assert.equal((await jobConcluded(gateway.service, id)).status, "settled");
    } finally {
      // The close flushes the exporter.
      await gateway.close();
      restoreEnv();
      await collector.close();
    }
    assert.equal(tracer(), undefined, "the close let go of the SDK");
    const spans = collector.spans;
    const named = (name: string, jobId?: string) => spans.filter((s) => s.name === name && (jobId === undefined || s.attrs["svc.job_id"] === jobId));
    const linksTo = (span: ReceivedSpan, target: ReceivedSpan) => (span.links ?? []).some((l) => l.traceId === target.traceId && l.spanId === target.spanId);

    for (const [mode, jobId] of Object.entries(jobIds)) {
      const [request] = named("POST /v1/chat/completions", jobId);
      assert.ok(request, `the ${mode} request's server span arrived`);
      assert.equal(request.kind, SPAN_KIND_SERVER);
      assert.equal(request.attrs["http.route"], "/v1/chat/completions");
      assert.equal(request.attrs["http.response.status_code"], 200);
      assert.equal(request.attrs["svc.stream"], mode === "stream");
      assert.equal(request.resource["service.name"], "svc-gateway");
      assert.equal(request.resource["service.instance.id"], nodeId);
      assert.equal(request.parentSpanId ?? "", "", "a request's span is its trace's root");
      // The caller's span is a link (a malformed header names none), never the parent.
      const callerLinks = (request.links ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId, as: attributesOf(l.attributes)["svc.link"] }));
      assert.deepEqual(callerLinks, mode === "json" ? [{ ...CALLER, as: "caller" }] : []);
      assert.notEqual(request.traceId, CALLER.traceId, "a trace of the service's own");

      const childOfRequest = (name: string) => {
        const found = named(name, jobId);
        assert.equal(found.length, 1, `one ${name} span for the ${mode} job`);
        assert.equal(found[0]!.traceId, request.traceId, `${name} is in the ${mode} request's trace`);
        assert.equal(found[0]!.parentSpanId, request.spanId, `${name} is a child of the ${mode} request's span`);
        return found[0]!;
      };
      childOfRequest("job.admission");
      const run = childOfRequest("job.run");
      assert.equal(run.attrs["svc.model"], MODEL);
      assert.ok(run.attrs["svc.finish_reason"] !== "none", "the run ended with its worker's answer");

      // The batch that settled the job is a trace of its own, linked to the job's run; its send is its child.
      const batch = named("settlement.batch").find((b) => linksTo(b, run));
      assert.ok(batch, `a settlement batch links to the ${mode} job's run`);
      assert.notEqual(batch.traceId, request.traceId);
      const send = spans.find((s) => s.name === "chain.send" && s.parentSpanId === batch.spanId);
      assert.ok(send, "the batch's transaction was sent under it");
      assert.equal(send.kind, SPAN_KIND_CLIENT);
      assert.equal(send.traceId, batch.traceId);
      assert.deepEqual([send.attrs["svc.chain.kind"], send.attrs["svc.chain.outcome"]], ["settlement", "landed"]);
      assert.ok(linksTo(send, run), "the settlement's send links to the job it carries");
      // The job's escrow lock went to the chain too, linked to the job.
      assert.ok(
        spans.some((s) => s.name === "chain.send" && s.attrs["svc.chain.kind"] === "escrow" && s.attrs["svc.chain.outcome"] === "landed" && linksTo(s, run)),
        `the ${mode} job's escrow lock has a send span linked to it`,
      );
    }
    // Nothing carries a key: the request's Authorization header is nowhere in the export.
    assert.ok(!JSON.stringify(spans).includes(gateway.apiKey), "no span holds the API key");
  });

  test("a collector that never answers costs no request, and the close waits for it at most the flush bound", async () => {
    // Takes each export's connection and says nothing: the exporter waits until its own timeout.
    const silent = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = `http://127.0.0.1:${(silent.address() as { port: number }).port}/v1/traces`;
    const gateway = await startTestGateway({ db: await migratedTestDb() });
    try {
      assert.ok(tracer(), "the service traces");
      for (const stream of [false, true]) {
        const answer = await gateway.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 8, stream }).withResponse();
        if (stream) for await (const chunk of answer.data as AsyncIterable<unknown>) void chunk;
        assert.equal(answer.response.status, 200);
        await jobConcluded(gateway.service, answer.response.headers.get("x-svc-job-id")!);
      }
    } finally {
      restoreEnv();
    }
    const closing = performance.now();
    await gateway.close();
    const closeMs = performance.now() - closing;
    silent.closeAllConnections();
    silent.close();
    // The rest of the close takes well under a second here; the exporter's own timeout is longer than the bound.
    assert.ok(closeMs < TRACE_FLUSH_MS + 2_000, `the close took ${closeMs.toFixed(0)} ms`);
    assert.equal(tracer(), undefined);
  });
});
