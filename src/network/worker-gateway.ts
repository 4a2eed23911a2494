/**
 * The gateway's end of the worker protocol: a WebSocket endpoint on the gateway's own HTTP server
 * at /v1/workers/connect. Each connection is challenged, probed with a short job of the gateway's
 * own, registered into the worker pool with the catalog models it offers, kept alive by
 * heartbeats, and removed from the pool when it drains, closes, falls silent, floods or keeps
 * failing jobs. Nothing a worker sends can do more than close its own connection.
 */
import { randomBytes } from "node:crypto";
import type { IncomingMessage, Server } from "node:http";
import type { Duplex } from "node:stream";
import proxyAddr from "@fastify/proxy-addr";
import { WebSocket, WebSocketServer, type RawData } from "ws";
import type { Catalog } from "../catalog/index.ts";
import { type Logger, RateLimiter } from "../core/index.ts";
import { ProtocolError, parseWorkerMessage } from "./protocol-parse.ts";
import {
  CLOSE_GRACE_MS,
  closeReason,
  CloseCode,
  DEFAULT_HEARTBEAT_TIMEOUT_MS,
  encode,
  MAX_WORKER_MESSAGE_BYTES,
  PROTOCOL_VERSION,
  WORKER_CONNECT_PATH,
  type GatewayMessage,
  type RefusedModel,
  type WorkerMessage,
} from "./protocol.ts";
import { DEFAULT_COUNT_TIMEOUT_MS, RemoteWorkerHandle } from "./remote-worker.ts";
import { authMessage, verifyEd25519 } from "./worker-auth.ts";
import { DEFAULT_WORKER_LIMITS, MessageBudget, subnetOf, type WorkerLimits } from "./worker-limits.ts";
import type { WorkerPool } from "./worker-pool.ts";
import { DEFAULT_PROBE_TIMEOUT_MS, probeWorker } from "./worker-probe.ts";
import { coalescedWrites } from "./write-coalescing.ts";

export interface WorkerGatewayOptions {
  pool: WorkerPool;
  catalog: Catalog;
  logger: Logger;
  /** Silence after which a worker is dropped and its jobs fail (default 15 s). Heartbeats go every third of it. */
  heartbeatTimeoutMs?: number;
  /** Time a new connection has to answer the challenge (default 10 s). */
  handshakeTimeoutMs?: number;
  /** Time a worker has to count a prompt (default 10 s). */
  countTimeoutMs?: number;
  /**
   * The host workers sign into their answer to the challenge. By default the Host header of each
   * connection, which is what the worker dialed; set it when a proxy rewrites that header.
   */
  publicHost?: string;
  /** Whether a worker's on-chain stake makes it staked; without it every worker is unstaked. */
  isStaked?: (address: string) => Promise<boolean>;
  /** Called once a worker is registered (e.g. to emit `worker.registered`). */
  onRegistered?: (worker: { address: string; models: string[]; staked: boolean }) => void | Promise<void>;
  /** Time a new worker has to finish its probe job (default 30 s). */
  probeTimeoutMs?: number;
  limits?: Partial<WorkerLimits>;
  /**
   * The proxies in front of the gateway (addresses or CIDR ranges) whose X-Forwarded-For names
   * the worker's address, which the per-address and per-subnet limits count; none by default.
   */
  trustProxy?: string[];
}

export class WorkerGateway {
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: MAX_WORKER_MESSAGE_BYTES });
  private readonly connections = new Set<WorkerConnection>();
  /** The registered connection of each address. */
  private readonly byAddress = new Map<string, WorkerConnection>();
  private closing = false;
  readonly heartbeatTimeoutMs: number;
  private readonly trustsProxy: ((address: string, hop: number) => boolean) | undefined;
  readonly limits: WorkerLimits;
  private readonly handshakes: RateLimiter;
  private readonly subnetHandshakes: RateLimiter;
  /** Connections per IP that have not been admitted yet. */
  private readonly pending = new Map<string, number>();

  constructor(private readonly options: WorkerGatewayOptions) {
    this.heartbeatTimeoutMs = options.heartbeatTimeoutMs ?? DEFAULT_HEARTBEAT_TIMEOUT_MS;
    this.limits = { ...DEFAULT_WORKER_LIMITS, ...options.limits };
    this.handshakes = new RateLimiter({ ratePerSecond: this.limits.handshakesPerSecondPerIp, burst: this.limits.handshakeBurstPerIp });
    this.subnetHandshakes = new RateLimiter({ ratePerSecond: this.limits.handshakesPerSecondPerSubnet, burst: this.limits.handshakeBurstPerSubnet });
    this.trustsProxy = options.trustProxy?.length ? proxyAddr.compile(options.trustProxy) : undefined;
    options.pool.onUnfit((worker, reason) => {
      this.logger.warn({ worker: worker.address, reason }, "worker dropped for failing jobs");
      void this.byAddress.get(worker.address)?.drop(CloseCode.unfit, `dropped for failing or stalling jobs: ${reason}`);
    });
  }

  /** Serve the endpoint on `server`'s upgrade requests; every other upgrade is answered 404. */
  attach(server: Server): void {
    server.on("upgrade", (request: IncomingMessage, socket: Duplex, head: Buffer) => this.upgrade(request, socket, head));
  }

  /** Stop accepting workers and close every connection (workers reconnect to the next gateway). */
  async close(): Promise<void> {
    this.closing = true;
    const closed = [...this.connections].map((c) => c.drop(CloseCode.goingAway, "the gateway is shutting down"));
    await Promise.all(closed);
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
  }

  /** The worker's address: the socket's, or behind a trusted proxy the one it forwarded. */
  private peerOf(request: IncomingMessage): string {
    if (!this.trustsProxy) return request.socket.remoteAddress ?? "unknown";
    return proxyAddr(request, this.trustsProxy);
  }

  private upgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on("error", () => undefined);
    const path = new URL(request.url ?? "/", "http://gateway").pathname;
    if (path !== WORKER_CONNECT_PATH) return refuseUpgrade(socket, 404, "Not Found");
    if (this.closing) return refuseUpgrade(socket, 503, "Service Unavailable");
    const peer = this.peerOf(request);
    const retryAfter = Math.max(this.handshakes.take(peer), this.subnetHandshakes.take(subnetOf(peer)));
    if (retryAfter > 0 || (this.pending.get(peer) ?? 0) >= this.limits.pendingPerIp) {
      return refuseUpgrade(socket, 429, "Too Many Requests", `Retry-After: ${Math.max(1, retryAfter)}\r\n`);
    }
    this.wss.handleUpgrade(request, socket, head, (ws) => {
      // Counted only once the upgrade succeeded: a failed one never calls back to release it.
      this.pending.set(peer, (this.pending.get(peer) ?? 0) + 1);
      const host = this.options.publicHost ?? request.headers.host ?? "";
      const connection = new WorkerConnection(ws, socket, host, this, peer);
      this.connections.add(connection);
    });
  }

  /** A connection from `peer` was admitted or went away before: it no longer counts as pending. */
  settledPending(peer: string): void {
    const left = (this.pending.get(peer) ?? 1) - 1;
    if (left > 0) this.pending.set(peer, left);
    else this.pending.delete(peer);
  }

  // What connections ask of the gateway.

  get pool(): WorkerPool {
    return this.options.pool;
  }

  get logger(): Logger {
    return this.options.logger;
  }

  get handshakeTimeoutMs(): number {
    return this.options.handshakeTimeoutMs ?? 10_000;
  }

  get countTimeoutMs(): number {
    return this.options.countTimeoutMs ?? DEFAULT_COUNT_TIMEOUT_MS;
  }

  get probeTimeoutMs(): number {
    return this.options.probeTimeoutMs ?? DEFAULT_PROBE_TIMEOUT_MS;
  }

  /** Which offered models the catalog approves, and why the others are refused. */
  screen(models: readonly { id: string; contextWindow: number }[]): { accepted: { id: string; contextWindow: number }[]; refused: RefusedModel[] } {
    const accepted: { id: string; contextWindow: number }[] = [];
    const refused: RefusedModel[] = [];
    const seen = new Set<string>();
    for (const offer of models) {
      if (seen.has(offer.id)) refused.push({ id: offer.id, reason: "offered twice" });
      else if (!this.options.catalog.get(offer.id)) refused.push({ id: offer.id, reason: "not in this gateway's catalog of approved models" });
      else accepted.push(offer);
      seen.add(offer.id);
    }
    return { accepted, refused };
  }

  /**
   * A connection proved its key and passed its probes: it takes over the address from any earlier
   * connection, its probes' times to first token its first latency samples.
   */
  registered(connection: WorkerConnection, handle: RemoteWorkerHandle, firstTokenMs: number[]): void {
    const previous = this.byAddress.get(handle.address);
    this.byAddress.set(handle.address, connection);
    if (previous && previous !== connection) void previous.drop(CloseCode.replaced, "replaced by a newer connection with the same key");
    this.options.pool.add(handle, firstTokenMs);
    void Promise.resolve(this.options.onRegistered?.({ address: handle.address, models: handle.models(), staked: handle.staked })).catch((error: unknown) =>
      this.logger.error({ err: error, worker: handle.address }, "worker registration hook failed"),
    );
  }

  /**
   * Whether `peer`'s subnet already has as many registered workers on probation as it may, not
   * counting `address` itself (a reconnection).
   */
  subnetOnProbationFull(peer: string, address: string): boolean {
    const subnet = subnetOf(peer);
    let count = 0;
    for (const [registered, connection] of this.byAddress) {
      if (registered !== address && subnetOf(connection.peer) === subnet && this.options.pool.vetting(registered) === "probation") count++;
    }
    return count >= this.limits.probationPerSubnet;
  }

  /** A stake lookup that fails counts as unstaked: the worker still serves, at the default share. */
  async stakeOf(address: string): Promise<boolean> {
    if (!this.options.isStaked) return false;
    try {
      return await this.options.isStaked(address);
    } catch (error) {
      this.logger.warn({ err: error, worker: address }, "could not read the worker's stake; treating it as unstaked");
      return false;
    }
  }

  forget(connection: WorkerConnection, handle: RemoteWorkerHandle | undefined): void {
    this.connections.delete(connection);
    if (!handle) return;
    this.options.pool.remove(handle.address, handle);
    if (this.byAddress.get(handle.address) === connection) this.byAddress.delete(handle.address);
  }

  /** A worker that drains keeps its connection for its running jobs but gets no new ones. */
  stopRouting(handle: RemoteWorkerHandle): void {
    this.options.pool.remove(handle.address, handle);
  }
}

function rawSize(data: RawData): number {
  if (Array.isArray(data)) return data.reduce((sum, chunk) => sum + chunk.length, 0);
  return data instanceof ArrayBuffer ? data.byteLength : data.length;
}

function refuseUpgrade(socket: Duplex, status: number, text: string, headers = ""): void {
  socket.end(`HTTP/1.1 ${status} ${text}\r\nConnection: close\r\n${headers}Content-Length: 0\r\n\r\n`);
}

/** One worker's connection, from the challenge until it closes. */
class WorkerConnection {
  private readonly challenge = randomBytes(32).toString("base64url");
  private handle: RemoteWorkerHandle | undefined;
  /** Between a valid-looking hello and the worker's entry in the pool (the stake lookup). */
  private registering = false;
  private draining = false;
  /** Passed its probe and joined the pool; until then it counts against its IP's pending connections. */
  private admitted = false;
  private readonly budget: MessageBudget;
  private lastHeardAtMs = Date.now();
  private readonly handshakeTimer: NodeJS.Timeout;
  private readonly heartbeatTimer: NodeJS.Timeout;
  private dropped: Promise<void> | undefined;
  private readonly beforeWrite: () => void;

  constructor(
    private readonly ws: WebSocket,
    socket: Duplex,
    private readonly host: string,
    private readonly gateway: WorkerGateway,
    readonly peer: string,
  ) {
    this.beforeWrite = coalescedWrites(socket, () => (this.handle?.running ?? 0) > 1);
    const timeoutMs = gateway.heartbeatTimeoutMs;
    const intervalMs = Math.max(10, Math.floor(timeoutMs / 3));
    this.budget = new MessageBudget(gateway.limits);
    ws.on("message", (data, isBinary) => this.onMessage(data, isBinary));
    ws.on("close", (code, reason) => void this.drop(code, `connection closed (${code}${reason.length > 0 ? `: ${reason.toString()}` : ""})`));
    // 'close' follows every error; the error itself (a bad frame, a reset) needs no more handling.
    ws.on("error", (error) => gateway.logger.debug({ err: error, peer: this.peer }, "worker connection error"));
    this.handshakeTimer = setTimeout(
      () => void this.drop(CloseCode.timeout, `no hello within ${gateway.handshakeTimeoutMs} ms of the challenge`),
      gateway.handshakeTimeoutMs,
    );
    this.heartbeatTimer = setInterval(() => {
      if (Date.now() - this.lastHeardAtMs > timeoutMs) {
        void this.drop(CloseCode.timeout, `no heartbeat for ${timeoutMs} ms`);
        return;
      }
      this.send({ type: "heartbeat" });
    }, intervalMs);
    this.send({ type: "challenge", protocol: PROTOCOL_VERSION, challenge: this.challenge, heartbeatIntervalMs: intervalMs, heartbeatTimeoutMs: timeoutMs });
  }

  /**
   * Ends the connection: the worker leaves the pool at once and its jobs fail, without waiting
   * for the peer to acknowledge the close (a silent peer never would).
   */
  drop(code: number, reason: string): Promise<void> {
    if (this.dropped) return this.dropped;
    clearTimeout(this.handshakeTimer);
    clearInterval(this.heartbeatTimer);
    if (!this.admitted) this.gateway.settledPending(this.peer);
    this.gateway.forget(this, this.handle);
    if (this.handle) {
      this.handle.lost(reason);
      const level = code === CloseCode.normal || code === CloseCode.goingAway ? "info" : "warn";
      this.gateway.logger[level]({ worker: this.handle.address, code, reason }, "worker left");
    }
    this.dropped = new Promise<void>((resolve) => {
      if (this.ws.readyState === WebSocket.CLOSED) return resolve();
      const grace = setTimeout(() => this.ws.terminate(), CLOSE_GRACE_MS);
      this.ws.once("close", () => {
        clearTimeout(grace);
        resolve();
      });
      if (this.ws.readyState === WebSocket.OPEN) this.ws.close(code, closeReason(reason));
    });
    return this.dropped;
  }

  private send(message: GatewayMessage): void {
    if (this.ws.readyState !== WebSocket.OPEN) return;
    this.beforeWrite();
    this.ws.send(encode(message));
  }

  private onMessage(data: RawData, isBinary: boolean): void {
    if (this.dropped) return;
    this.lastHeardAtMs = Date.now();
    if (!this.budget.take(rawSize(data))) {
      this.gateway.logger.warn({ worker: this.handle?.address, peer: this.peer }, "worker connection flooded; dropped");
      void this.drop(CloseCode.tooManyMessages, "more messages than a worker's jobs explain");
      // Stop reading what it keeps sending while the close completes.
      this.ws.pause();
      return;
    }
    try {
      if (isBinary) throw new ProtocolError("messages are JSON text, not binary");
      this.handleMessage(parseWorkerMessage(data.toString()));
    } catch (error) {
      if (error instanceof ProtocolError) {
        this.gateway.logger.warn({ worker: this.handle?.address, peer: this.peer, reason: error.message }, "malformed worker message");
        void this.drop(CloseCode.malformed, `malformed message: ${error.message}`);
      } else {
        this.gateway.logger.error({ err: error, worker: this.handle?.address }, "worker message handling failed");
        void this.drop(CloseCode.internalError, "the gateway failed to handle a message");
      }
    }
  }

  private handleMessage(message: WorkerMessage): void {
    if (!this.handle) {
      if (this.registering) {
        // The stake is being read from the chain; a worker may already be heartbeating.
        if (message.type === "heartbeat") return;
        throw new ProtocolError(`${message.type} before registration completed`);
      }
      if (message.type !== "hello") throw new ProtocolError(`expected hello, got ${message.type}`);
      this.registering = true;
      void this.register(message).catch((error: unknown) => {
        this.gateway.logger.error({ err: error, peer: this.peer }, "worker registration failed");
        void this.drop(CloseCode.internalError, "the gateway failed to register the worker");
      });
      return;
    }
    switch (message.type) {
      case "hello":
        throw new ProtocolError("hello was already received");
      case "heartbeat":
        return;
      case "drain":
        if (!this.draining) {
          this.draining = true;
          this.gateway.stopRouting(this.handle);
          this.gateway.logger.info({ worker: this.handle.address, running: this.handle.running }, "worker draining");
        }
        return;
      default:
        this.handle.receive(message);
    }
  }

  private async register(hello: Extract<WorkerMessage, { type: "hello" }>): Promise<void> {
    clearTimeout(this.handshakeTimer);
    if (hello.protocol !== PROTOCOL_VERSION) {
      void this.drop(CloseCode.unsupportedProtocol, `protocol ${hello.protocol} is not supported; this gateway speaks ${PROTOCOL_VERSION}`);
      return;
    }
    const signature = new Uint8Array(Buffer.from(hello.signature, "base64"));
    if (!verifyEd25519(hello.address, authMessage(this.host, this.challenge), signature)) {
      this.gateway.logger.warn({ address: hello.address, peer: this.peer }, "worker refused: bad challenge signature");
      void this.drop(CloseCode.badSignature, `the challenge signature does not verify for address ${hello.address.slice(0, 64)}`);
      return;
    }
    const { accepted, refused } = this.gateway.screen(hello.models);
    if (accepted.length === 0) {
      const reason = "none of the offered models is in this gateway's catalog";
      this.send({ type: "refused", reason, refused });
      this.gateway.logger.warn({ address: hello.address, refused }, "worker refused: no acceptable model");
      void this.drop(CloseCode.noAcceptableModel, reason);
      return;
    }
    const staked = await this.gateway.stakeOf(hello.address);
    if (this.dropped) return;
    const handle = new RemoteWorkerHandle(hello.address, accepted, hello.concurrency, (m) => this.send(m), this.gateway.countTimeoutMs, staked);
    // Messages now reach the handle, which runs the probe jobs like any other.
    this.handle = handle;
    this.budget.setSlots(hello.concurrency);
    const probed = await this.probe(handle, accepted.map((m) => m.id));
    if (this.dropped || this.draining) return;
    if ("failure" in probed) {
      this.gateway.logger.warn({ worker: handle.address, peer: this.peer, reason: probed.failure }, "worker refused: failed its probe");
      void this.drop(CloseCode.unfit, `failed the gateway's probe: ${probed.failure}`);
      return;
    }
    if (!staked && this.gateway.pool.vetting(handle.address) === "probation" && this.gateway.subnetOnProbationFull(this.peer, handle.address)) {
      this.gateway.logger.warn({ worker: handle.address, peer: this.peer }, "worker refused: its subnet has as many workers on probation as it may");
      void this.drop(CloseCode.subnetOnProbation, "its network already has as many workers on probation as a gateway takes; retry later, or stake");
      return;
    }
    this.admitted = true;
    this.gateway.settledPending(this.peer);
    this.gateway.registered(this, handle, probed.firstTokenMs);
    this.send({ type: "registered", address: handle.address, models: accepted, refused });
    this.gateway.logger.info({ worker: handle.address, models: accepted.map((m) => m.id), refused, concurrency: hello.concurrency, staked, peer: this.peer }, "worker registered");
  }

  /** Probes every offered model at once: the first failure's reason, or the probes' times to first token. */
  private async probe(handle: RemoteWorkerHandle, models: string[]): Promise<{ failure: string } | { firstTokenMs: number[] }> {
    const results = await Promise.all(models.map((model) => probeWorker(handle, model, this.gateway.probeTimeoutMs)));
    const firstTokenMs: number[] = [];
    for (const [i, result] of results.entries()) {
      if (!result.ok) return { failure: `${models[i]}: ${result.reason}` };
      firstTokenMs.push(result.firstTokenMs);
    }
    return { firstTokenMs };
  }
}
