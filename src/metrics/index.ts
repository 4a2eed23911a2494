/** The metrics part: what an operator scrapes (Prometheus' text format), and the port it is served on. */
export { createServiceMetrics } from "./service-metrics.ts";
export type { MetricsSources, ServiceMetrics } from "./service-metrics.ts";
export { startMetricsServer } from "./metrics-server.ts";
export type { MetricsServer } from "./metrics-server.ts";
