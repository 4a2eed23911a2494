/**
 * A worker's end of the worker protocol: it dials out to a gateway (so it can sit behind NAT),
 * answers the challenge with its key, offers its models, runs the jobs it is sent on a WorkerNode
 * (which signs each output's proof) and streams them back. It reconnects with backoff whenever
 * the connection is lost, and on drain lets its running jobs finish before it leaves.
 */
import { WebSocket, type RawData } from "ws";
import type { Signer } from "../core/index.ts";
import type { Engine } from "../inference/index.ts";
import {
  authMessage,
  CLOSE_GRACE_MS,
  closeReason,
  CloseCode,
  coalescedWrites,
  connectUrl,
  encode,
  FATAL_CLOSE_CODES,
  JobRequestError,
  MAX_GATEWAY_MESSAGE_BYTES,
  parseGatewayMessage,
  PROTOCOL_VERSION,
  ProtocolError,
  UnknownMessageError,
  type GatewayMessage,
  type JobFault,
  type ModelOffer,
  type RefusedModel,
  type WorkerMessage,
} from "../network/index.ts";
import { Backoff, type BackoffOptions } from "../core/index.ts";
import { HeldOutput } from "./held-output.ts";
import { WorkerNode } from "./worker-node.ts";

const DEFAULT_DRAIN_TIMEOUT_MS = 30_000;
/** After its last job, how long a draining worker waits for the settlement notices still due. */
const SETTLEMENT_WAIT_MS = 2_000;
/** A settlement takes well under this; a notice later than it is not coming (the proof failed on-chain). */
const SETTLEMENT_EXPECTED_WITHIN_MS = 60_000;

export type WorkerClientEvent =
  | { type: "connecting"; url: string }
  | { type: "registered"; address: string; models: ModelOffer[]; refused: RefusedModel[] }
  /** The connection ended (or, with `wasConnected` false, could not be made); another attempt follows. */
  | { type: "disconnected"; wasConnected: boolean; code: number; reason: string; retryInMs: number }
  /** The gateway refused this worker for good (bad key, no acceptable model...): no more retries. */
  | { type: "refused"; code: number; reason: string; refused: RefusedModel[] }
  | { type: "settled"; jobId: string; earnedBaseUnits: bigint; totalBaseUnits: bigint; settlementTx: string };

export interface WorkerClientOptions {
  /** The gateway's origin, such as `http://127.0.0.1:8080`. */
  gateway: string;
  signer: Signer;
  engines: ReadonlyMap<string, Engine>;
  /** Jobs run at once, as declared to the gateway. */
  concurrency: number;
  reconnect?: BackoffOptions;
  onEvent?: (event: WorkerClientEvent) => void;
}

export class WorkerRefusedError extends Error {
  constructor(readonly code: number, readonly reason: string, readonly refused: RefusedModel[]) {
    super(`the gateway refused this worker (${code}): ${reason}`);
    this.name = "WorkerRefusedError";
  }
}

interface RunningJob {
  abort: AbortController;
  finished: Promise<void>;
}

/** One connection to the gateway, with what belongs to it alone. */
interface Link {
  ws: WebSocket;
  /** Jobs belong to the connection that brought them; a later connection must not carry their output. */
  jobs: Set<string>;
  lastHeardAtMs: number;
  heartbeat: NodeJS.Timeout | undefined;
  opened: boolean;
  lastError: string | undefined;
  /** The reasons a `refused` message gave, which a close frame is too short to hold. */
  refusal: { reason: string; refused: RefusedModel[] } | undefined;
  send(message: WorkerMessage): void;
}

interface Registration {
  models: ModelOffer[];
  refused: RefusedModel[];
}

export class WorkerClient {
  readonly address: string;
  private readonly url: URL;
  private readonly node: WorkerNode;
  private readonly backoff: Backoff;
  private ws: WebSocket | undefined;
  private registration: Registration | undefined;
  private readonly running = new Map<string, RunningJob>();
  /** Jobs finished with a proof whose settlement notice has not come yet, with when they finished. */
  private readonly unsettled = new Map<string, number>();
  private onSettledChange: (() => void) | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private stopped = false;
  private failure: WorkerRefusedError | undefined;
  private waiters: Array<{ resolve(r: Registration): void; reject(e: Error): void }> = [];
  private totalEarnedBaseUnits = 0n;

  constructor(private readonly options: WorkerClientOptions) {
    if (!Number.isInteger(options.concurrency) || options.concurrency < 1) throw new RangeError("concurrency must be a positive integer");
    if (options.engines.size === 0) throw new RangeError("a worker serves at least one model");
    this.address = options.signer.address;
    this.url = connectUrl(options.gateway);
    this.node = new WorkerNode(options.signer, options.engines);
    this.backoff = new Backoff(options.reconnect);
  }

  /** What settlement notices have reported this worker earned, in USDC base units. */
  get earnedBaseUnits(): bigint {
    return this.totalEarnedBaseUnits;
  }

  get runningJobs(): number {
    return this.running.size;
  }

  /** Start dialing the gateway; reconnects on its own until drain() or close(). */
  start(): this {
    if (!this.ws && !this.reconnectTimer && !this.stopped) this.connect();
    return this;
  }

  /** Resolves once registered (at once if it is now); rejects if the gateway refuses this worker. */
  registered(): Promise<Registration> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.registration) return Promise.resolve(this.registration);
    if (this.stopped) return Promise.reject(new Error("the worker was stopped"));
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  /**
   * Leave gracefully: tell the gateway to send nothing new, let the running jobs finish (up to
   * `timeoutMs`, then they are stopped and the gateway fails them, charging nothing), wait a
   * moment for their settlement notices, and close.
   */
  async drain(timeoutMs = DEFAULT_DRAIN_TIMEOUT_MS): Promise<void> {
    if (this.stopped) return this.close();
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    this.send({ type: "drain" });
    const finished = Promise.allSettled([...this.running.values()].map((j) => j.finished)).then(() => true);
    const allFinished = await Promise.race([finished, delay(timeoutMs).then(() => false)]);
    this.forgetOverdueSettlements();
    // A job still running past the bound is stopped now, not after the wait for earlier jobs' notices.
    if (allFinished && this.ws?.readyState === WebSocket.OPEN && this.unsettled.size > 0) {
      await Promise.race([new Promise<void>((resolve) => (this.onSettledChange = () => this.unsettled.size === 0 && resolve())), delay(SETTLEMENT_WAIT_MS)]);
    }
    await this.close();
  }

  /** Stop at once: running jobs are abandoned (the gateway fails them, charging nothing). */
  async close(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = undefined;
    for (const job of this.running.values()) job.abort.abort();
    const ws = this.ws;
    if (ws && ws.readyState !== WebSocket.CLOSED) {
      const closed = new Promise<void>((resolve) => ws.once("close", () => resolve()));
      const grace = setTimeout(() => ws.terminate(), CLOSE_GRACE_MS);
      if (ws.readyState === WebSocket.OPEN) ws.close(CloseCode.normal, "worker stopped");
      else ws.terminate();
      await closed;
      clearTimeout(grace);
    }
    this.rejectWaiters(new Error("the worker was stopped"));
  }

  private emit(event: WorkerClientEvent): void {
    this.options.onEvent?.(event);
  }

  private connect(): void {
    this.reconnectTimer = undefined;
    this.emit({ type: "connecting", url: this.url.href });
    const ws = new WebSocket(this.url, { maxPayload: MAX_GATEWAY_MESSAGE_BYTES, handshakeTimeout: 10_000, perMessageDeflate: false });
    this.ws = ws;
    let beforeWrite = () => {};
    const link: Link = {
      ws,
      jobs: new Set(),
      lastHeardAtMs: Date.now(),
      heartbeat: undefined,
      opened: false,
      lastError: undefined,
      refusal: undefined,
      send: (message) => {
        if (ws.readyState !== WebSocket.OPEN) return;
        beforeWrite();
        ws.send(encode(message));
      },
    };
    ws.once("upgrade", (response) => (beforeWrite = coalescedWrites(response.socket, () => link.jobs.size > 1)));
    ws.on("message", (data: RawData, isBinary: boolean) => this.receive(link, data, isBinary));
    // 'close' follows every error (refused connection, reset, bad frame) and decides what comes next.
    ws.on("open", () => (link.opened = true));
    ws.on("error", (error) => (link.lastError = error.message));
    ws.on("close", (code, reason) => this.closed(link, code, reason));
  }

  private receive(link: Link, data: RawData, isBinary: boolean): void {
    link.lastHeardAtMs = Date.now();
    try {
      if (isBinary) throw new ProtocolError("messages are JSON text, not binary");
      this.handleMessage(link, parseGatewayMessage(data.toString()));
    } catch (error) {
      if (this.refuseOne(error, link.send)) return;
      const reason = error instanceof ProtocolError ? `malformed message: ${error.message}` : `the worker failed to handle a message: ${errorText(error)}`;
      link.ws.close(error instanceof ProtocolError ? CloseCode.malformed : CloseCode.internalError, closeReason(reason));
    }
  }

  private handleMessage(link: Link, message: GatewayMessage): void {
    switch (message.type) {
      case "challenge":
        return this.answerChallenge(link, message);
      case "registered":
        this.backoff.reset();
        this.registration = { models: message.models, refused: message.refused };
        this.emit({ type: "registered", address: message.address, models: message.models, refused: message.refused });
        for (const waiter of this.waiters.splice(0)) waiter.resolve(this.registration);
        return;
      case "refused":
        link.refusal = { reason: message.reason, refused: message.refused };
        return;
      case "job":
        if (link.jobs.has(message.jobId) || this.running.has(message.jobId)) throw new ProtocolError(`job ${message.jobId} was sent twice`);
        link.jobs.add(message.jobId);
        this.runJob(message, link.send, () => link.jobs.delete(message.jobId));
        return;
      case "cancel":
        this.running.get(message.jobId)?.abort.abort();
        return;
      case "count":
        return this.count(link, message);
      case "settled":
        return this.noteSettled(message);
      case "sign_settlement":
        return this.signSettlement(link, message);
      case "heartbeat":
        return;
    }
  }

  /** Proves this worker's key, offers its models and starts heartbeating at the pace the gateway asked. */
  private answerChallenge(link: Link, challenge: Extract<GatewayMessage, { type: "challenge" }>): void {
    if (challenge.protocol !== PROTOCOL_VERSION) throw new ProtocolError(`the gateway speaks protocol ${challenge.protocol}; this worker speaks ${PROTOCOL_VERSION}`);
    const signature = Buffer.from(this.options.signer.sign(authMessage(this.url.host, challenge.challenge))).toString("base64");
    const models = [...this.options.engines].map(([id, engine]) => ({ id, contextWindow: engine.contextWindow }));
    link.send({ type: "hello", protocol: PROTOCOL_VERSION, address: this.address, signature, models, concurrency: this.options.concurrency });
    clearInterval(link.heartbeat);
    link.heartbeat = setInterval(() => {
      if (Date.now() - link.lastHeardAtMs > challenge.heartbeatTimeoutMs) {
        link.ws.terminate();
        return;
      }
      link.send({ type: "heartbeat" });
    }, challenge.heartbeatIntervalMs);
  }

  /** Signs a settlement of jobs this worker finished; the node refuses any it did not. */
  private signSettlement(link: Link, message: Extract<GatewayMessage, { type: "sign_settlement" }>): void {
    const jobs = message.jobs.map((job) => ({ ...job, charge: BigInt(job.charge) }));
    this.node.signSettlement({ table: message.table, jobs }).then(
      (signature) => link.send({ type: "settlement_signature", requestId: message.requestId, signature: Buffer.from(signature).toString("base64") }),
      (error: unknown) => link.send({ type: "settlement_error", requestId: message.requestId, message: errorText(error) }),
    );
  }

  private count(link: Link, message: Extract<GatewayMessage, { type: "count" }>): void {
    const engine = this.options.engines.get(message.model);
    const counted = engine ? engine.countPromptTokens(message.messages) : Promise.reject(new Error(`this worker does not serve ${message.model}`));
    counted.then(
      (tokens) => link.send({ type: "count_result", requestId: message.requestId, tokens }),
      (error: unknown) => link.send({ type: "count_error", requestId: message.requestId, message: errorText(error) }),
    );
  }

  private noteSettled(message: Extract<GatewayMessage, { type: "settled" }>): void {
    const earnedBaseUnits = BigInt(message.earnedBaseUnits);
    this.totalEarnedBaseUnits += earnedBaseUnits;
    this.unsettled.delete(message.jobId);
    this.emit({ type: "settled", jobId: message.jobId, earnedBaseUnits, totalBaseUnits: this.totalEarnedBaseUnits, settlementTx: message.settlementTx });
    this.onSettledChange?.();
  }

  /** The connection ended: give up for good after a fatal close, otherwise dial again after a backoff. */
  private closed(link: Link, code: number, reasonBuffer: Buffer): void {
    clearInterval(link.heartbeat);
    if (this.ws === link.ws) this.ws = undefined;
    this.registration = undefined;
    // The gateway has failed whatever it sent on this connection; finishing them helps nobody.
    for (const jobId of link.jobs) this.running.get(jobId)?.abort.abort();
    const reason = link.refusal?.reason ?? (reasonBuffer.length > 0 ? reasonBuffer.toString() : (link.lastError ?? ""));
    if (FATAL_CLOSE_CODES.has(code)) {
      const refused = link.refusal?.refused ?? [];
      this.failure = new WorkerRefusedError(code, reason, refused);
      this.stopped = true;
      this.emit({ type: "refused", code, reason, refused });
      this.rejectWaiters(this.failure);
      return;
    }
    if (this.stopped) return;
    const retryInMs = this.backoff.next();
    this.emit({ type: "disconnected", wasConnected: link.opened, code, reason, retryInMs });
    this.reconnectTimer = setTimeout(() => this.connect(), retryInMs);
  }

  /**
   * A job or count this worker cannot read fails alone, answered as the request's fault; a message
   * type it does not know is skipped. Either way an honest worker keeps its connection: the
   * gateway may be newer, or a request may carry what this worker's parser refuses.
   */
  private refuseOne(error: unknown, send: (m: WorkerMessage) => void): boolean {
    if (error instanceof UnknownMessageError) return true;
    if (!(error instanceof ProtocolError) || error.about === undefined) return false;
    const message = `this worker cannot read the request: ${error.message}`;
    if ("jobId" in error.about) send({ type: "job_error", jobId: error.about.jobId, message, fault: "request" });
    else send({ type: "count_error", requestId: error.about.requestId, message });
    return true;
  }

  private runJob(message: Extract<GatewayMessage, { type: "job" }>, send: (m: WorkerMessage) => void, forget: () => void): void {
    const abort = new AbortController();
    const { jobId } = message;
    const sendDelta = (text: string) => send({ type: "delta", jobId, text });
    const held = message.stream === false ? new HeldOutput(sendDelta) : undefined;
    const finished = (async () => {
      let answered = false;
      try {
        for await (const event of this.node.run({ jobId, model: message.model, request: message.request }, abort.signal)) {
          if (event.type === "delta") {
            if (held) held.add(event.text);
            else sendDelta(event.text);
          } else {
            this.forgetOverdueSettlements();
            this.unsettled.set(jobId, Date.now());
            const text = held?.take();
            const signature = Buffer.from(event.signature).toString("base64");
            send({ type: "done", jobId, finishReason: event.finishReason, usage: event.usage, outputHash: event.outputHash, signature, ...(text ? { text } : {}) });
            answered = true;
          }
        }
        // A cancel is answered: with the proof of the partial output above, or by saying there is none.
        if (!answered) send({ type: "job_error", jobId, message: "stopped with no output to prove" });
      } catch (error) {
        held?.flush();
        if (!abort.signal.aborted) send({ type: "job_error", jobId, message: errorText(error), fault: faultOf(error) });
      } finally {
        held?.take();
        this.running.delete(jobId);
        forget();
      }
    })();
    this.running.set(jobId, { abort, finished });
  }

  private forgetOverdueSettlements(): void {
    const cutoff = Date.now() - SETTLEMENT_EXPECTED_WITHIN_MS;
    // A Map iterates in insertion order, which is the order the jobs finished in: the overdue ones come first.
    for (const [jobId, finishedAt] of this.unsettled) {
      if (finishedAt >= cutoff) return;
      this.unsettled.delete(jobId);
    }
  }

  private send(message: WorkerMessage): void {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(encode(message));
  }

  private rejectWaiters(error: Error): void {
    for (const waiter of this.waiters.splice(0)) waiter.reject(error);
  }
}

/** Whether a job failed because of what it asked for (another worker would fail it too) or because of this worker. */
function faultOf(error: unknown): JobFault {
  return error instanceof JobRequestError ? "request" : "worker";
}

function errorText(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).slice(0, 1000);
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
