/**
 * Adding and withdrawing credits from the signed-in wallet. The server prepares the transaction
 * (paying its fee), the wallet signs it (`solana:signTransaction`; in `svc dev` the dev wallet is
 * signed for here), and the signed copy comes back to be checked and sent (jobs/wallet-payments.ts).
 */
import type { FastifyInstance } from "fastify";
import { ApiError, type Signer, usdcValue } from "../core/index.ts";
import qrcode from "qrcode-generator";
import { ERROR_RESPONSES, idParams, int, maybe, object, str } from "../http/index.ts";
import { TEST_USDC_CREDITS, TestUsdcFaucet } from "./test-usdc.ts";

/** The QR code of `text` as an SVG element that scales to its box. */
function qrSvg(text: string): string {
  const code = qrcode(0, "M");
  code.addData(text);
  code.make();
  return code.createSvgTag({ cellSize: 4, margin: 4, scalable: true });
}

export interface CreditPageOptions {
  prepareDeposit(wallet: string, credits: number): Promise<{ id: string; transaction: string; credits: number }>;
  prepareWithdrawal(wallet: string, credits: number): Promise<{ id: string; transaction: string; credits: number }>;
  submit(wallet: string, id: string, signedBase64: string): Promise<{ signature: string; credits: number; creditsRemaining: number }>;
  signAs(signer: Signer, id: string): string;
  /** Credits' worth of USDC in the wallet's own token account. */
  walletUsdcCredits(wallet: string): Promise<number>;
  recentWithdrawals(wallet: string, limit: number): Promise<{ credits: number; at: Date; withdrawalTx: string | null; state: string }[]>;
  /** Mints test USDC to the wallet, answering the transaction's signature; offered only while there is a dev wallet (svc dev). */
  grantTestUsdc(wallet: string, credits: number): Promise<string>;
  /** `svc dev` only: the dev wallet, which the server signs for; read per request (svc dev sets it after start). */
  devWallet(): Signer | undefined;
  /** A Solana Pay transaction request for a deposit, and where it stands (jobs/wallet-payments.ts). */
  createPayRequest(wallet: string, credits: number): Promise<string>;
  payRequestState(wallet: string, id: string): Promise<{ state: string; signature: string | null; creditsRemaining: number | null }>;
  /** The app's origin, for the payment request's URL. */
  appUrl(): string;
}

const creditsBody = {
  type: "object",
  required: ["credits"],
  properties: { credits: { type: "integer", minimum: 1, maximum: 100_000_000, description: "a whole number of credits" } },
};
const submitBody = {
  type: "object",
  properties: {
    transaction: { type: "string", maxLength: 4096, description: "the prepared transaction, signed by the wallet, base64" },
    dev_wallet: { type: "boolean", description: "svc dev: let the server sign as the dev wallet" },
  },
};
const prepared = object({ object: { const: "prepared_transaction" }, id: str, transaction: str, credits: int });
const sent = object({ object: { const: "payment" }, signature: str, credits: int, credits_remaining: int, usdc_value: { type: "number" } });
const walletFunds = object({ object: { const: "wallet_funds" }, usdc_credits: int });
const withdrawal = object({ credits: int, usdc_value: { type: "number" }, withdrawal_tx: maybe("string"), state: str, created_at: str });
const withdrawals = object({ object: { const: "list" }, data: { type: "array", items: withdrawal } });
const granted = object({ object: { const: "test_usdc" }, credits: int, usdc_tx: str });
const payRequest = object({ object: { const: "payment_request" }, id: str, url: str, solana_pay_url: str, qr_svg: str, credits: int });
const payState = object({ object: { const: "payment_request_state" }, state: str, signature: maybe("string"), credits_remaining: maybe("integer") });
const respond = (body: unknown, extra: Record<string, unknown> = {}) => ({ schema: { ...extra, response: { 200: body, ...ERROR_RESPONSES } } });

export async function creditPageRoutes(app: FastifyInstance, options: CreditPageOptions): Promise<void> {
  const toPrepared = (p: { id: string; transaction: string; credits: number }) => ({ object: "prepared_transaction", ...p });
  app.post("/deposits", respond(prepared, { body: creditsBody }), async (request) =>
    toPrepared(await options.prepareDeposit(request.appWallet, (request.body as { credits: number }).credits)),
  );
  app.post("/withdrawals", respond(prepared, { body: creditsBody }), async (request) =>
    toPrepared(await options.prepareWithdrawal(request.appWallet, (request.body as { credits: number }).credits)),
  );

  app.post("/payments/:id", respond(sent, { params: idParams(), body: submitBody }), async (request) => {
    const { id } = request.params as { id: string };
    const body = request.body as { transaction?: string; dev_wallet?: boolean };
    const devWallet = options.devWallet();
    const dev = body.dev_wallet === true && devWallet?.address === request.appWallet ? devWallet : undefined;
    if (body.dev_wallet && !dev) throw new ApiError("invalid_request", "Only the dev wallet of svc dev is signed for by the server.", "dev_wallet");
    const signed = dev ? options.signAs(dev, id) : body.transaction;
    if (!signed) throw new ApiError("invalid_request", "Send the signed transaction.", "transaction");
    const done = await options.submit(request.appWallet, id, signed);
    return { object: "payment", signature: done.signature, credits: done.credits, credits_remaining: done.creditsRemaining, usdc_value: usdcValue(done.credits) };
  });

  // Solana Pay: the QR code holds solana:<url of the transaction request>, which a phone wallet fetches (solana-pay-routes.ts).
  app.post("/deposits/qr", respond(payRequest, { body: creditsBody }), async (request) => {
    const { credits } = request.body as { credits: number };
    const id = await options.createPayRequest(request.appWallet, credits);
    const url = `${options.appUrl()}/pay/${id}`;
    const solanaPayUrl = `solana:${encodeURIComponent(url)}`;
    return { object: "payment_request", id, url, solana_pay_url: solanaPayUrl, qr_svg: qrSvg(solanaPayUrl), credits };
  });

  app.get("/deposits/qr/:id", respond(payState, { params: idParams() }), async (request) => {
    const state = await options.payRequestState(request.appWallet, (request.params as { id: string }).id);
    return { object: "payment_request_state", state: state.state, signature: state.signature, credits_remaining: state.creditsRemaining };
  });

  app.get("/wallet-funds", respond(walletFunds), async (request) => ({ object: "wallet_funds", usdc_credits: await options.walletUsdcCredits(request.appWallet) }));

  app.get("/withdrawals", respond(withdrawals), async (request) => ({
    object: "list",
    data: (await options.recentWithdrawals(request.appWallet, 20)).map((w) => ({
      credits: w.credits,
      usdc_value: usdcValue(w.credits),
      withdrawal_tx: w.withdrawalTx,
      state: w.state,
      created_at: w.at.toISOString(),
    })),
  }));

  const faucet = new TestUsdcFaucet((wallet, credits) => options.grantTestUsdc(wallet, credits));
  app.post("/test-usdc", respond(granted), async (request) => {
    if (!options.devWallet()) throw new ApiError("not_found", "Test USDC is given by svc dev only.");
    return { object: "test_usdc", credits: TEST_USDC_CREDITS, usdc_tx: await faucet.give(request.appWallet) };
  });
}
