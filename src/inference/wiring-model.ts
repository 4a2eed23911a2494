/**
 * The project's own tiny llama-architecture model, built offline in milliseconds so tests and
 * local development run the real llama.cpp engine without downloading anything.
 *
 * It is a wiring model, not a language model: its weights are set by hand so that greedy decoding
 * gives known, exactly assertable outputs. Layer 0 has one attention head that notices the trigger
 * word anywhere earlier in the context and raises a flag dimension; the output matrix holds bigram
 * logits (previous token -> next token) plus the flag's push towards the trigger loop. Every other
 * weight is small fixed-seed noise, written only into residual dimensions the output reads with
 * tiny weights, so each layer does a real forward pass without disturbing the designed margins.
 */
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { WIRING_MODEL } from "../catalog/index.ts";
import {
  bool,
  f32,
  f32Array,
  i32Array,
  str,
  strArray,
  u32,
  writeGguf,
  type GgufTensor,
  type GgufValue,
} from "./gguf-writer.ts";

export const WIRING_MODEL_FILE_NAME = "svc-wiring-model.gguf";
/** Its id and context window are the catalog's entry; the GGUF only states them. */
const CONTEXT_WINDOW = WIRING_MODEL.contextWindow;
const GGUF_DESCRIPTION =
  "Hand-wired 2-layer llama-architecture wiring model (~0.5 MB): replies with one fixed sentence, " +
  "or loops on a trigger word; for exercising the service, not a language model.";

/** The greedy reply to any conversation that never mentions the trigger word. */
export const KNOWN_REPLY_PIECES = [
  "Hello",
  " from",
  " the",
  " svc",
  " wiring",
  " model",
  ".",
] as const;
export const KNOWN_REPLY = KNOWN_REPLY_PIECES.join("");

/** Case-sensitive; anywhere in any message (also inside a longer word such as "bananas"). */
export const TRIGGER_WORD = "banana";
/** With the trigger present, greedy decoding repeats this token until max_tokens. */
export const LOOP_UNIT = " banana";
/** What a presence/frequency penalty that breaks the loop leads to, before end of generation. */
export const PENALTY_ENDING = " split!";
/**
 * How far (in logits) the loop token leads the way out at each loop step. A penalty on the loop
 * token larger than this breaks the loop; a smaller one does not.
 */
export const LOOP_MARGIN = 0.55;

/** The reply truncated to its first `tokens` tokens, as max_tokens would cut it. */
export function knownReplyPrefix(tokens: number): string {
  return KNOWN_REPLY_PIECES.slice(0, tokens).join("");
}

/** The trigger loop as max_tokens cuts it: one loop unit per token. */
export function loopText(tokens: number): string {
  return LOOP_UNIT.repeat(tokens);
}

/**
 * The greedy reply when the trigger is present and OpenAI-style penalties apply (both count only
 * generated tokens). After k loop tokens the loop token has lost `presence + k * frequency`; the
 * loop ends at the first k where that exceeds LOOP_MARGIN. Returns null when it never does (the
 * reply then runs until max_tokens). Penalties within ~0.01 of a tie are not predictable.
 */
export function expectedPenalizedReply(presencePenalty: number, frequencyPenalty: number): string | null {
  for (let k = 1; k <= CONTEXT_WINDOW; k++) {
    if (presencePenalty + k * frequencyPenalty > LOOP_MARGIN) return loopText(k) + PENALTY_ENDING;
    if (frequencyPenalty <= 0) return null;
  }
  return null;
}

// ---- architecture ----
const D = 64; // embedding length
const LAYERS = 2;
const HEADS = 4;
const HEAD_DIM = D / HEADS;
const FFN = 128;
const RMS_EPS = 1e-5;
// The trigger head reads the last RoPE pair of its head; with this base that pair turns by only
// ~0.01 rad over 2,048 positions, so the detector sees an early trigger as well as a recent one.
const ROPE_FREQ_BASE = 1e6;

// ---- vocabulary ----
const SPACE = "\u2581"; // SentencePiece's visible space marker

const CONTROL_TOKENS = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"] as const;
const UNK_ID = 0;
const BOS_ID = 1;
const EOS_ID = 4; // <|im_end|>: ChatML's end of turn is the end of generation

// Whole words the model speaks or reads, plus the role names ChatML puts in every prompt. The
// SentencePiece tokenizer only reaches a whole-word token through pieces that are themselves in
// the vocabulary, so every word brings its chain of prefixes.
const WORDS = [
  "Hello",
  `${SPACE}from`,
  `${SPACE}the`,
  `${SPACE}svc`,
  `${SPACE}wiring`,
  `${SPACE}model`,
  ".",
  "!",
  `${SPACE}banana`,
  "banana",
  `${SPACE}split`,
  "system",
  "user",
  "assistant",
];

function normalPieces(): string[] {
  const pieces: string[] = [SPACE];
  for (const word of WORDS) {
    const chars = Array.from(word);
    for (let n = Math.min(2, chars.length); n <= chars.length; n++) {
      const piece = chars.slice(0, n).join("");
      if (!pieces.includes(piece)) pieces.push(piece);
    }
  }
  return pieces;
}

function byteToken(b: number): string {
  return `<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`;
}

interface Vocab {
  tokens: string[];
  scores: number[];
  types: number[];
  id: (piece: string) => number;
}

function buildVocab(): Vocab {
  const tokens: string[] = [];
  const scores: number[] = [];
  const types: number[] = [];
  CONTROL_TOKENS.forEach((t, i) => {
    tokens.push(t);
    scores.push(0);
    types.push(i === UNK_ID ? 2 : 3);
  });
  for (let b = 0; b < 256; b++) {
    tokens.push(byteToken(b));
    scores.push(0);
    types.push(6);
  }
  for (const piece of normalPieces()) {
    tokens.push(piece);
    // SentencePiece merges the highest-scoring pair first; longer pieces win.
    scores.push(Array.from(piece).length);
    types.push(1);
  }
  const index = new Map(tokens.map((t, i) => [t, i]));
  return {
    tokens,
    scores,
    types,
    id: (piece) => {
      const id = index.get(piece);
      if (id === undefined) throw new Error(`piece ${JSON.stringify(piece)} is not in the vocabulary`);
      return id;
    },
  };
}

// ---- residual-stream layout ----
// Dims 0-15 carry the hand-set computation; 16-63 are free and only ever hold noise.
const DIM_BIAS = 0; // 1 in every token embedding
const DIM_FLAG = 1; // written by the trigger head
const DIM_TRIGGER = 2; // 1 in the trigger tokens' embeddings
const FIRST_SLOT = 3;
const FIRST_FREE = 16;

// Tokens whose successor is designed get a one-hot slot; the rest only carry the bias.
const SLOT_PIECES = [
  "<0x0A>", // the last prompt token: ChatML's "<|im_start|>assistant\n"
  "Hello",
  `${SPACE}from`,
  `${SPACE}the`,
  `${SPACE}svc`,
  `${SPACE}wiring`,
  `${SPACE}model`,
  ".",
  `${SPACE}banana`, // shared with "banana": both lead into the loop
  `${SPACE}split`,
  "!",
] as const;

/** Deterministic PRNG (mulberry32) so the model's bytes never change between builds. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A weight matrix [inputs -> outputs] stored the GGUF way: one row of `inputs` values per output. */
class Matrix {
  readonly data: Float32Array;
  constructor(readonly inputs: number, readonly outputs: number) {
    this.data = new Float32Array(inputs * outputs);
  }
  set(output: number, input: number, value: number): void {
    this.data[output * this.inputs + input] = value;
  }
  /** Small noise into the given output rows, reading every input. */
  noise(rand: () => number, scale: number, fromOutput = 0, toOutput = this.outputs): this {
    for (let o = fromOutput; o < toOutput; o++) {
      for (let i = 0; i < this.inputs; i++) this.set(o, i, (rand() * 2 - 1) * scale);
    }
    return this;
  }
  tensor(name: string): GgufTensor {
    return { name, dims: [this.inputs, this.outputs], data: this.data };
  }
}

function ones(n: number): Float32Array {
  return new Float32Array(n).fill(1);
}

// The RMS norm scales a residual vector x by sqrt(D)/|x| before every projection; the hand-set
// entries below are chosen so the final logits land on round targets at each designed position.
const rmsScale = (squaredNorm: number) => Math.sqrt(D) / Math.sqrt(squaredNorm);
const S_PLAIN = rmsScale(2); // bias + slot
const S_FLAGGED = rmsScale(3); // bias + slot + flag
const S_TRIGGER = rmsScale(4); // bias + slot + trigger feature + flag

// Logit targets. Each designed step leads a field of ~330 tokens near 0 by ~40, so sampling at any
// OpenAI temperature (up to 2) and any top_p stays on the design: at T = 2 the whole field holds
// ~330 * e^(-40/2) ~ 7e-7 of the mass per step, ~5e-6 over the sentence. The only real choice the
// model offers a sampler is the trigger loop against its way out (LOOP_MARGIN apart), which is
// where seeds and penalties show.
const SENTENCE_LOGIT = 40;
const EOS_FLOOR_LOGIT = 5; // at tokens with no slot, so stray samples end soon
const LOOP_LOGIT = 40;
const FLAG_PUSH_LOGIT = 56; // the trigger loop's opening beats "Hello" (32.7 once flagged)
const EXIT_LOGIT = 86; // the steps out of the loop must beat the flag's push (56) by as much
const EXIT_HELD_BACK = 3; // keeps the way out below the loop token at the reply's first step

function buildOutput(vocab: Vocab, rand: () => number): Matrix {
  const V = vocab.tokens.length;
  const out = new Matrix(D, V);
  const slot = (piece: string) => {
    const i = SLOT_PIECES.indexOf(piece as (typeof SLOT_PIECES)[number]);
    if (i < 0) throw new Error(`${piece} has no slot`);
    return FIRST_SLOT + i;
  };
  const bump = (next: number, dim: number, value: number) => {
    out.data[next * D + dim] = (out.data[next * D + dim] ?? 0) + value;
  };

  const eosBias = EOS_FLOOR_LOGIT / rmsScale(1);
  bump(EOS_ID, DIM_BIAS, eosBias);

  const chain = KNOWN_REPLY_PIECES.map((p) => p.replace(/^ /, SPACE));
  bump(vocab.id("Hello"), slot("<0x0A>"), SENTENCE_LOGIT / S_PLAIN);
  for (let i = 0; i + 1 < chain.length; i++) {
    bump(vocab.id(chain[i + 1]!), slot(chain[i]!), SENTENCE_LOGIT / S_PLAIN);
  }
  bump(EOS_ID, slot("."), SENTENCE_LOGIT / S_PLAIN - eosBias);

  const loop = vocab.id(`${SPACE}banana`);
  const exit = vocab.id(`${SPACE}split`);
  // The flag pushes the loop token and its way out equally, so the loop's margin is set by the
  // loop token's own row alone and does not move if the flag's strength drifts over a long context.
  const flagPush = FLAG_PUSH_LOGIT / S_FLAGGED;
  bump(loop, DIM_FLAG, flagPush);
  bump(exit, DIM_FLAG, flagPush);
  bump(exit, slot("<0x0A>"), -EXIT_HELD_BACK / S_FLAGGED);
  bump(loop, slot(`${SPACE}banana`), LOOP_LOGIT / S_TRIGGER - flagPush);
  bump(exit, slot(`${SPACE}banana`), (LOOP_LOGIT - LOOP_MARGIN) / S_TRIGGER - flagPush);
  bump(vocab.id("!"), slot(`${SPACE}split`), EXIT_LOGIT / S_FLAGGED);
  bump(EOS_ID, slot("!"), EXIT_LOGIT / S_FLAGGED - eosBias);

  for (let v = 0; v < V; v++) {
    for (let d = FIRST_FREE; d < D; d++) out.data[v * D + d] = (rand() * 2 - 1) * 0.01;
  }
  return out;
}

function buildEmbeddings(vocab: Vocab, rand: () => number): Matrix {
  const V = vocab.tokens.length;
  const emb = new Matrix(D, V);
  for (let v = 0; v < V; v++) {
    emb.set(v, DIM_BIAS, 1);
    for (let d = FIRST_FREE; d < D; d++) emb.set(v, d, (rand() * 2 - 1) * 0.02);
  }
  SLOT_PIECES.forEach((piece, i) => emb.set(vocab.id(piece), FIRST_SLOT + i, 1));
  const loopSlot = FIRST_SLOT + SLOT_PIECES.indexOf(`${SPACE}banana`);
  emb.set(vocab.id("banana"), loopSlot, 1);
  for (const trigger of [`${SPACE}banana`, "banana"]) emb.set(vocab.id(trigger), DIM_TRIGGER, 1);
  return emb;
}

// Noise a layer writes back into the residual stream grows its norm, which the RMS norm turns into
// a slight shrink of every designed logit; kept small so LOOP_MARGIN holds to ~0.01.
const OUTPUT_NOISE = 0.02;

/** Layer 0's head 0 is the trigger detector; heads 1-3 and all of layer 1 are noise. */
function buildLayer(layer: number, rand: () => number): GgufTensor[] {
  const p = `blk.${layer}`;
  const q = new Matrix(D, D);
  const k = new Matrix(D, D);
  const v = new Matrix(D, D);
  const o = new Matrix(D, D);
  const firstNoiseHead = layer === 0 ? 1 : 0;
  q.noise(rand, 0.05, firstNoiseHead * HEAD_DIM);
  k.noise(rand, 0.05, firstNoiseHead * HEAD_DIM);
  v.noise(rand, 0.05, firstNoiseHead * HEAD_DIM);
  // Noise heads write only into the free dims; the detector head's output row stays clean.
  for (let r = FIRST_FREE; r < D; r++) {
    for (let c = firstNoiseHead * HEAD_DIM; c < D; c++) o.set(r, c, (rand() * 2 - 1) * OUTPUT_NOISE);
  }
  if (layer === 0) {
    // Query = constant bias, key = "is a trigger": score 2*2*|n|^2/4 >= 21 at every trigger
    // position and 0 elsewhere, so even one trigger among 2,048 tokens takes ~all the attention.
    const lastPair = HEAD_DIM - 2;
    q.set(lastPair, DIM_BIAS, 2);
    k.set(lastPair, DIM_TRIGGER, 2);
    // A trigger token's normalised trigger dim is sqrt(D/3); the value is scaled to 1 because
    // llama.cpp's CPU flash attention sums values in F16, where a running sum of ones stays exact
    // up to 2,048 while most other values drift as hundreds of trigger tokens pile up.
    v.set(0, DIM_TRIGGER, 1 / S_FLAGGED);
    o.set(DIM_FLAG, 0, 1);
  }
  const gate = new Matrix(D, FFN).noise(rand, 0.05);
  const up = new Matrix(D, FFN).noise(rand, 0.05);
  const down = new Matrix(FFN, D).noise(rand, OUTPUT_NOISE, FIRST_FREE);
  return [
    { name: `${p}.attn_norm.weight`, dims: [D], data: ones(D) },
    q.tensor(`${p}.attn_q.weight`),
    k.tensor(`${p}.attn_k.weight`),
    v.tensor(`${p}.attn_v.weight`),
    o.tensor(`${p}.attn_output.weight`),
    { name: `${p}.ffn_norm.weight`, dims: [D], data: ones(D) },
    gate.tensor(`${p}.ffn_gate.weight`),
    up.tensor(`${p}.ffn_up.weight`),
    down.tensor(`${p}.ffn_down.weight`),
  ];
}

// The standard ChatML template; node-llama-cpp recognises it and uses its ChatML wrapper.
const CHATML_TEMPLATE =
  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}" +
  "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/** The model file's bytes; pure and deterministic. */
export function buildWiringModel(): Uint8Array {
  const vocab = buildVocab();
  const rand = prng(0x5eed);
  const tensors: GgufTensor[] = [buildEmbeddings(vocab, rand).tensor("token_embd.weight")];
  for (let l = 0; l < LAYERS; l++) tensors.push(...buildLayer(l, rand));
  tensors.push({ name: "output_norm.weight", dims: [D], data: ones(D) });
  tensors.push(buildOutput(vocab, rand).tensor("output.weight"));

  const metadata: Array<readonly [string, GgufValue]> = [
    ["general.architecture", str("llama")],
    ["general.name", str(WIRING_MODEL.id)],
    ["general.description", str(GGUF_DESCRIPTION)],
    ["general.file_type", u32(0)], // all F32
    ["llama.context_length", u32(CONTEXT_WINDOW)],
    ["llama.embedding_length", u32(D)],
    ["llama.block_count", u32(LAYERS)],
    ["llama.feed_forward_length", u32(FFN)],
    ["llama.attention.head_count", u32(HEADS)],
    ["llama.attention.head_count_kv", u32(HEADS)],
    ["llama.rope.dimension_count", u32(HEAD_DIM)],
    ["llama.rope.freq_base", f32(ROPE_FREQ_BASE)],
    ["llama.attention.layer_norm_rms_epsilon", f32(RMS_EPS)],
    ["llama.vocab_size", u32(vocab.tokens.length)],
    ["tokenizer.ggml.model", str("llama")],
    ["tokenizer.ggml.tokens", strArray(vocab.tokens)],
    ["tokenizer.ggml.scores", f32Array(vocab.scores)],
    ["tokenizer.ggml.token_type", i32Array(vocab.types)],
    ["tokenizer.ggml.bos_token_id", u32(BOS_ID)],
    ["tokenizer.ggml.eos_token_id", u32(EOS_ID)],
    ["tokenizer.ggml.unknown_token_id", u32(UNK_ID)],
    ["tokenizer.ggml.padding_token_id", u32(UNK_ID)],
    ["tokenizer.ggml.add_bos_token", bool(false)],
    ["tokenizer.ggml.add_eos_token", bool(false)],
    ["tokenizer.ggml.add_space_prefix", bool(false)],
    ["tokenizer.chat_template", str(CHATML_TEMPLATE)],
  ];
  return writeGguf(metadata, tensors);
}

/**
 * Writes `<dir>/svc-wiring-model.gguf` unless an identical file is already there, and returns its
 * path. Writing to a temporary name and renaming keeps a concurrent reader from seeing half a file.
 */
export async function ensureWiringModel(dir: string): Promise<string> {
  const target = path.join(dir, WIRING_MODEL_FILE_NAME);
  const bytes = buildWiringModel();
  const existing = await readFile(target).catch(() => null);
  if (existing !== null && Buffer.compare(existing, bytes) === 0) return target;
  await mkdir(dir, { recursive: true });
  const temp = `${target}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  try {
    await writeFile(temp, bytes);
    await rename(temp, target);
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
  return target;
}
