/** Runs one generation to its end and gathers what the engine streamed. */
import type { Engine, GenerationEvent, GenerationRequest } from "../../src/inference/engine.ts";

export interface Collected {
  text: string;
  deltas: string[];
  done: Extract<GenerationEvent, { type: "done" }> | undefined;
}

export const baseRequest: GenerationRequest = {
  messages: [{ role: "user", content: "Hi, who are you?" }],
  maxTokens: 64,
  temperature: 0,
  topP: 1,
  stop: [],
  frequencyPenalty: 0,
  presencePenalty: 0,
};

export async function collect(
  engine: Engine,
  request: Partial<GenerationRequest>,
  signal?: AbortSignal,
  onDelta?: (count: number) => void,
): Promise<Collected> {
  const out: Collected = { text: "", deltas: [], done: undefined };
  for await (const event of engine.generate({ ...baseRequest, ...request }, signal)) {
    if (out.done) throw new Error("event after done");
    if (event.type === "delta") {
      out.deltas.push(event.text);
      out.text += event.text;
      onDelta?.(out.deltas.length);
    } else {
      out.done = event;
    }
  }
  return out;
}
