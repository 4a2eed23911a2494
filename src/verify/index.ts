/** The verify part: a charge's receipt, checked from the chain alone (`svc verify`). */
export { checkCharge } from "./checks.ts";
export type { Check, ServiceClaims } from "./checks.ts";
export { formatReceipt, formatTableReceipt } from "./receipt.ts";
export { checkTableCharge } from "./table-checks.ts";
