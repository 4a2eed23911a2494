/**
 * The Overview's first steps for a wallet that is not set up yet: add credits, create a key, make
 * a first request (curl and the `openai` SDK, with this gateway's base URL and a served model
 * filled in). Each shows whether it is done; once all are, they fold into one line.
 */
import type { ComponentChildren } from "preact";
import { useEffect } from "preact/hooks";
import { CopyBlock } from "./copy.tsx";
import { useResource } from "./pages.tsx";

export interface FirstStepsState {
  base_url: string;
  model: string | null;
  models: string[];
  credits_remaining: number;
  steps: { credits: boolean; api_key: boolean; first_request: boolean };
}

/** The pages a step links to. */
export type StepPage = "credits" | "key";

export function requestSnippets(baseUrl: string, model: string) {
  const body = JSON.stringify({ model, messages: [{ role: "user", content: "Hello" }] });
  return [
    {
      label: "curl",
      text: `curl ${baseUrl}/chat/completions \\\n  -H "Authorization: Bearer $SVC_API_KEY" \\\n  -H "Content-Type: application/json" \\\n  -d '${body}'`,
    },
    {
      label: "Node (openai)",
      text: [
        `import OpenAI from "openai";`,
        ``,
        `const client = new OpenAI({ baseURL: "${baseUrl}", apiKey: process.env.SVC_API_KEY });`,
        `const reply = await client.chat.completions.create({`,
        `  model: "${model}",`,
        `  messages: [{ role: "user", content: "Hello" }],`,
        `});`,
        `console.log(reply.choices[0].message.content);`,
      ].join("\n"),
    },
    {
      label: "Python (openai)",
      text: [
        `import os`,
        `from openai import OpenAI`,
        ``,
        `client = OpenAI(base_url="${baseUrl}", api_key=os.environ["SVC_API_KEY"])`,
        `reply = client.chat.completions.create(`,
        `    model="${model}",`,
        `    messages=[{"role": "user", "content": "Hello"}],`,
        `)`,
        `print(reply.choices[0].message.content)`,
      ].join("\n"),
    },
  ];
}

function Snippets({ state }: { state: FirstStepsState }) {
  if (!state.model) return <p>No model is served right now: try again once a worker is online.</p>;
  return (
    <div class="steps-snippets">
      {requestSnippets(state.base_url, state.model).map((s) => (
        <CopyBlock key={s.label} label={s.label} text={s.text} />
      ))}
    </div>
  );
}

function Step({ id, done, title, children }: { id: string; done: boolean; title: string; children: ComponentChildren }) {
  return (
    <li class="steps-item" data-step={id} data-done={String(done)} aria-labelledby={`step-${id}`}>
      <h4 id={`step-${id}`}>
        {title} <span class={done ? "steps-state steps-state-done" : "steps-state"}>{done ? "Done" : "To do"}</span>
      </h4>
      {children}
    </li>
  );
}

function PageLink({ page, go, children }: { page: StepPage; go: (page: StepPage) => void; children: ComponentChildren }) {
  return (
    <a
      href={`#${page}`}
      onClick={(e) => {
        e.preventDefault();
        go(page);
      }}
    >
      {children}
    </a>
  );
}

export function FirstSteps({ go }: { go: (page: StepPage) => void }) {
  const { data, error, reload } = useResource<FirstStepsState>("/first-steps");
  // The first request is made elsewhere (a terminal, a program): coming back to the page shows it.
  useEffect(() => {
    window.addEventListener("focus", reload);
    return () => window.removeEventListener("focus", reload);
  }, []);
  if (error) return <p role="alert">{error}</p>;
  if (!data) return null;
  const { steps } = data;
  if (steps.credits && steps.api_key && steps.first_request) {
    return (
      <details class="steps-folded">
        <summary>You're set up: credits, an API key and a first request. Example requests</summary>
        <Snippets state={data} />
      </details>
    );
  }
  return (
    <section aria-labelledby="steps-title" class="steps">
      <h3 id="steps-title">Get started</h3>
      <ol>
        <Step id="credits" done={steps.credits} title="1. Add credits">
          <p>Requests are paid from prepaid credits: 1 credit is 0.01 USDC. <PageLink page="credits" go={go}>Add credits on the Credits page</PageLink>.</p>
        </Step>
        <Step id="key" done={steps.api_key} title="2. Create an API key">
          <p>Your programs send it as a bearer token. <PageLink page="key" go={go}>Create one on the API key page</PageLink>.</p>
        </Step>
        <Step id="request" done={steps.first_request} title="3. Make a first request">
          <p>
            Put your key in <code>SVC_API_KEY</code>, then run one of these. The API is OpenAI's chat completions at <code>{data.base_url}</code>.
          </p>
          <Snippets state={data} />
        </Step>
      </ol>
    </section>
  );
}
