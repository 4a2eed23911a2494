/**
 * Workers connected to other gateway nodes, served through the message bus. Each node announces
 * the workers connected to it every couple of seconds; every other node puts each announced
 * worker in its pool as a RemoteWorkerHandle whose protocol messages travel over the bus to the
 * worker's node, which runs them on its own connection to the worker and sends the worker's
 * answers back. So a request on any node can run on any worker, with the worker protocol's own
 * streaming, cancellation (a cancelled job still answers with its partial proof) and failure
 * semantics; the job service cannot tell a bridged worker from a local one.
 *
 * A node that stops announcing (killed, partitioned) has its workers removed after three missed
 * announcements, and every job in flight on them fails over or fails, as when a worker's own
 * connection drops.
 *
 * Subjects: `svc.workers` (announcements), `svc.node.<node>.worker.<address>` (to a worker's
 * node), `svc.node.<node>.reply.<address>` (the worker's answers, to the asking node).
 */
import type { Bus } from "../bus/index.ts";
import { JOB_TIMEOUT_MS, type Logger } from "../core/index.ts";
import type { GatewayMessage, ModelOffer, WorkerMessage } from "./protocol.ts";
import { RemoteWorkerHandle } from "./remote-worker.ts";
import { CALLER_LEFT, JobRequestError, type WorkerHandle } from "./worker-handle.ts";
import type { WorkerPool } from "./worker-pool.ts";

export const DEFAULT_ANNOUNCE_MS = 2_000;

export interface NodeBridgeOptions {
  bus: Bus;
  pool: WorkerPool;
  nodeId: string;
  logger: Logger;
  /** How often this node announces its workers; a node silent for three periods is gone. */
  announceMs?: number;
}

interface AnnouncedWorker {
  address: string;
  staked: boolean;
  /** Sold to callers by the node it is connected to (vouched or proven there): the nodes of one deployment take each other's word. */
  sold?: boolean;
  concurrency: number;
  models: ModelOffer[];
}

interface Announcement {
  node: string;
  workers: AnnouncedWorker[];
}

/** A protocol message from one node to a worker on another, with the node to answer. */
interface Envelope {
  from: string;
  message: GatewayMessage;
}

interface Bridged {
  node: string;
  handle: RemoteWorkerHandle;
  seenAt: number;
}

type Answer = Extract<WorkerMessage, { type: "delta" | "done" | "job_error" | "count_result" | "count_error" | "settlement_signature" | "settlement_error" }>;

export class NodeBridge {
  private readonly bridged = new Map<string, Bridged>();
  /** Jobs this node runs for other nodes, by `<node>:<job id>`. */
  private readonly serving = new Map<string, AbortController>();
  /** When each other node last announced itself. */
  private readonly nodesSeenAt = new Map<string, number>();
  private readonly stops: (() => void)[] = [];
  private timer: NodeJS.Timeout | undefined;
  private readonly announceMs: number;

  constructor(private readonly o: NodeBridgeOptions) {
    this.announceMs = o.announceMs ?? DEFAULT_ANNOUNCE_MS;
  }

  start(): void {
    const { bus, nodeId } = this.o;
    this.stops.push(
      bus.subscribe("svc.workers", (m) => this.announced(m as Announcement)),
      bus.subscribe(`svc.node.${nodeId}.worker.*`, (m) => void this.forWorker(m as Envelope & { address: string })),
      bus.subscribe(`svc.node.${nodeId}.reply.*`, (m) => this.answered(m as Answer & { address: string })),
    );
    this.announce();
    this.timer = setInterval(() => {
      this.announce();
      this.forgetSilentNodes();
    }, this.announceMs);
    this.timer.unref();
  }

  /** Workers on other nodes that this node's pool can use now. */
  get bridgedWorkers(): number {
    return this.bridged.size;
  }

  private isBridged(handle: WorkerHandle): boolean {
    return this.bridged.get(handle.address)?.handle === handle;
  }

  private localWorker(address: string): WorkerHandle | undefined {
    return this.o.pool.all().find((h) => h.address === address && !this.isBridged(h));
  }

  private announce(workers?: AnnouncedWorker[]): void {
    const local = workers ?? this.o.pool.all().filter((h) => !this.isBridged(h)).map((h) => ({
      address: h.address,
      staked: h.staked,
      sold: this.o.pool.vetting(h.address) !== "probation",
      concurrency: h.concurrency ?? 1_000,
      models: h.models().map((id) => ({ id, contextWindow: h.contextWindow(id) })),
    }));
    this.o.bus.publish("svc.workers", { node: this.o.nodeId, workers: local } satisfies Announcement);
  }

  private announced(a: Announcement): void {
    if (a.node === this.o.nodeId) return;
    const now = Date.now();
    this.nodesSeenAt.set(a.node, now);
    const listed = new Set(a.workers.map((w) => w.address));
    for (const [address, b] of this.bridged) if (b.node === a.node && !listed.has(address)) this.drop(address, `it left gateway node ${a.node}`);
    for (const w of a.workers) {
      const known = this.bridged.get(w.address);
      if (known?.node === a.node) {
        known.seenAt = now;
        if (w.sold) this.o.pool.provenElsewhere(w.address);
        continue;
      }
      // Connected here too (it moved): the direct connection wins.
      if (this.localWorker(w.address)) continue;
      if (known) this.drop(w.address, `it moved to gateway node ${a.node}`);
      this.bridge(a.node, w, now);
    }
  }

  private bridge(node: string, w: AnnouncedWorker, now: number): void {
    const send = (message: GatewayMessage) =>
      this.o.bus.publish(`svc.node.${node}.worker.${w.address}`, { from: this.o.nodeId, message, address: w.address });
    const handle = new RemoteWorkerHandle(w.address, w.models, w.concurrency, send, undefined, w.staked);
    this.bridged.set(w.address, { node, handle, seenAt: now });
    this.o.pool.add(handle);
    if (w.sold) this.o.pool.provenElsewhere(w.address);
  }

  private drop(address: string, reason: string): void {
    const b = this.bridged.get(address);
    if (!b) return;
    this.bridged.delete(address);
    this.o.pool.remove(address, b.handle);
    b.handle.lost(reason);
  }

  private forgetSilentNodes(): void {
    const cutoff = Date.now() - 3 * this.announceMs;
    for (const [address, b] of this.bridged) if (b.seenAt < cutoff) this.drop(address, `its gateway node ${b.node} stopped answering`);
    // Jobs run here for a node that is gone: nobody reads them any more (a survivor refunds them).
    for (const [node, seenAt] of this.nodesSeenAt) {
      if (seenAt >= cutoff) continue;
      this.nodesSeenAt.delete(node);
      for (const [key, controller] of this.serving) if (key.startsWith(`${node}:`)) controller.abort(`gateway node ${node} stopped answering`);
    }
  }

  private answered(message: Answer & { address: string }): void {
    this.bridged.get(message.address)?.handle.receive(message);
  }

  /** A protocol message from another node for a worker connected here. */
  private async forWorker(envelope: Envelope & { address: string }): Promise<void> {
    const { from, message, address } = envelope;
    const reply = (answer: Answer) => this.o.bus.publish(`svc.node.${from}.reply.${address}`, { ...answer, address });
    const worker = this.localWorker(address);
    if (message.type === "job") {
      if (!worker) return reply({ type: "job_error", jobId: message.jobId, message: `not connected to gateway node ${this.o.nodeId} any more`, fault: "worker" });
      return this.runFor(from, worker, message, reply);
    }
    if (message.type === "cancel") return void this.serving.get(`${from}:${message.jobId}`)?.abort(CALLER_LEFT);
    if (message.type === "settled") return void worker?.settled?.(message.jobId, BigInt(message.earnedBaseUnits), message.settlementTx);
    if (message.type === "sign_settlement") return this.signFor(worker, message, reply);
    if (message.type !== "count") return;
    try {
      if (!worker) throw new Error(`not connected to gateway node ${this.o.nodeId} any more`);
      reply({ type: "count_result", requestId: message.requestId, tokens: await worker.countPromptTokens(message.model, message.messages) });
    } catch (error) {
      reply({ type: "count_error", requestId: message.requestId, message: (error as Error).message });
    }
  }

  /** Asks a worker connected here to sign another node's settlement of its jobs. */
  private async signFor(worker: WorkerHandle | undefined, message: Extract<GatewayMessage, { type: "sign_settlement" }>, reply: (answer: Answer) => void): Promise<void> {
    try {
      if (!worker) throw new Error(`not connected to gateway node ${this.o.nodeId} any more`);
      const jobs = message.jobs.map((job) => ({ ...job, charge: BigInt(job.charge) }));
      const signature = await worker.signSettlement({ table: message.table, jobs });
      reply({ type: "settlement_signature", requestId: message.requestId, signature: Buffer.from(signature).toString("base64") });
    } catch (error) {
      reply({ type: "settlement_error", requestId: message.requestId, message: (error as Error).message });
    }
  }

  /**
   * Runs another node's job on a worker connected here, in a slot of this node's pool: each node
   * counts only the jobs it routes itself, so this is where the worker's declared concurrency
   * holds across nodes.
   */
  private async runFor(from: string, worker: WorkerHandle, job: Extract<GatewayMessage, { type: "job" }>, reply: (answer: Answer) => void): Promise<void> {
    const key = `${from}:${job.jobId}`;
    const controller = new AbortController();
    this.serving.set(key, controller);
    const lease = await this.o.pool.lease(job.model, { address: worker.address }, { waitMs: JOB_TIMEOUT_MS, signal: controller.signal });
    try {
      if (lease === undefined) throw new Error(`no slot on the worker at gateway node ${this.o.nodeId}`);
      for await (const event of worker.run({ jobId: job.jobId, model: job.model, request: job.request, ...(job.stream === false ? { stream: false } : {}) }, controller.signal)) {
        if (event.type === "delta") reply({ type: "delta", jobId: job.jobId, text: event.text });
        else reply({ ...event, jobId: job.jobId, signature: Buffer.from(event.signature).toString("base64") });
      }
    } catch (error) {
      reply({ type: "job_error", jobId: job.jobId, message: (error as Error).message, fault: error instanceof JobRequestError ? "request" : "worker" });
    } finally {
      lease?.release();
      this.serving.delete(key);
    }
  }

  /** Tells the other nodes this node's workers are gone, and drops the ones bridged here. */
  close(): void {
    clearInterval(this.timer);
    this.announce([]);
    for (const stop of this.stops.splice(0)) stop();
    for (const address of [...this.bridged.keys()]) this.drop(address, "this gateway node is shutting down");
    for (const controller of this.serving.values()) controller.abort("gateway node shutting down");
  }
}
