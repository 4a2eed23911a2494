/**
 * The playground: pick a served model, write a message, watch the answer stream in, then its job,
 * what it cost and its receipt. It spends the signed-in wallet's credits through its session
 * (POST /app/api/playground/completions), as a job like any other.
 */
import { useState } from "preact/hooks";
import { api, usdc } from "./api.ts";
import { useResource } from "./pages.tsx";

interface Model {
  id: string;
  svc: { tier: string; credits_per_request: number; credits_per_1k_tokens: number };
}

interface Job {
  id: string;
  status: string;
  credits_charged: number;
  usage: { prompt_tokens: number; completion_tokens: number };
  on_chain: { escrow_tx: string | null; settlement_tx: string | null; proof_hash: string | null };
}

const MAX_CHARS = 4000;
/** Statuses after which the receipt changes no more. */
const FINAL = new Set(["settled", "failed", "refunded", "disputed"]);

/** Reads a server-sent event stream of chat.completion.chunk objects, handing each text delta to `onText`. */
async function readStream(response: Response, onText: (text: string) => void): Promise<void> {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  for (let next = await reader.read(); !next.done; next = await reader.read()) {
    buffered += next.value;
    const events = buffered.split("\n\n");
    buffered = events.pop()!;
    for (const event of events) {
      const data = event.replace(/^data: /, "");
      if (data === "[DONE]") return;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message);
      const text = chunk.choices?.[0]?.delta?.content;
      if (text) onText(text);
    }
  }
}

/** The job once its receipt is complete (settled or ended), asking a few times while it settles. */
async function receipt(id: string): Promise<Job> {
  let job = await api<Job>("GET", `/jobs/${id}`);
  for (let i = 0; i < 40 && !(FINAL.has(job.status) && (job.on_chain.settlement_tx || job.status !== "settled")); i++) {
    await new Promise((r) => setTimeout(r, 250));
    job = await api<Job>("GET", `/jobs/${id}`);
  }
  return job;
}

export function PlaygroundPage() {
  const models = useResource<{ data: Model[] }>("/models");
  const [picked, setModel] = useState("");
  const [prompt, setPrompt] = useState("");
  const [answer, setAnswer] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  const [job, setJob] = useState<Job | null>(null);
  const served = models.data?.data ?? [];
  // The first served model until one is picked: the select shows it, so a send uses it.
  const model = picked || served[0]?.id || "";

  const send = async () => {
    if (busy || !model || !prompt.trim()) return;
    setBusy(true);
    setError("");
    setAnswer("");
    setJob(null);
    try {
      const response = await fetch("/app/api/playground/completions", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model, messages: [{ role: "user", content: prompt }] }),
      });
      if (!response.ok) {
        const body = await response.json().catch(() => ({}));
        throw new Error(body?.error?.message ?? `The server answered ${response.status}.`);
      }
      const id = response.headers.get("x-svc-job-id")!;
      await readStream(response, (text) => setAnswer((old) => old + text));
      setJob(await receipt(id));
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setBusy(false);
    }
  };
  const submit = (event: Event) => {
    event.preventDefault();
    void send();
  };
  const onKeyDown = (event: KeyboardEvent) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      void send();
    }
  };
  const price = served.find((m) => m.id === model)?.svc;

  return (
    <section aria-labelledby="playground-title">
      <h2 id="playground-title">Playground</h2>
      <p>Each answer is a job paid from this wallet's credits, as an API request would be.</p>
      {models.error && <p role="alert">{models.error}</p>}
      {models.data && served.length === 0 && <p>No model is being served right now.</p>}
      <form onSubmit={submit} class="stack playground">
        <label>
          Model{" "}
          <select value={model} onChange={(e) => setModel(e.currentTarget.value)}>
            {served.map((m) => (
              <option key={m.id} value={m.id}>{m.id}</option>
            ))}
          </select>
        </label>
        {price && (
          <p class="hint">
            {price.tier} tier: {price.credits_per_request} credits a request plus {price.credits_per_1k_tokens} per 1,000 tokens.
          </p>
        )}
        <label>
          Message
          <textarea rows={4} maxLength={MAX_CHARS} required value={prompt} onInput={(e) => setPrompt(e.currentTarget.value)} onKeyDown={onKeyDown} />
        </label>
        <p class="row">
          <button type="submit" disabled={busy || !model}>
            {busy ? "Answering…" : "Send"}
          </button>
          <span class="hint">Ctrl+Enter (⌘+Enter) sends.</span>
        </p>
      </form>
      {error && <p role="alert">{error}</p>}
      {(answer || busy) && (
        <div class="answer" role="log" aria-label="Answer" aria-live="polite">
          {answer}
        </div>
      )}
      {job && <Receipt job={job} />}
    </section>
  );
}

function Receipt({ job }: { job: Job }) {
  return (
    <section aria-label="Receipt" class="detail">
      <h3>Receipt</h3>
      <dl>
        <dt>Job</dt>
        <dd><code>{job.id}</code></dd>
        <dt>Status</dt>
        <dd>{job.status}</dd>
        <dt>Cost</dt>
        <dd>
          <span id="playground-cost">{job.credits_charged}</span> credits ({usdc(job.credits_charged)} USDC) for {job.usage.prompt_tokens} + {job.usage.completion_tokens} tokens
        </dd>
        <dt>Escrow transaction</dt>
        <dd><code>{job.on_chain.escrow_tx ?? "none"}</code></dd>
        <dt>Settlement transaction</dt>
        <dd><code>{job.on_chain.settlement_tx ?? "none yet"}</code></dd>
        <dt>Proof hash</dt>
        <dd><code>{job.on_chain.proof_hash ?? "none yet"}</code></dd>
      </dl>
      <p class="hint">The Jobs page lists it with the wallet's other jobs.</p>
    </section>
  );
}
