/**
 * The API's span of each request, when the service traces (src/tracing): a server span named by
 * the method and the route's pattern (never its ids), with the status answered, linked to the
 * caller's own span when the request carries a `traceparent` header. It ends when the
 * request's log line is written (request-log.ts): when the response closes, or for a completion
 * whose caller left, once its route has done all it will.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { callerSpanContext, endSpan, SpanKind, tracer, withSpan, type Span } from "../tracing/index.ts";

const spans = new WeakMap<FastifyRequest, Span>();

/** Adds the hook that opens each request's span; nothing when the service does not trace. */
export function installRequestSpans(app: FastifyInstance): void {
  const traces = tracer();
  if (!traces) return;
  app.addHook("onRequest", async (request, reply) => {
    const route = request.routeOptions.url;
    const caller = callerSpanContext(request.headers);
    const span = traces.startSpan(route ? `${request.method} ${route}` : request.method, {
      kind: SpanKind.SERVER,
      attributes: { "http.request.method": request.method, ...(route ? { "http.route": route } : {}), "svc.request_id": request.id },
      ...(caller ? { links: [{ context: caller, attributes: { "svc.link": "caller" } }] } : {}),
    });
    spans.set(request, span);
    reply.raw.once("close", () => {
      const handled = request.completion?.handled;
      if (handled === undefined || reply.raw.writableFinished) return endRequestSpan(span, request, reply);
      // A turn later, as the log line: a failed route is answered by the error handler after its promise settles.
      const later = () => setImmediate(() => endRequestSpan(span, request, reply));
      handled.then(later, later);
    });
  });
}

function endRequestSpan(span: Span, request: FastifyRequest, reply: FastifyReply): void {
  const res = reply.raw;
  const completion = request.completion;
  const body = request.body as { stream?: unknown } | undefined;
  span.setAttributes({
    // 0: the caller left before anything was answered.
    "http.response.status_code": res.headersSent ? res.statusCode : 0,
    ...(completion && { "svc.model": completion.model, "svc.stream": body?.stream === true, ...(completion.jobId ? { "svc.job_id": completion.jobId } : {}) }),
    ...(!res.writableFinished && { "svc.client_gone": true }),
  });
  endSpan(span, res.statusCode >= 500 ? `answered ${res.statusCode}` : undefined);
}

/** Runs `work` inside the request's span: the job it starts is traced under it. */
export function inRequestSpan<T>(request: FastifyRequest, work: () => T): T {
  return withSpan(spans.get(request), work);
}
