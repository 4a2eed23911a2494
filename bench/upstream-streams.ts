/**
 * A worker's side of a streamed generation, against the loopback OpenAI-compatible upstream the
 * tests use (vLLM's dialect): this process's CPU per generation, the upstream's included, and how
 * many connections the engine opened. Twice: with each event and the response's end in one write
 * (an instant server), and with the end a write after `data: [DONE]` (split writes, as a server
 * that flushes each event does). The engine stops reading at [DONE]; what happens to the rest of
 * the body decides whether the connection is kept.
 *
 * Run: node --import tsx bench/upstream-streams.ts [generations per round (3000)]
 */
import { OpenAiEngine } from "../src/inference/openai-engine.ts";
import { baseRequest } from "../test/inference/collect.ts";
import { startUpstream } from "../test/support/upstream-server.ts";

const GENERATIONS = Number(process.argv[2] ?? 3000);
const AT_ONCE = 16;
const ROUNDS = 4;

async function measure(splitWrites: boolean): Promise<void> {
  const server = await startUpstream("vllm", { splitWrites });
  const engine = await OpenAiEngine.connect({ baseUrl: server.baseUrl, model: server.behaviour.model });
  const generate = async () => {
    for await (const event of engine.generate({ ...baseRequest, maxTokens: 64 })) if (event.type === "done") return;
  };
  const round = async (n: number) => {
    let started = 0;
    await Promise.all(Array.from({ length: AT_ONCE }, async () => {
      while (started++ < n) await generate();
    }));
  };
  await round(GENERATIONS / 3);
  const cpuUs: string[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const before = process.cpuUsage();
    await round(GENERATIONS);
    const used = process.cpuUsage(before);
    cpuUs.push(((used.user + used.system) / GENERATIONS).toFixed(0));
  }
  const connections = new Set(server.requests.map((r) => r.clientPort)).size;
  const label = splitWrites ? "the end a write after [DONE]" : "the end in [DONE]'s write";
  console.log(`${label.padEnd(30)} CPU µs per generation, ${ROUNDS} rounds: ${cpuUs.join(" ")}; connections opened: ${connections} for ${server.requests.length} requests`);
  await engine.close();
  await server.close();
}

await measure(false);
await measure(true);
