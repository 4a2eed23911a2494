/**
 * The delivery signature (spec "Delivery"): `Svc-Signature: t=<unix seconds>,v1=<hex>`, where v1
 * is the lowercase hex HMAC-SHA256, keyed with the webhook's secret, of `<t>.<raw body>`. Pure.
 */
import { createHmac } from "node:crypto";

export const SIGNATURE_HEADER = "Svc-Signature";
export const EVENT_ID_HEADER = "Svc-Event-Id";

export function signatureHeader(secret: string, rawBody: string, unixSeconds: number): string {
  const v1 = createHmac("sha256", secret).update(`${unixSeconds}.${rawBody}`, "utf8").digest("hex");
  return `t=${unixSeconds},v1=${v1}`;
}
