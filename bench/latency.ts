/**
 * Sequential latency of one request straight to the upstream and through the gateway, alternated:
 * the whole JSON answer, and the first token of a stream (the first server-sent event carrying
 * text), each stream read to its end so the gateway settles it as a caller who stayed.
 */
import { percentile } from "./support.ts";

export interface Target {
  url: string;
  headers: Record<string, string>;
  model: string;
}

export interface Latencies {
  jsonMs: number[];
  firstTokenMs: number[];
}

const request = (target: Target, stream: boolean) => ({
  method: "POST",
  headers: { "content-type": "application/json", ...target.headers },
  body: JSON.stringify({ model: target.model, messages: [{ role: "user", content: "Hello" }], max_tokens: 8, stream }),
});

async function timeJson(target: Target): Promise<number> {
  const started = performance.now();
  const response = await fetch(target.url, request(target, false));
  await response.text();
  if (!response.ok) throw new Error(`${target.url} answered ${response.status}`);
  return performance.now() - started;
}

async function timeFirstToken(target: Target): Promise<number> {
  const started = performance.now();
  const response = await fetch(target.url, request(target, true));
  if (!response.ok || !response.body) throw new Error(`${target.url} answered ${response.status}`);
  const decoder = new TextDecoder();
  let seen = "";
  let firstMs: number | undefined;
  for await (const chunk of response.body) {
    if (firstMs !== undefined) continue;
    seen += decoder.decode(chunk, { stream: true });
    if (/"content":"[^"]/.test(seen)) firstMs = performance.now() - started;
  }
  if (firstMs === undefined) throw new Error(`${target.url} streamed no text`);
  return firstMs;
}

/** `count` requests of each kind to each target, after a few unmeasured ones. */
export async function measureLatency(upstream: Target, gateway: Target, count = 100): Promise<[Latencies, Latencies]> {
  const results: [Latencies, Latencies] = [
    { jsonMs: [], firstTokenMs: [] },
    { jsonMs: [], firstTokenMs: [] },
  ];
  for (let i = -5; i < count; i++) {
    for (const [which, target] of [upstream, gateway].entries()) {
      const json = await timeJson(target);
      const firstToken = await timeFirstToken(target);
      if (i < 0) continue;
      results[which]!.jsonMs.push(json);
      results[which]!.firstTokenMs.push(firstToken);
    }
  }
  return results;
}

/** `p50 / p99` of each, and the gateway's addition. */
export function latencyLine(label: string, upstream: number[], gateway: number[]): string {
  const at = (values: number[], p: number) => percentile(values, p).toFixed(2);
  const added = (p: number) => (percentile(gateway, p) - percentile(upstream, p)).toFixed(2);
  return `${label.padEnd(40)} upstream ${at(upstream, 50)} / ${at(upstream, 99)}   gateway ${at(gateway, 50)} / ${at(gateway, 99)}   added ${added(50)} / ${added(99)}`;
}
