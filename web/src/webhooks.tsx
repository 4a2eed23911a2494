/** Webhooks: add one, list them with their status, see a webhook's failed deliveries, replay them. */
import { useState } from "preact/hooks";
import { EVENT_NAMES } from "../../src/events/names.ts";
import { api, when } from "./api.ts";
import { useResource } from "./pages.tsx";

interface Webhook {
  id: string;
  url: string;
  events: string[];
  status: string;
}

export function WebhooksPage() {
  const { data, error, setError, reload } = useResource<{ data: Webhook[] }>("/webhooks");
  const [url, setUrl] = useState("");
  const [secret, setSecret] = useState("");
  const [events, setEvents] = useState<string[]>([]);
  const add = (event: Event) => {
    event.preventDefault();
    setError("");
    api("POST", "/webhooks", { url, secret, events }).then(() => {
      setUrl("");
      setSecret("");
      setEvents([]);
      reload();
    }, (e: Error) => setError(e.message));
  };
  const toggle = (name: string) => setEvents((old) => (old.includes(name) ? old.filter((n) => n !== name) : [...old, name]));
  return (
    <section aria-labelledby="webhooks-title">
      <h2 id="webhooks-title">Webhooks</h2>
      <form onSubmit={add} class="stack">
        <label>
          Endpoint URL <input type="url" required value={url} onInput={(e) => setUrl(e.currentTarget.value)} placeholder="https://example.com/hooks/svc" />
        </label>
        <label>
          Signing secret <input required minLength={16} value={secret} onInput={(e) => setSecret(e.currentTarget.value)} />
        </label>
        <fieldset>
          <legend>Events</legend>
          {EVENT_NAMES.map((name) => (
            <label key={name} class="check">
              <input type="checkbox" checked={events.includes(name)} onChange={() => toggle(name)} /> {name}
            </label>
          ))}
        </fieldset>
        <button type="submit">Add webhook</button>
      </form>
      {error && <p role="alert">{error}</p>}
      {data && data.data.length === 0 && <p>No webhooks yet.</p>}
      <ul class="webhooks">
        {data?.data.map((hook) => <WebhookItem key={hook.id} hook={hook} onChange={reload} onError={setError} />)}
      </ul>
    </section>
  );
}

interface Delivery {
  event_id: string;
  event: string;
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  last_attempt_at: string | null;
}

function WebhookItem({ hook, onChange, onError }: { hook: Webhook; onChange: () => void; onError: (message: string) => void }) {
  const failed = useResource<{ data: Delivery[] }>(`/webhooks/${hook.id}/deliveries?status=failed`);
  const act = (method: string, path: string) => () =>
    api(method, path).then(() => {
      failed.reload();
      onChange();
    }, (e: Error) => onError(e.message));
  const failures = failed.data?.data ?? [];
  return (
    <li aria-label={hook.url}>
      <p>
        <code>{hook.url}</code> <span class={`status ${hook.status}`}>{hook.status}</span>
      </p>
      <p class="events">{hook.events.join(", ")}</p>
      {failures.length > 0 && (
        <div class="scroll">
          <table>
            <caption>Failed deliveries</caption>
            <thead>
              <tr><th>Event</th><th>Attempts</th><th>Last error</th><th>Last attempt</th></tr>
            </thead>
            <tbody>
              {failures.map((d) => (
                <tr key={d.event_id}>
                  <td>{d.event}</td>
                  <td>{d.attempts}</td>
                  <td>{d.last_error ?? (d.last_status_code ? `HTTP ${d.last_status_code}` : "")}</td>
                  <td>{when(d.last_attempt_at)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <p class="row">
        {(failures.length > 0 || hook.status === "failed") && (
          <button type="button" onClick={act("POST", `/webhooks/${hook.id}/replay`)}>
            Replay failed deliveries
          </button>
        )}
        <button type="button" onClick={act("DELETE", `/webhooks/${hook.id}`)}>
          Delete
        </button>
      </p>
    </li>
  );
}
