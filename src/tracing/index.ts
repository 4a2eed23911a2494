/**
 * OpenTelemetry traces of requests, exported over OTLP/HTTP (JSON) when an endpoint is set
 * (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), and nothing at all
 * otherwise: no SDK, no context manager, and `tracer()` undefined, so the request path's
 * `tracer()?.startSpan(...)` evaluates neither its name nor its attributes.
 *
 * The SDK is global to the process: `startTracing` registers it for the first service that asks
 * and keeps it while any of them runs (tests start and stop services in one process).
 *
 * A request's work outlives its response (settlement, the chain), and one settlement batch or one
 * chain transaction serves many jobs: each job's trace is kept here by job id, and each
 * transaction's parent by signature, for the parts that later link to them (`jobLinks`,
 * `transactionParent`).
 */
import { context, defaultTextMapGetter, ROOT_CONTEXT, trace, type Attributes, type Context, type Link, type Span, type SpanContext, SpanStatusCode, type Tracer } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { ATTR_SERVICE_NAME } from "@opentelemetry/semantic-conventions";
import { BoundedMap } from "../core/index.ts";

export { SpanKind } from "@opentelemetry/api";
export type { Span } from "@opentelemetry/api";

export const DEFAULT_SERVICE_NAME = "svc-gateway";
/** How long a shutdown waits for the last spans to reach the collector: a collector that is down does not hold the shutdown. */
export const TRACE_FLUSH_MS = 3_000;
/**
 * Spans waiting for export, at most: past it new ones are dropped, so a collector that is down
 * costs a bounded amount of memory and never a request's time.
 */
const MAX_QUEUED_SPANS = 4_096;
/**
 * Spans an export carries at most. The exporter serializes a batch on the main thread in one go
 * (512 spans: 2-6 ms, up to 25 ms here): smaller batches cost as much in all but stall a request
 * arriving meanwhile for less.
 */
const EXPORT_BATCH_SPANS = 128;
/** Jobs whose traces are kept for the settlement and chain spans that link to them (a few minutes of jobs at load). */
const MAX_KEPT_JOBS = 20_000;
const MAX_KEPT_TRANSACTIONS = 10_000;

export interface TracingOptions {
  /** The OTLP/HTTP traces URL (`http://host:4318/v1/traces`); default: the exporter reads the OTEL_EXPORTER_OTLP_* variables. */
  url?: string;
  /** Default: OTEL_SERVICE_NAME, else `svc-gateway`. */
  serviceName?: string;
  /** This gateway's node id, as the resource's `service.instance.id`. */
  nodeId?: string;
}

/** One service's hold on the process's SDK. */
export interface TracingHandle {
  /** Exports what is queued (waiting at most TRACE_FLUSH_MS) and, for the last holder, stops the SDK. */
  shutdown(): Promise<void>;
}

interface Sdk {
  provider: BasicTracerProvider;
  contextManager: AsyncLocalStorageContextManager;
  tracer: Tracer;
  holders: number;
}

let sdk: Sdk | undefined;
const jobTraces = new BoundedMap<SpanContext>(MAX_KEPT_JOBS);
const transactionParents = new BoundedMap<SpanContext>(MAX_KEPT_TRANSACTIONS);

/** Whether the environment asks for traces: an OTLP endpoint is set. */
export function tracingWanted(env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT);
}

/** The tracer spans are started with, while a service traces; undefined otherwise. */
export function tracer(): Tracer | undefined {
  return sdk?.tracer;
}

function startSdk(options: TracingOptions): Sdk {
  const exporter = new OTLPTraceExporter({ ...(options.url ? { url: options.url } : {}), timeoutMillis: 5_000 });
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({
      [ATTR_SERVICE_NAME]: options.serviceName ?? (process.env.OTEL_SERVICE_NAME || DEFAULT_SERVICE_NAME),
      ...(options.nodeId ? { "service.instance.id": options.nodeId } : {}),
    }),
    spanProcessors: [new BatchSpanProcessor(exporter, { maxQueueSize: MAX_QUEUED_SPANS, maxExportBatchSize: EXPORT_BATCH_SPANS, scheduledDelayMillis: 1_000, exportTimeoutMillis: 5_000 })],
  });
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  trace.setGlobalTracerProvider(provider);
  return { provider, contextManager, tracer: provider.getTracer("svc"), holders: 0 };
}

/** Starts the SDK for a service (or joins the one running); the handle's `shutdown` lets go of it. */
export function startTracing(options: TracingOptions = {}): TracingHandle {
  const held = (sdk ??= startSdk(options));
  held.holders++;
  let released = false;
  return {
    shutdown: async () => {
      if (released) return;
      released = true;
      const last = --held.holders === 0;
      if (last) {
        if (sdk === held) sdk = undefined;
        trace.disable();
        context.disable();
        jobTraces.clear();
        transactionParents.clear();
      }
      // The provider's shutdown exports what is queued first.
      await withinFlushTime(last ? held.provider.shutdown() : held.provider.forceFlush());
    },
  };
}

async function withinFlushTime(work: Promise<unknown>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, TRACE_FLUSH_MS)));
  await Promise.race([work.catch(() => undefined), timeout]).finally(() => clearTimeout(timer));
}

/** Runs `work` with `span` as the active span: the spans its async work starts are its children. */
export function withSpan<T>(span: Span | undefined, work: () => T): T {
  return span ? context.with(trace.setSpan(context.active(), span), work) : work();
}

/** Ends `span`, marked as an error when `error` is given. */
export function endSpan(span: Span | undefined, error?: unknown): void {
  if (!span) return;
  if (error !== undefined) {
    span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
    if (error instanceof Error) span.recordException(error);
  }
  span.end();
}

/** Starts a span for `work` (a child of the active one), ended when its promise settles. */
export function traced<T>(name: string, attributes: () => Attributes, work: (span: Span | undefined) => Promise<T>): Promise<T> {
  const span = sdk?.tracer.startSpan(name, { attributes: attributes() });
  if (!span) return work(undefined);
  return withSpan(span, () => work(span)).then(
    (value) => (endSpan(span), value),
    (error: unknown) => {
      endSpan(span, error);
      throw error;
    },
  );
}

const traceContextHeaders = new W3CTraceContextPropagator();

/**
 * The caller's span that a W3C `traceparent` header (with its `tracestate`) names, for the
 * request's span to link to; undefined without one, or for one malformed. A link, not a parent:
 * a caller is a stranger, who would otherwise choose the trace the service's spans join and,
 * through its sampled flag, whether they are kept.
 */
export function callerSpanContext(headers: Record<string, string | string[] | undefined>): SpanContext | undefined {
  if (headers.traceparent === undefined) return undefined;
  return trace.getSpanContext(traceContextHeaders.extract(ROOT_CONTEXT, headers, defaultTextMapGetter));
}

/** Keeps `span` as the trace of job `jobId`, for what later links to the job. */
export function rememberJob(jobId: string, span: Span | undefined): void {
  if (span) jobTraces.set(jobId, span.spanContext());
}

/** Links to the kept traces of these jobs (none for a job this process did not trace). */
export function jobLinks(jobIds: Iterable<string>): Link[] {
  const links: Link[] = [];
  for (const jobId of jobIds) {
    const spanContext = jobTraces.get(jobId);
    if (spanContext) links.push({ context: spanContext, attributes: { "svc.job_id": jobId } });
  }
  return links;
}

/** The span under which the chain send of transaction `signature` belongs (a settlement batch's). */
export function rememberTransaction(signature: string, span: Span | undefined): void {
  if (span) transactionParents.set(signature, span.spanContext());
}

/**
 * The context to start the send of transaction `signature` in: its kept parent; else, for a
 * `shared` one, a new trace (no single request owns it; it links to its jobs); else the active one.
 */
export function transactionParent(signature: string, shared: boolean): Context {
  const kept = transactionParents.get(signature);
  if (kept) {
    transactionParents.delete(signature);
    return trace.setSpanContext(ROOT_CONTEXT, kept);
  }
  return shared ? trace.deleteSpan(context.active()) : context.active();
}
