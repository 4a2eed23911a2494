/**
 * A loopback TCP proxy that loses answers (FAULT INJECTION): for the first `drops` connections it
 * forwards the caller's request, reads the service's whole answer, then closes the caller's
 * connection without passing a byte of it on. That is a network fault between a caller and the
 * gateway after the gateway answered, which cannot be caused otherwise on loopback. Later
 * connections pass through untouched. Every request's headers are kept, to show what was retried.
 */
import net from "node:net";

export interface DroppingProxy {
  /** The proxy's origin, standing in for the service's. */
  origin: string;
  /** Each request's headers (lowercased names), in arrival order. */
  requests: Record<string, string>[];
  /** Answers read from the service and never delivered. */
  dropped: number;
  close(): Promise<void>;
}

function headersOf(head: string): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const line of head.split("\r\n").slice(1)) {
    const colon = line.indexOf(":");
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return headers;
}

/** Whether `data` holds one whole HTTP answer: its head and a body of its content-length, or a chunked body's end. */
function wholeAnswer(data: string): boolean {
  const split = data.indexOf("\r\n\r\n");
  if (split < 0) return false;
  const headers = headersOf(data.slice(0, split));
  const body = data.slice(split + 4);
  if (headers["transfer-encoding"] === "chunked") return /(^|\r\n)0\r\n(?:[^\r\n]+\r\n)*\r\n$/.test(body);
  return Buffer.byteLength(body) >= Number(headers["content-length"] ?? 0);
}

/** Notes each request head passing from a caller, as it arrives. */
function noteRequests(into: Record<string, string>[]): (chunk: Buffer) => void {
  let pending = "";
  return (chunk) => {
    pending += chunk.toString("latin1");
    for (let split = pending.indexOf("\r\n\r\n"); split >= 0; split = pending.indexOf("\r\n\r\n")) {
      const headers = headersOf(pending.slice(0, split));
      into.push(headers);
      pending = pending.slice(split + 4 + Number(headers["content-length"] ?? 0));
    }
  };
}

export async function startDroppingProxy(target: string, drops = 1): Promise<DroppingProxy> {
  const { hostname, port } = new URL(target);
  const sockets = new Set<net.Socket>();
  const proxy: DroppingProxy = { origin: "", requests: [], dropped: 0, close: async () => undefined };
  let connections = 0;
  const server = net.createServer((caller) => {
    const dropping = connections++ < drops;
    const upstream = net.connect(Number(port), hostname);
    for (const s of [caller, upstream]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => undefined);
    }
    const note = noteRequests(proxy.requests);
    caller.on("data", (chunk: Buffer) => {
      note(chunk);
      upstream.write(chunk);
    });
    caller.on("close", () => upstream.destroy());
    upstream.on("close", () => caller.destroy());
    if (!dropping) return void upstream.on("data", (chunk: Buffer) => caller.write(chunk));
    let answer = "";
    upstream.on("data", (chunk: Buffer) => {
      answer += chunk.toString("latin1");
      if (!wholeAnswer(answer)) return;
      proxy.dropped++;
      caller.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address() as net.AddressInfo;
  proxy.origin = `http://127.0.0.1:${address.port}`;
  proxy.close = () =>
    new Promise((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    });
  return proxy;
}
