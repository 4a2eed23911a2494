/** The app shell: sign-in first, then the pages of the signed-in wallet. */
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api } from "./api.ts";
import { CreditsPage } from "./credits.tsx";
import { FirstSteps } from "./first-steps.tsx";
import { JobsPage } from "./jobs.tsx";
import { ApiKeyPage, OverviewPage, SettingsPage } from "./pages.tsx";
import { PlaygroundPage } from "./playground.tsx";
import { SignInPage } from "./sign-in.tsx";
import { UsagePage } from "./usage.tsx";
import { WebhooksPage } from "./webhooks.tsx";
import "./app.css";

const PAGES = { overview: "Overview", credits: "Credits", key: "API key", webhooks: "Webhooks", jobs: "Jobs", usage: "Usage", playground: "Playground", settings: "Settings" } as const;
type Page = keyof typeof PAGES;

function App() {
  const [wallet, setWallet] = useState<string | null | undefined>(undefined);
  useEffect(() => {
    api("GET", "/session")
      .then((s) => setWallet(s.wallet))
      .catch(() => setWallet(null));
  }, []);
  if (wallet === undefined) return <p>Loading…</p>;
  if (wallet === null) return <SignInPage onSignedIn={setWallet} />;
  return <SignedIn wallet={wallet} onSignedOut={() => setWallet(null)} />;
}

function SignedIn({ wallet, onSignedOut }: { wallet: string; onSignedOut: () => void }) {
  const [page, setPage] = useState<Page>("overview");
  const signOut = async () => {
    await api("DELETE", "/session");
    onSignedOut();
  };
  return (
    <>
      <header>
        <h1>svc</h1>
        <p class="wallet" title={wallet}>
          Signed in as <code>{wallet}</code>
        </p>
        <button type="button" onClick={signOut}>
          Sign out
        </button>
      </header>
      <nav aria-label="Pages">
        {(Object.keys(PAGES) as Page[]).map((p) => (
          <button type="button" key={p} aria-current={page === p ? "page" : undefined} onClick={() => setPage(p)}>
            {PAGES[p]}
          </button>
        ))}
      </nav>
      <main>
        {page === "overview" && <OverviewPage steps={<FirstSteps go={setPage} />} />}
        {page === "credits" && <CreditsPage wallet={wallet} />}
        {page === "key" && <ApiKeyPage />}
        {page === "webhooks" && <WebhooksPage />}
        {page === "jobs" && <JobsPage />}
        {page === "usage" && <UsagePage />}
        {page === "playground" && <PlaygroundPage />}
        {page === "settings" && <SettingsPage />}
      </main>
    </>
  );
}

render(<App />, document.getElementById("app")!);
