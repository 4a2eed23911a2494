/**
 * How long the API-key check takes for each shape of key: a malformed one, a well-formed key that
 * does not exist, and a valid key. The spec wants a lookup whose time does not depend on the
 * key's shape; this prints the medians and the spread between shapes (PGlite in memory).
 */
import { performance } from "node:perf_hooks";
import { authenticate, issueApiKey } from "../src/accounts/accounts.ts";
import { generateApiKey } from "../src/accounts/api-key.ts";
import { generateKeypair } from "../src/core/keys.ts";
import { SERVICE_MIGRATIONS } from "../src/service.ts";
import { migrate } from "../src/store/index.ts";
import { openPglite } from "../src/store/pglite.ts";
import { percentile, signedMs } from "./support.ts";

const ROUNDS = Number(process.env.ROUNDS ?? 2000);

const db = await openPglite();
await migrate(db, SERVICE_MIGRATIONS);
const valid = await issueApiKey(db, generateKeypair().address);
const shapes: Record<string, () => string> = {
  malformed: () => "Bearer not-a-key",
  "unknown well-formed": () => `Bearer ${generateApiKey()}`,
  valid: () => `Bearer ${valid}`,
};

async function timeOnce(header: string): Promise<number> {
  const start = performance.now();
  await authenticate(db, header).catch(() => undefined);
  return performance.now() - start;
}

const times: Record<string, number[]> = Object.fromEntries(Object.keys(shapes).map((name) => [name, []]));
// Interleaved so drift on a noisy machine hits every shape alike; the first rounds warm up.
for (let i = 0; i < ROUNDS + 200; i++) {
  for (const [name, header] of Object.entries(shapes)) {
    const ms = await timeOnce(header());
    if (i >= 200) times[name]!.push(ms);
  }
}
const malformedP50 = percentile(times.malformed!, 50);
console.log(`key check, ${ROUNDS} rounds each, interleaved`);
for (const [name, values] of Object.entries(times)) {
  const p50 = percentile(values, 50);
  console.log(
    `${name.padEnd(22)} p50 ${p50.toFixed(3).padStart(7)} ms   p95 ${percentile(values, 95).toFixed(3).padStart(7)} ms   vs malformed ${signedMs(p50 - malformedP50)}`,
  );
}
await db.close();
