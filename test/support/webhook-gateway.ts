/** A gateway with webhooks for end-to-end tests: the test gateway, given webhook options. */
import { startWebhookDelivery, type WebhookOptions, type Webhooks } from "../../src/events/index.ts";
import type { WorkerHandle } from "../../src/network/worker-handle.ts";
import type { ServiceOptions } from "../../src/service.ts";
import type { Db } from "../../src/store/db.ts";
import { startTestGateway, type TestGateway } from "./service.ts";

export interface WebhookGateway extends TestGateway {
  /** `http://127.0.0.1:<port>`: the /app/api routes live under it. */
  origin: string;
  webhooks: Webhooks;
  /** Stops the delivery loop and starts a fresh one: what a restart does to delivery. */
  restartDelivery(): Promise<void>;
}

export async function startWebhookGateway(
  options: Partial<ServiceOptions> & { db: Db; credits?: number; workers?: WorkerHandle[]; webhooks: WebhookOptions },
): Promise<WebhookGateway> {
  const gateway = await startTestGateway(options);
  const { webhooks } = gateway.service;
  let delivery = gateway.service.delivery;
  return {
    ...gateway,
    origin: new URL(gateway.baseUrl).origin,
    webhooks,
    async restartDelivery() {
      await delivery.stop();
      delivery = startWebhookDelivery(webhooks);
    },
    async close() {
      await delivery.stop();
      await gateway.close();
    },
  };
}
