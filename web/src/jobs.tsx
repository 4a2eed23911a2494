/** The "Jobs" table, newest first, and a job's detail with its on-chain record. */
import { useState } from "preact/hooks";
import { api, when } from "./api.ts";
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
  on_chain: { escrow_tx: string | null; settlement_tx: string | null; refund_tx: string | null; proof_hash: string | null };
}

export function JobsPage() {
  const { data, error } = useResource<{ data: Job[] }>("/jobs?limit=50");
  const [detail, setDetail] = useState<Job | null>(null);
  const [detailError, setDetailError] = useState("");
  const open = (id: string) => () => api<Job>("GET", `/jobs/${id}`).then(setDetail, (e: Error) => setDetailError(e.message));
  return (
    <section aria-labelledby="jobs-title">
      <h2 id="jobs-title">Jobs</h2>
      {error && <p role="alert">{error}</p>}
      {data && data.data.length === 0 && <p>No jobs yet.</p>}
      {data && data.data.length > 0 && (
        <div class="scroll">
          <table>
            <caption>Jobs</caption>
            <thead>
              <tr><th>Status</th><th>Model</th><th>Tier</th><th>Credits</th><th>Tokens</th><th>Worker</th><th>Time</th><th></th></tr>
            </thead>
            <tbody>
              {data.data.map((job) => (
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
      )}
      {detailError && <p role="alert">{detailError}</p>}
      {detail && <JobDetail job={detail} />}
    </section>
  );
}

function short(address: string | null): string {
  return address ? `${address.slice(0, 4)}…${address.slice(-4)}` : "";
}

function JobDetail({ job }: { job: Job }) {
  return (
    <section aria-label="Job detail" class="detail">
      <h3>Job {job.id}</h3>
      <dl>
        <dt>Status</dt>
        <dd>{job.status}</dd>
        <dt>Escrow transaction</dt>
        <dd><code>{job.on_chain.escrow_tx ?? "none"}</code></dd>
        <dt>Settlement transaction</dt>
        <dd><code>{job.on_chain.settlement_tx ?? "none yet"}</code></dd>
        {job.on_chain.refund_tx && (
          <>
            <dt>Refund transaction</dt>
            <dd><code>{job.on_chain.refund_tx}</code></dd>
          </>
        )}
        <dt>Proof hash</dt>
        <dd><code>{job.on_chain.proof_hash ?? "none yet"}</code></dd>
      </dl>
    </section>
  );
}
