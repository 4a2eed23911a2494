/**
 * Solana Pay transaction requests, at `<app_url>/pay/{id}`: what a phone wallet fetches after
 * scanning the app's QR code. GET names the payee; POST with the wallet's account answers the
 * deposit transaction, signed by the service's fee payer, for the wallet to sign and send. No
 * session or Origin: the wallet is not the browser. The request id is the capability, and the
 * transaction can only pay the requesting wallet's own vault.
 */
import type { FastifyInstance } from "fastify";
import { ERROR_RESPONSES, idParams, object, str } from "../http/index.ts";

export interface SolanaPayOptions {
  transactionRequest(id: string, account: string): Promise<{ transaction: string; credits: number }>;
  appUrl(): string;
}

const accountBody = {
  type: "object",
  required: ["account"],
  properties: { account: { type: "string", pattern: "^[1-9A-HJ-NP-Za-km-z]{32,44}$", description: "the paying wallet's address" } },
};
const cors = { "access-control-allow-origin": "*" };

/** The payee's icon a wallet shows beside the label. */
const ICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64"><rect width="64" height="64" rx="12" fill="#1f2937"/><text x="32" y="42" font-family="sans-serif" font-size="24" fill="#fff" text-anchor="middle">svc</text></svg>`;

export async function solanaPayRoutes(app: FastifyInstance, options: SolanaPayOptions): Promise<void> {
  app.get("/icon.svg", async (_request, reply) => reply.headers(cors).type("image/svg+xml").send(ICON));
  app.get("/:id", { schema: { params: idParams(), response: { 200: object({ label: str, icon: str }), ...ERROR_RESPONSES } } }, async (_request, reply) => {
    reply.headers(cors);
    return { label: "svc credits", icon: `${options.appUrl()}/pay/icon.svg` };
  });
  app.post("/:id", { schema: { params: idParams(), body: accountBody, response: { 200: object({ transaction: str, message: str }), ...ERROR_RESPONSES } } }, async (request, reply) => {
    reply.headers(cors);
    const { id } = request.params as { id: string };
    const { transaction, credits } = await options.transactionRequest(id, (request.body as { account: string }).account);
    return { transaction, message: `Add ${credits} credits (${credits / 100} USDC) to your svc balance` };
  });
}
