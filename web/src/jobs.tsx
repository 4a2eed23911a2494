/**
 * The "Jobs" table, newest first: filtered by status and model, paged both ways with the API's
 * `before` and `after` cursors, and each job's receipt (its lock, proof, settlement or refund, the
 * worker, the charge, and the `svc verify` command that checks it against the chain).
 */
import { useRef, useState } from "preact/hooks";
import { api, when } from "./api.ts";
import { CopyBlock } from "./copy.tsx";
import type { FirstStepsState } from "./first-steps.tsx";
import { useResource } from "./pages.tsx";

interface Job {
  id: string;
  status: string;
  model: string;
  tier: string;
  credits_charged: number;
  worker_address: string | null;
  created_at: string;
  usage: { total_tokens: number };
  on_chain: { escrow_tx: string | null; settlement_tx: string | null; refund_tx: string | null; proof_hash: string | null; receipt?: unknown };
}

interface JobList {
  data: Job[];
  has_more: boolean;
}

const STATUSES = ["pending", "processing", "settling", "settled", "failed", "refunded", "disputed"];
const PAGE_SIZE = 20;

/** Where the page is: no cursor (the newest jobs), or the jobs before (older than) or after (newer than) one. */
type Cursor = { before: string } | { after: string } | null;

function listPath(status: string, model: string, cursor: Cursor): string {
  const query = new URLSearchParams({ limit: String(PAGE_SIZE) });
  if (status) query.set("status", status);
  if (model) query.set("model", model);
  if (cursor && "before" in cursor) query.set("before", cursor.before);
  if (cursor && "after" in cursor) query.set("after", cursor.after);
  return `/jobs?${query}`;
}

/**
 * Which ways there is more. A page's `has_more` speaks for the way it was asked: older for the
 * newest page or `before`, newer for `after`. The other way is known from having come from there.
 */
export function pagesAround(cursor: Cursor, list: JobList): { older: boolean; newer: boolean } {
  const asked = cursor && "after" in cursor ? "newer" : "older";
  return {
    older: list.data.length > 0 && (asked === "older" ? list.has_more : true),
    newer: list.data.length > 0 && (asked === "newer" ? list.has_more : cursor !== null),
  };
}

function Filters(props: { status: string; model: string; models: string[]; onStatus: (s: string) => void; onModel: (m: string) => void }) {
  return (
    <form class="row jobs-filters" aria-label="Filter jobs" onSubmit={(e) => e.preventDefault()}>
      <label>
        Status{" "}
        <select value={props.status} onChange={(e) => props.onStatus(e.currentTarget.value)}>
          <option value="">All</option>
          {STATUSES.map((s) => <option key={s} value={s}>{s}</option>)}
        </select>
      </label>
      <label>
        Model{" "}
        <select value={props.model} onChange={(e) => props.onModel(e.currentTarget.value)}>
          <option value="">All</option>
          {props.models.map((m) => <option key={m} value={m}>{m}</option>)}
        </select>
      </label>
    </form>
  );
}

function JobTable({ jobs, open }: { jobs: Job[]; open: (id: string) => () => void }) {
  return (
    <div class="scroll">
      <table>
        <caption>Jobs</caption>
        <thead>
          <tr><th>Status</th><th>Model</th><th>Tier</th><th>Credits</th><th>Tokens</th><th>Worker</th><th>Time</th><th></th></tr>
        </thead>
        <tbody>
          {jobs.map((job) => (
            <tr key={job.id}>
              <td>{job.status}</td>
              <td>{job.model}</td>
              <td>{job.tier}</td>
              <td>{job.credits_charged}</td>
              <td>{job.usage.total_tokens}</td>
              <td><code title={job.worker_address ?? ""}>{short(job.worker_address)}</code></td>
              <td>{when(job.created_at)}</td>
              <td>
                <button type="button" aria-label={`Details of ${job.id}`} onClick={open(job.id)}>Details</button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function JobsPage() {
  const [status, setStatus] = useState("");
  const [model, setModel] = useState("");
  const [cursor, setCursor] = useState<Cursor>(null);
  const { data, error } = useResource<JobList>(listPath(status, model, cursor));
  const start = useResource<FirstStepsState>("/first-steps");
  const [detail, setDetail] = useState<Job | null>(null);
  const [detailError, setDetailError] = useState("");
  const detailRef = useRef<HTMLHeadingElement>(null);
  const open = (id: string) => () =>
    api<Job>("GET", `/jobs/${id}`).then(
      (job) => {
        setDetail(job);
        // The receipt opens below the table: take the keyboard there.
        requestAnimationFrame(() => detailRef.current?.focus());
      },
      (e: Error) => setDetailError(e.message),
    );
  const filter = (set: (v: string) => void) => (value: string) => {
    set(value);
    setCursor(null);
  };
  const models = [...new Set([...(start.data?.models ?? []), ...(data?.data.map((j) => j.model) ?? []), ...(model ? [model] : [])])].sort();
  const around = data ? pagesAround(cursor, data) : { older: false, newer: false };
  const jobs = data?.data ?? [];
  return (
    <section aria-labelledby="jobs-title">
      <h2 id="jobs-title">Jobs</h2>
      <Filters status={status} model={model} models={models} onStatus={filter(setStatus)} onModel={filter(setModel)} />
      {error && <p role="alert">{error}</p>}
      {data && jobs.length === 0 && <p>{status || model || cursor ? "No jobs match." : "No jobs yet."}</p>}
      {jobs.length > 0 && <JobTable jobs={jobs} open={open} />}
      <p class="row jobs-paging">
        <button type="button" disabled={!around.newer} onClick={() => setCursor({ after: jobs[0]!.id })}>
          Newer
        </button>
        <button type="button" disabled={!around.older} onClick={() => setCursor({ before: jobs[jobs.length - 1]!.id })}>
          Older
        </button>
      </p>
      {detailError && <p role="alert">{detailError}</p>}
      {detail && <JobReceipt job={detail} baseUrl={start.data?.base_url ?? `${location.origin}/v1`} headingRef={detailRef} />}
    </section>
  );
}

function short(address: string | null): string {
  return address ? `${address.slice(0, 4)}…${address.slice(-4)}` : "";
}

/** The command that checks the job's charge against the chain; with the key set, the service's claims too. */
export function verifyCommand(jobId: string, baseUrl: string): string {
  return `SVC_API_KEY=<your API key> svc verify ${jobId} --base-url ${baseUrl}`;
}

function JobReceipt({ job, baseUrl, headingRef }: { job: Job; baseUrl: string; headingRef: { current: HTMLHeadingElement | null } }) {
  const chain = job.on_chain;
  return (
    <section aria-label="Job detail" class="detail jobs-receipt">
      <h3 ref={headingRef} tabIndex={-1}>Job {job.id}</h3>
      <dl>
        <dt>Status</dt>
        <dd>{job.status}</dd>
        <dt>Model</dt>
        <dd>{job.model}</dd>
        <dt>Credits charged</dt>
        <dd>{job.credits_charged}</dd>
        <dt>Worker</dt>
        <dd><code>{job.worker_address ?? "none"}</code></dd>
        <dt>Escrow transaction</dt>
        <dd><code>{chain.escrow_tx ?? "none"}</code></dd>
        <dt>Proof hash</dt>
        <dd><code>{chain.proof_hash ?? "none yet"}</code></dd>
        <dt>Settlement transaction</dt>
        <dd><code>{chain.settlement_tx ?? "none yet"}</code></dd>
        {chain.refund_tx && (
          <>
            <dt>Refund transaction</dt>
            <dd><code>{chain.refund_tx}</code></dd>
          </>
        )}
      </dl>
      <p>
        {chain.settlement_tx
          ? "The escrow transaction locked the job's credits; the settlement paid the worker for the output whose SHA-256 is the proof hash, which the worker signed, and returned the rest."
          : chain.refund_tx
            ? "The escrow transaction locked the job's credits; the refund returned them."
            : "The escrow transaction locked the job's credits; the settlement or refund follows when the job ends."}{" "}
        Check it yourself, against the chain:
      </p>
      <CopyBlock label="svc verify command" text={verifyCommand(job.id, baseUrl)} />
    </section>
  );
}
