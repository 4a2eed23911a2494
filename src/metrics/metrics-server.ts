/**
 * `GET /metrics` on a port of its own: scrapes never share the paid API's port, its limits or its
 * logs, and the operator decides who reaches it by where it listens (loopback unless told
 * otherwise, as a Prometheus exporter usually is).
 */
import { createServer } from "node:http";
import type { Registry } from "prom-client";

export interface MetricsServer {
  /** `http://host:port/metrics`. */
  url: string;
  close(): Promise<void>;
}

export function startMetricsServer(options: { registry: Registry; port: number; host?: string }): Promise<MetricsServer> {
  const host = options.host ?? "127.0.0.1";
  const server = createServer((req, res) => {
    if (req.method !== "GET" || req.url?.split("?")[0] !== "/metrics") {
      res.writeHead(404, { "content-type": "text/plain" }).end("GET /metrics\n");
      return;
    }
    options.registry.metrics().then(
      (text) => res.writeHead(200, { "content-type": options.registry.contentType }).end(text),
      (error: unknown) => res.writeHead(500, { "content-type": "text/plain" }).end(`metrics could not be read: ${(error as Error).message}\n`),
    );
  });
  // A scrape that stalls must not hold a socket for ever.
  server.requestTimeout = 10_000;
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, host, () => {
      const { port } = server.address() as { port: number };
      const shown = host.includes(":") ? `[${host}]` : host;
      const close = () => new Promise<void>((done) => {
        server.close(() => done());
        // A scraper keeps its connection open between scrapes.
        server.closeAllConnections();
      });
      resolve({ url: `http://${shown}:${port}/metrics`, close });
    });
  });
}
