/**
 * The message bus the gateway nodes share: a NATS connection carrying JSON. Core NATS delivers
 * at most once, in order per publisher and subject; what the nodes send over it is either
 * repeated (announcements) or guarded by timeouts on the receiving side (a job's stream), so a
 * lost message costs a retry or a failed job, never money.
 */
import { connect, type NatsConnection } from "nats";
import type { Logger } from "../core/index.ts";

export interface Bus {
  publish(subject: string, message: unknown): void;
  /** Calls `onMessage` for each message on the subject (wildcards allowed); returns the way to stop. */
  subscribe(subject: string, onMessage: (message: unknown) => void): () => void;
  /** Whether the connection is up now (readiness). */
  connected(): boolean;
  /** Delivers what is queued, then closes. */
  close(): Promise<void>;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * `namespace` goes before every subject this bus publishes or subscribes to: the nodes of one
 * deployment share it, and a deployment beside them on the same NATS server never hears them.
 */
export async function connectBus(url: string, logger: Logger, namespace: string): Promise<Bus> {
  // Reconnects forever: a NATS restart must not take the gateway down with it.
  const nc: NatsConnection = await connect({ servers: url, name: "svc-gateway", maxReconnectAttempts: -1, reconnectTimeWait: 500 });
  let up = true;
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type !== "disconnect" && status.type !== "reconnect") continue;
      up = status.type === "reconnect";
      logger.warn({ bus: url, event: status.type }, "message bus connection changed");
    }
  })();
  return {
    publish: (subject, message) => nc.publish(`${namespace}.${subject}`, encoder.encode(JSON.stringify(message))),
    subscribe: (subject, onMessage) => {
      const subscription = nc.subscribe(`${namespace}.${subject}`, {
        callback: (error, msg) => {
          if (error) return void logger.error({ err: error, subject }, "message bus subscription failed");
          let message: unknown;
          try {
            message = JSON.parse(decoder.decode(msg.data));
          } catch {
            return void logger.warn({ subject: msg.subject }, "dropped a message bus message that is not JSON");
          }
          onMessage(message);
        },
      });
      return () => subscription.unsubscribe();
    },
    connected: () => up && !nc.isClosed(),
    close: async () => {
      if (!nc.isClosed()) await nc.drain();
    },
  };
}
