/**
 * The plain hop: what the network's shape costs by itself, with no money, no protocol rules and
 * no checks. A proxy in the bench's process sends each request over one WebSocket to a hop in the
 * worker's process, which asks that process's upstream over undici (the worker's own client) and
 * sends the answer back: the gateway's path (caller, service, worker's process, upstream) with
 * forwarding alone at each step. Against it, the gateway's figures are the price of the work it
 * does per request; against the plain proxy, the hop's are the price of a worker's process on
 * the path.
 */
import { createServer, type Server, type ServerResponse } from "node:http";
import { Agent, request } from "undici";
import { WebSocket, WebSocketServer, type RawData } from "ws";

/** A request to the hop: the caller's body, forwarded as it came. */
interface Forward {
  id: number;
  body: string;
}
/** The upstream's answer, whole (JSON) or in pieces (a stream: the head, each chunk, the end). */
type Answer =
  | { id: number; status: number; contentType: string; body: string }
  | { id: number; status: number; contentType: string; streaming: true }
  | { id: number; chunk: string }
  | { id: number; end: true }
  | { id: number; failed: string };

/** The hop, in the worker's process: forwards each request to `upstreamUrl` (…/v1) and sends its answer back. */
export async function serveHop(upstreamUrl: string): Promise<{ url: string; close(): Promise<void> }> {
  const agent = new Agent({ connections: 1024 });
  const server = new WebSocketServer({ host: "127.0.0.1", port: 0, perMessageDeflate: false });
  server.on("connection", (socket) => {
    socket.on("message", (data: RawData) => void forward(socket, JSON.parse(String(data)) as Forward));
  });
  const forward = async (socket: WebSocket, { id, body }: Forward): Promise<void> => {
    const send = (answer: Answer) => socket.send(JSON.stringify(answer));
    try {
      const answer = await request(`${upstreamUrl}/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body, dispatcher: agent });
      const contentType = String(answer.headers["content-type"] ?? "application/json");
      if (!contentType.startsWith("text/event-stream")) return send({ id, status: answer.statusCode, contentType, body: await answer.body.text() });
      send({ id, status: answer.statusCode, contentType, streaming: true });
      // A character split across two chunks is decoded whole, with the later one.
      const text = new TextDecoder();
      for await (const chunk of answer.body) send({ id, chunk: text.decode(chunk as Uint8Array, { stream: true }) });
      send({ id, end: true });
    } catch (error) {
      send({ id, failed: String(error) });
    }
  };
  await new Promise<void>((resolve) => server.once("listening", resolve));
  const { port } = server.address() as { port: number };
  return { url: `ws://127.0.0.1:${port}`, close: () => new Promise<void>((resolve) => server.close(() => void agent.close().then(() => resolve()))) };
}

/** The proxy, in the bench's process: one WebSocket to the hop, the answers matched by id. */
export async function startHopProxy(hopUrl: string): Promise<Server> {
  const socket = new WebSocket(hopUrl, { perMessageDeflate: false });
  await new Promise<void>((resolve, reject) => socket.once("open", resolve).once("error", reject));
  const pending = new Map<number, ServerResponse>();
  let nextId = 0;
  socket.on("message", (data: RawData) => {
    const answer = JSON.parse(String(data)) as Answer;
    const res = pending.get(answer.id);
    if (res === undefined) return;
    if ("body" in answer) {
      pending.delete(answer.id);
      res.writeHead(answer.status, { "content-type": answer.contentType }).end(answer.body);
    } else if ("streaming" in answer) res.writeHead(answer.status, { "content-type": answer.contentType });
    else if ("chunk" in answer) res.write(answer.chunk);
    else {
      pending.delete(answer.id);
      if ("end" in answer) res.end();
      else res.destroy(new Error(answer.failed));
    }
  });
  socket.on("close", () => {
    for (const res of pending.values()) res.destroy();
    pending.clear();
  });
  const server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => (body += chunk));
    req.on("end", () => {
      const id = nextId++;
      pending.set(id, res);
      // The load generator drops its connections when a run ends: a forwarded request may be cut.
      res.on("close", () => pending.delete(id));
      socket.send(JSON.stringify({ id, body } satisfies Forward));
    });
  });
  server.on("close", () => socket.close());
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}
