/**
 * The span of each transaction the journal sends, when the service traces (src/tracing): from its
 * send until the chain answered (landed in a slot, refused, or never landed), with the kind of its
 * actions and the outcome, linked to the jobs it carries. A shared transaction (several jobs'
 * locks, a settlement batch) has one span: each action joining its send adds its job's link.
 */
import { jobLinks, SpanKind, tracer, transactionParent, type Span } from "../tracing/index.ts";
import type { ChainReceipt } from "./chain.ts";

/** The spans of shared transactions being sent, by signature. */
const sharedSpans = new Map<string, { span: Span; actions: number }>();

/** `send()` traced as one transaction's trip; `outcomeOf` words a failure as the journal counts it. */
export function tracedSend(action: { kind: string; subject: string; signature: string; shared?: boolean }, send: () => Promise<ChainReceipt>, outcomeOf: (error: unknown) => string): Promise<ChainReceipt> {
  const traces = tracer();
  if (!traces) return send();
  const shared = action.shared === true;
  const span = traces.startSpan(
    "chain.send",
    { kind: SpanKind.CLIENT, links: jobLinks([action.subject]), attributes: { "svc.chain.kind": action.kind, "svc.chain.signature": action.signature, "svc.chain.shared": shared } },
    transactionParent(action.signature, shared),
  );
  const open = { span, actions: 1 };
  if (shared) sharedSpans.set(action.signature, open);
  const end = (attributes: Record<string, string | number | boolean>) => {
    if (sharedSpans.get(action.signature) === open) sharedSpans.delete(action.signature);
    span.setAttributes({ ...attributes, "svc.chain.actions": open.actions });
    span.end();
  };
  return send().then(
    (receipt) => (end({ "svc.chain.outcome": "landed", "svc.chain.slot": receipt.slot, "svc.chain.already_processed": receipt.alreadyProcessed === true }), receipt),
    (error: unknown) => {
      end({ "svc.chain.outcome": outcomeOf(error), "error.type": error instanceof Error ? error.name : "unknown" });
      throw error;
    },
  );
}

/** Another action of a shared transaction whose send is under way: its job joins the span's links. */
export function joinedSend(action: { subject: string; signature: string }): void {
  const open = sharedSpans.get(action.signature);
  if (!open) return;
  open.actions++;
  open.span.addLinks(jobLinks([action.subject]));
}
