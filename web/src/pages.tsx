/** The overview, the API key and the settings pages. */
import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api, usdc, when } from "./api.ts";

/** Loads `path` now and whenever `reload()` is called; `error` holds the last failure's message. */
export function useResource<T>(path: string) {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState("");
  const [tick, setTick] = useState(0);
  useEffect(() => {
    api<T>("GET", path).then(setData, (e: Error) => setError(e.message));
  }, [path, tick]);
  return { data, error, setError, reload: () => setTick((t) => t + 1) };
}

interface Overview {
  wallet: string;
  credits_remaining: number;
  usdc_value: number;
  last_topup_at: string | null;
  api_key_created_at: string | null;
  credit_low_threshold: number;
}

interface Deposit {
  credits_added: number;
  deposit_tx: string | null;
  created_at: string;
}

/** `steps`: what a wallet not set up yet does next (first-steps.tsx), under the balance. */
export function OverviewPage({ steps }: { steps?: ComponentChildren }) {
  const { data, error } = useResource<Overview>("/overview");
  const deposits = useResource<{ data: Deposit[] }>("/deposits");
  return (
    <section aria-labelledby="overview-title">
      <h2 id="overview-title">Overview</h2>
      {error && <p role="alert">{error}</p>}
      {data && (
        <dl>
          <dt id="credits-label">Credits remaining</dt>
          <dd>
            <output aria-labelledby="credits-label">{data.credits_remaining.toLocaleString("en-US")}</output> credits ({usdc(data.credits_remaining)} USDC)
          </dd>
          <dt>Last top-up</dt>
          <dd>{when(data.last_topup_at)}</dd>
          <dt>API key</dt>
          <dd>{data.api_key_created_at ? `made ${when(data.api_key_created_at)}` : "none yet"}</dd>
        </dl>
      )}
      {steps}
      {deposits.data && deposits.data.data.length > 0 && (
        <div class="scroll">
          <table>
            <caption>Deposits</caption>
            <thead>
              <tr><th>Credits</th><th>Time</th><th>Transaction</th></tr>
            </thead>
            <tbody>
              {deposits.data.data.map((d) => (
                <tr key={d.deposit_tx}>
                  <td>{d.credits_added.toLocaleString("en-US")}</td>
                  <td>{when(d.created_at)}</td>
                  <td><code>{d.deposit_tx}</code></td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

export function ApiKeyPage() {
  const { data, error, setError, reload } = useResource<Overview>("/overview");
  const [newKey, setNewKey] = useState("");
  const run = (action: () => Promise<void>) => () => {
    setError("");
    action().then(reload, (e: Error) => setError(e.message));
  };
  const issue = run(async () => setNewKey((await api("POST", "/api-key")).key));
  const revoke = run(async () => {
    await api("DELETE", "/api-key");
    setNewKey("");
  });
  const hasKey = Boolean(data?.api_key_created_at);
  return (
    <section aria-labelledby="key-title">
      <h2 id="key-title">API key</h2>
      <p>One key per wallet. Replacing or revoking it takes effect on the next request.</p>
      {data && <p>{hasKey ? `Your key was made ${when(data.api_key_created_at)}.` : "You have no key."}</p>}
      {data && !hasKey && (
        <button type="button" onClick={issue}>
          Create API key
        </button>
      )}
      {hasKey && (
        <p class="row">
          <button type="button" onClick={issue}>
            Replace API key
          </button>
          <button type="button" onClick={revoke}>
            Revoke API key
          </button>
        </p>
      )}
      {newKey && (
        <p class="row">
          <label>
            New API key <input readOnly value={newKey} size={44} onFocus={(e) => e.currentTarget.select()} />
          </label>
          <button type="button" onClick={() => navigator.clipboard?.writeText(newKey)}>
            Copy
          </button>
          <span>Shown once: store it now.</span>
        </p>
      )}
      {error && <p role="alert">{error}</p>}
    </section>
  );
}

export function SettingsPage() {
  const { data, error, setError } = useResource<Overview>("/overview");
  const [threshold, setThreshold] = useState<string | null>(null);
  const [saved, setSaved] = useState("");
  const save = (event: Event) => {
    event.preventDefault();
    setError("");
    setSaved("");
    api("PUT", "/settings", { credit_low_threshold: Number(threshold ?? data?.credit_low_threshold) }).then(
      (s) => setSaved(`Saved: credit.low fires below ${s.credit_low_threshold} credits.`),
      (e: Error) => setError(e.message),
    );
  };
  return (
    <section aria-labelledby="settings-title">
      <h2 id="settings-title">Settings</h2>
      {data && (
        <form onSubmit={save}>
          <label>
            Low-balance threshold{" "}
            <input type="number" min={0} step={1} required value={threshold ?? String(data.credit_low_threshold)} onInput={(e) => setThreshold(e.currentTarget.value)} /> credits
          </label>
          <button type="submit">Save</button>
        </form>
      )}
      {saved && <p role="status">{saved}</p>}
      {error && <p role="alert">{error}</p>}
    </section>
  );
}
