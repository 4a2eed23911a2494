/**
 * HTTP/1.1 over a bare socket, for requests `fetch` refuses to send (two Authorization headers, a
 * 20 KB header, a broken request line, a raw `%00`): one request per connection, its answer parsed.
 */
import net from "node:net";

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export function parseRawResponse(text: string): RawResponse {
  // An interim `100 Continue` (answering `Expect: 100-continue`) precedes the real answer.
  while (/^HTTP\/1\.1 1\d\d /.test(text) && text.includes("\r\n\r\n")) text = text.slice(text.indexOf("\r\n\r\n") + 4);
  const split = text.indexOf("\r\n\r\n");
  const head = split < 0 ? text : text.slice(0, split);
  const [statusLine = "", ...lines] = head.split("\r\n");
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(":");
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  let body = split < 0 ? "" : text.slice(split + 4);
  // Chunked bodies (streams) are joined back together.
  if (headers["transfer-encoding"] === "chunked") {
    let joined = "";
    for (let rest = body; ; ) {
      const lineEnd = rest.indexOf("\r\n");
      const size = parseInt(rest.slice(0, lineEnd), 16);
      if (!(size > 0)) break;
      joined += rest.slice(lineEnd + 2, lineEnd + 2 + size);
      rest = rest.slice(lineEnd + 2 + size + 2);
    }
    body = joined;
  }
  return { status: Number(statusLine.split(" ")[1] ?? 0), headers, body };
}

/** Send `request` as is (with `Connection: close` it should hold) and read until the server closes. */
export function rawRequest(baseUrl: string, request: string | Buffer, timeoutMs = 20_000): Promise<RawResponse> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = net.connect(Number(port), hostname, () => socket.write(request));
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within ${timeoutMs} ms to ${String(request).slice(0, 80)}`));
    }, timeoutMs);
    socket.on("data", (d: Buffer) => chunks.push(d));
    socket.on("error", () => undefined);
    socket.on("close", () => {
      clearTimeout(timer);
      resolve(parseRawResponse(Buffer.concat(chunks).toString("utf8")));
    });
  });
}

/** A request line, headers and optional body (`chunked`: as one chunk), closed after the answer. */
export function httpText(method: string, path: string, headers: Record<string, string> | [string, string][] = [], body = "", chunked = false): string {
  const list = Array.isArray(headers) ? headers : Object.entries(headers);
  const lines = [`${method} ${path} HTTP/1.1`, "Host: localhost", ...list.map(([k, v]) => `${k}: ${v}`), "Connection: close"];
  if (chunked) {
    lines.push("Transfer-Encoding: chunked");
    const chunk = body === "" ? "" : `${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n`;
    return `${lines.join("\r\n")}\r\n\r\n${chunk}0\r\n\r\n`;
  }
  if (body !== "") lines.push(`Content-Length: ${Buffer.byteLength(body)}`);
  return `${lines.join("\r\n")}\r\n\r\n${body}`;
}
