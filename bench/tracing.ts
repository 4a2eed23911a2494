/**
 * What the tracing SDK costs on the main thread, apart from the load: starting and ending a span
 * with a job's attributes (a request makes about five), and serializing one export of 512 spans
 * as OTLP JSON (the batch processor does it once a second under load, on the main thread).
 *
 * Run: node --import tsx bench/tracing.ts
 */
import { performance } from "node:perf_hooks";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { JsonTraceSerializer } from "@opentelemetry/otlp-transformer";

const SPANS = 20_000;
const EXPORT_SPANS = 512;

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const tracer = provider.getTracer("bench");
const started = performance.now();
for (let i = 0; i < SPANS; i++) {
  const span = tracer.startSpan("job.run", { attributes: { "svc.job_id": "job_01M95CRT42SJG7CF74MAM0NV7R", "svc.model": "svc-dev/wiring-model", "svc.stream": true, "svc.max_tokens": 8 } });
  span.setAttributes({ "svc.worker": "2EnfEbbJV6BHTfWwSaukUmy7t1thHQ4gVfkba3frDqEx", "svc.finish_reason": "stop" });
  span.end();
}
console.log(`a span started, given its attributes and ended: ${(((performance.now() - started) * 1000) / SPANS).toFixed(1)} µs`);
const batch = exporter.getFinishedSpans().slice(0, EXPORT_SPANS);
const times: number[] = [];
let bytes = 0;
for (let round = 0; round < 20; round++) {
  const begun = performance.now();
  bytes = JsonTraceSerializer.serializeRequest(batch)!.length;
  times.push(performance.now() - begun);
}
times.sort((a, b) => a - b);
console.log(`an export of ${EXPORT_SPANS} spans serialized: median ${times[10]!.toFixed(1)} ms, longest ${times[19]!.toFixed(1)} ms, ${(bytes / 1024).toFixed(0)} KB`);
await provider.shutdown();
