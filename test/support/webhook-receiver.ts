/**
 * A webhook receiver as a customer would write it from docs/webhooks.md: HTTPS on loopback, the
 * signature checked over the raw body with its own HMAC code (constant-time, 5-minute timestamp
 * tolerance). It records every request and answers with the status a test's script decides.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";
import { testCert } from "./tls-cert.ts";

export interface Received {
  /** performance.now() at arrival. */
  at: number;
  path: string;
  eventId: string | undefined;
  signature: string | undefined;
  contentType: string | undefined;
  body: string;
  envelope: { id: string; event: string; created_at: string; api_version: string; data: Record<string, unknown> };
  /** Whether the signature verified with the secret the receiver was given. */
  verified: boolean;
}

/** Verifies a delivery: written from the receiver docs, not shared with the service's code. */
export function verifySignature(rawBody: Buffer, header: string | undefined, secret: string, toleranceSeconds = 300): boolean {
  if (!header) return false;
  const parts = new Map(header.split(",").map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)] as const));
  const t = Number(parts.get("t"));
  if (!Number.isInteger(t) || Math.abs(Date.now() / 1000 - t) > toleranceSeconds) return false;
  const expected = createHmac("sha256", secret).update(`${t}.`).update(rawBody).digest();
  const given = Buffer.from(parts.get("v1") ?? "", "hex");
  return given.length === expected.length && timingSafeEqual(given, expected);
}

export interface Receiver {
  /** `https://127.0.0.1:<port>`. */
  origin: string;
  port: number;
  received: Received[];
  /** Deliveries to one path (each webhook gets its own path). */
  at(path: string): Received[];
  /** Decides the answer per request (a status code, or "hang" to never answer); default 200. */
  script(path: string, answer: (delivery: Received, nth: number) => number | "hang"): void;
  waitFor(path: string, count: number, timeoutMs?: number): Promise<Received[]>;
  close(): Promise<void>;
}

export async function startReceiver(secret: string | ((path: string) => string)): Promise<Receiver> {
  const { cert, key } = await testCert();
  const received: Received[] = [];
  const scripts = new Map<string, (delivery: Received, nth: number) => number | "hang">();
  const secretFor = typeof secret === "string" ? () => secret : secret;
  const server: Server = createServer({ cert, key }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks);
      const path = req.url ?? "/";
      const signature = req.headers["svc-signature"] as string | undefined;
      const delivery: Received = {
        at: performance.now(),
        path,
        eventId: req.headers["svc-event-id"] as string | undefined,
        signature,
        contentType: req.headers["content-type"],
        body: raw.toString("utf8"),
        envelope: JSON.parse(raw.toString("utf8")) as Received["envelope"],
        verified: req.method === "POST" && verifySignature(raw, signature, secretFor(path)),
      };
      received.push(delivery);
      const nth = received.filter((r) => r.path === path).length;
      const answer = delivery.verified ? (scripts.get(path)?.(delivery, nth) ?? 200) : 400;
      if (answer === "hang") return;
      res.statusCode = answer;
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  const at = (path: string) => received.filter((r) => r.path === path);
  return {
    origin: `https://127.0.0.1:${port}`,
    port,
    received,
    at,
    script: (path, answer) => void scripts.set(path, answer),
    async waitFor(path, count, timeoutMs = 10_000) {
      const until = Date.now() + timeoutMs;
      while (at(path).length < count) {
        if (Date.now() > until) throw new Error(`${path}: ${at(path).length} of ${count} deliveries within ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 5));
      }
      return at(path);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
