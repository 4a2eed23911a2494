/**
 * Solana's PubSub over WebSocket: slot, signature and account subscriptions fed by the embedded
 * chain's own events, so a notification follows a change only once it is durable. Connections
 * and subscriptions are bounded per address, per connection and in all (./limits.ts), and a
 * connection that does not read its notifications is dropped once they pile up.
 */
import type { Address } from "@solana/kit";
import type { RawData, WebSocket } from "ws";
import { SYSTEM_PROGRAM } from "../addresses.ts";
import { type RateLimiter, base58Encode, runInBackground } from "../../core/index.ts";
import type { ChainEvent } from "../backend.ts";
import { isWritable, parseTransaction } from "../wire.ts";
import type { RpcContext, RpcLogger } from "./context.ts";
import { checkAccountEncoding, encodeAccount, isTokenAccount, mintDecimals, toJson, tokenAccountFields, outcomeError, type AccountEncoding } from "./encoding.ts";
import { INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, RpcError, invalidParams } from "./errors.ts";
import type { RpcLimits } from "./limits.ts";
import * as p from "./params.ts";

type Kind = "slot" | "signature" | "account";

interface Subscription {
  id: number;
  kind: Kind;
  socket: WebSocket;
  /** The signature or address watched; "" for slots. */
  key: string;
  encoding: AccountEncoding;
}

/** A connection: whose it is, and how many subscriptions it holds. */
interface Connection {
  address: string;
  subscriptions: number;
}

/** Close code for a connection refused or dropped by a limit: "try again later". */
const TRY_AGAIN_LATER = 1013;

export class Subscriptions {
  private nextId = 1;
  private accountWatchers = 0;
  private readonly byId = new Map<number, Subscription>();
  private readonly byKey = new Map<string, Set<Subscription>>();
  private readonly connections = new Map<WebSocket, Connection>();
  private readonly unwatch: () => void;

  constructor(
    private readonly ctx: RpcContext,
    private readonly limits: RpcLimits,
    /** Shared with the HTTP side: each message counts as a request from its address. */
    private readonly perAddress: RateLimiter,
    logger?: RpcLogger,
  ) {
    this.unwatch = ctx.backend.watch((event) =>
      runInBackground(this.onChainEvent(event), "notifying subscribers of a chain event", "the next change notifies them again", logger),
    );
  }

  attach(socket: WebSocket, address: string): void {
    // Counted over the open connections (at most maxConnections), not kept in a second map.
    const fromAddress = [...this.connections.values()].filter((c) => c.address === address).length;
    if (fromAddress >= this.limits.maxConnectionsPerAddress || this.connections.size >= this.limits.maxConnections) {
      return socket.close(TRY_AGAIN_LATER, "too many connections");
    }
    this.connections.set(socket, { address, subscriptions: 0 });
    socket.on("message", (data: RawData) => void this.onMessage(socket, data));
    socket.on("close", () => {
      for (const sub of [...this.byId.values()]) if (sub.socket === socket) this.remove(sub.id);
      this.connections.delete(socket);
    });
  }

  private async onMessage(socket: WebSocket, data: RawData): Promise<void> {
    if (this.perAddress.take(this.connections.get(socket)?.address ?? "") > 0) {
      return this.send(socket, { jsonrpc: "2.0", id: null, error: { code: 429, message: "Too many requests from this address" } });
    }
    let request: { id?: unknown; method?: unknown; params?: unknown };
    try {
      request = JSON.parse(data.toString()) as typeof request;
    } catch {
      return this.send(socket, { jsonrpc: "2.0", id: null, error: { code: PARSE_ERROR, message: "Parse error" } });
    }
    const id = request.id ?? null;
    // kit pings idle connections to keep them open; the ping needs no answer.
    if (request.method === "ping") return;
    try {
      const result = await this.call(socket, request.method, Array.isArray(request.params) ? request.params : []);
      this.send(socket, { jsonrpc: "2.0", id, result });
      if (request.method === "signatureSubscribe") await this.notifyIfProcessed(result as number);
    } catch (err) {
      const e = err instanceof RpcError ? err : new RpcError(INVALID_REQUEST, (err as Error).message);
      this.send(socket, { jsonrpc: "2.0", id, error: { code: e.code, message: e.message } });
    }
  }

  private async call(socket: WebSocket, method: unknown, params: p.Params): Promise<unknown> {
    switch (method) {
      case "slotSubscribe":
        return this.add(socket, "slot", "", {});
      case "signatureSubscribe":
        return this.add(socket, "signature", p.signature(params[0]), {});
      case "accountSubscribe": {
        const encoding = p.config<AccountEncoding>(params, 1);
        checkAccountEncoding(encoding);
        return this.add(socket, "account", p.address(params, 0), encoding);
      }
      case "slotUnsubscribe":
      case "signatureUnsubscribe":
      case "accountUnsubscribe": {
        const sub = this.byId.get(Number(params[0]));
        if (!sub || sub.socket !== socket || `${sub.kind}Unsubscribe` !== method) throw invalidParams("Invalid subscription id.");
        return this.remove(sub.id);
      }
      default:
        throw new RpcError(METHOD_NOT_FOUND, `Method not found: ${String(method)}`);
    }
  }

  private add(socket: WebSocket, kind: Kind, key: string, encoding: AccountEncoding): number {
    const connection = this.connections.get(socket)!;
    if (connection.subscriptions >= this.limits.maxSubscriptionsPerConnection) {
      throw new RpcError(INVALID_REQUEST, `Invalid request: a connection holds at most ${this.limits.maxSubscriptionsPerConnection} subscriptions`);
    }
    if (this.byId.size >= this.limits.maxSubscriptions) throw new RpcError(INVALID_REQUEST, "Invalid request: the server holds all the subscriptions it can; try again later");
    connection.subscriptions++;
    const sub: Subscription = { id: this.nextId++, kind, socket, key, encoding };
    this.byId.set(sub.id, sub);
    const mapKey = `${kind}:${key}`;
    let set = this.byKey.get(mapKey);
    if (!set) this.byKey.set(mapKey, (set = new Set()));
    set.add(sub);
    if (kind === "account") this.accountWatchers++;
    return sub.id;
  }

  private remove(id: number): boolean {
    const sub = this.byId.get(id);
    if (!sub) return false;
    this.byId.delete(id);
    const connection = this.connections.get(sub.socket);
    if (connection) connection.subscriptions--;
    if (sub.kind === "account") this.accountWatchers--;
    const mapKey = `${sub.kind}:${sub.key}`;
    this.byKey.get(mapKey)?.delete(sub);
    if (this.byKey.get(mapKey)?.size === 0) this.byKey.delete(mapKey);
    return true;
  }

  private subscribers(kind: Kind, key: string): Subscription[] {
    return [...(this.byKey.get(`${kind}:${key}`) ?? [])];
  }

  private async onChainEvent(event: ChainEvent): Promise<void> {
    if (event.type === "slot") {
      const result = { parent: event.slot - 1n, root: event.slot, slot: event.slot };
      for (const sub of this.subscribers("slot", "")) this.notify(sub, "slotNotification", result);
      return;
    }
    if (event.type === "airdrop") return this.notifyAccount(base58Encode(event.record.address), event.record.slot);
    const { signature, record } = event;
    for (const sub of this.subscribers("signature", signature)) {
      this.notify(sub, "signatureNotification", signatureResult(record));
      this.remove(sub.id);
    }
    // Every transaction the service sends passes here: parse it only when someone watches accounts.
    if (this.accountWatchers === 0) return;
    const tx = parseTransaction(record.wire);
    for (let i = 0; i < tx.accountKeys.length; i++) {
      if (isWritable(tx, i)) await this.notifyAccount(base58Encode(tx.accountKeys[i]!), record.slot);
    }
  }

  /** Signatures are reported once: one processed before the subscription is reported at once. */
  private async notifyIfProcessed(id: number): Promise<void> {
    const sub = this.byId.get(id);
    if (!sub) return;
    const status = await this.ctx.backend.getTransactionStatus(sub.key);
    if (!status || !this.byId.has(id)) return;
    this.notify(sub, "signatureNotification", signatureResult(status));
    this.remove(id);
  }

  private async notifyAccount(address: string, slot: bigint): Promise<void> {
    const subs = this.subscribers("account", address);
    if (subs.length === 0) return;
    // A closed account is reported as an empty one owned by the system program, as Solana does.
    const account = (await this.ctx.backend.getAccount(address as Address)) ?? {
      address: address as Address, lamports: 0n, owner: SYSTEM_PROGRAM, executable: false, data: new Uint8Array(0),
    };
    const decimals = isTokenAccount(account) ? mintDecimals(await this.ctx.backend.getAccount(tokenAccountFields(account.data).mint as Address)) ?? 0 : 0;
    for (const sub of subs) {
      this.notify(sub, "accountNotification", { context: { slot }, value: encodeAccount(account, sub.encoding, () => decimals) });
    }
  }

  private notify(sub: Subscription, method: string, result: unknown): void {
    this.send(sub.socket, { jsonrpc: "2.0", method, params: { result, subscription: sub.id } });
  }

  /** Sends unless the connection has left more than its share unread: then it is dropped. */
  private send(socket: WebSocket, message: unknown): void {
    if (socket.readyState !== socket.OPEN) return;
    if (socket.bufferedAmount > this.limits.maxBufferedBytesPerConnection) return void socket.terminate();
    socket.send(toJson(message));
  }

  stats(): { connections: number; subscriptions: number } {
    return { connections: this.connections.size, subscriptions: this.byId.size };
  }

  close(): void {
    this.unwatch();
    this.byId.clear();
    this.byKey.clear();
  }
}

function signatureResult(outcome: { slot: bigint; ok: boolean; err?: string }): unknown {
  return { context: { slot: outcome.slot }, value: { err: outcomeError(outcome) } };
}
