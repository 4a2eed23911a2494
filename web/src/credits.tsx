/** Adding and withdrawing credits: the server prepares each transaction, the wallet signs it. */
import { useState } from "preact/hooks";
import { api, usdc, when } from "./api.ts";
import { useResource } from "./pages.tsx";
import { discoverWallets, toBase64, type StandardWallet } from "./wallets.ts";

interface Prepared {
  id: string;
  transaction: string;
}

function fromBase64(text: string): Uint8Array {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

/** The browser wallet holding `address` that can sign transactions, connected. */
async function walletFor(address: string): Promise<{ wallet: StandardWallet; account: any }> {
  let found: StandardWallet[] = [];
  discoverWallets((wallets) => (found = wallets));
  for (const wallet of found) {
    if (!("solana:signTransaction" in wallet.features)) continue;
    const { accounts } = await wallet.features["standard:connect"].connect();
    const account = (accounts as { address: string }[]).find((a) => a.address === address);
    if (account) return { wallet, account };
  }
  throw new Error(`No wallet in this browser can sign for ${address}.`);
}

/** Signs a prepared transaction as the signed-in wallet and sends it; svc dev's dev wallet is signed for by the server. */
async function signAndSend(wallet: string, devWallet: string | null, prepared: Prepared) {
  if (devWallet === wallet) return api("POST", `/payments/${prepared.id}`, { dev_wallet: true });
  const { wallet: w, account } = await walletFor(wallet);
  const [output] = await w.features["solana:signTransaction"].signTransaction({ account, transaction: fromBase64(prepared.transaction), chain: "solana:localnet" });
  return api("POST", `/payments/${prepared.id}`, { transaction: toBase64(output.signedTransaction) });
}

interface FormAction {
  action: string;
  onSubmit: (credits: number) => Promise<void>;
}

/** An amount of credits and one or two ways to act on it (each a submit button). */
function AmountForm({ label, action, onSubmit, other }: { label: string; other?: FormAction } & FormAction) {
  const [credits, setCredits] = useState("");
  const submit = (event: SubmitEvent) => {
    event.preventDefault();
    const chosen = other && (event.submitter as HTMLButtonElement | null)?.textContent === other.action ? other : { onSubmit };
    void chosen.onSubmit(Number(credits)).then(() => setCredits(""));
  };
  return (
    <form onSubmit={submit} class="row">
      <label>
        {label} <input type="number" min={1} step={1} required value={credits} onInput={(e) => setCredits(e.currentTarget.value)} /> credits
      </label>
      <button type="submit">{action}</button>
      {other && <button type="submit">{other.action}</button>}
    </form>
  );
}

export function CreditsPage({ wallet }: { wallet: string }) {
  const overview = useResource<{ credits_remaining: number }>("/overview");
  const funds = useResource<{ usdc_credits: number }>("/wallet-funds");
  const config = useResource<{ dev_wallet: string | null }>("/config");
  const withdrawals = useResource<{ data: { credits: number; state: string; withdrawal_tx: string | null; created_at: string }[] }>("/withdrawals");
  const [status, setStatus] = useState("");
  const [error, setError] = useState("");
  const reload = () => [overview, funds, withdrawals].forEach((r) => r.reload());
  const run = (work: () => Promise<string>) => async () => {
    setError("");
    setStatus("Waiting for your wallet…");
    await work().then(setStatus, (e: Error) => (setStatus(""), setError(e.message)));
    reload();
  };
  const pay = (path: string, verb: string) => (credits: number) =>
    run(async () => {
      const prepared = await api<Prepared>("POST", path, { credits });
      const done = await signAndSend(wallet, config.data?.dev_wallet ?? null, prepared);
      return `${verb} ${done.credits} credits (${done.signature}). Credits remaining: ${done.credits_remaining}.`;
    })();
  const [qr, setQr] = useState<{ svg: string; link: string } | null>(null);
  const payByPhone = (credits: number) =>
    run(async () => {
      const request = await api("POST", "/deposits/qr", { credits });
      setQr({ svg: request.qr_svg, link: request.solana_pay_url });
      for (;;) {
        await new Promise((r) => setTimeout(r, 1000));
        const s = await api("GET", `/deposits/qr/${request.id}`);
        if (s.state === "confirmed") return (setQr(null), `Added ${credits} credits (${s.signature}). Credits remaining: ${s.credits_remaining}.`);
        if (s.state === "failed" || s.state === "dropped") throw (setQr(null), new Error("The payment did not go through; nothing was charged. Try again."));
      }
    })();
  const testUsdc = run(async () => `Got ${(await api("POST", "/test-usdc")).credits} credits' worth of test USDC.`);
  return (
    <section aria-labelledby="credits-title">
      <h2 id="credits-title">Credits</h2>
      <p>
        {overview.data && <>Credits remaining: {overview.data.credits_remaining} ({usdc(overview.data.credits_remaining)} USDC). </>}
        {funds.data && <>Your wallet holds {usdc(funds.data.usdc_credits)} USDC.</>}
      </p>
      {config.data?.dev_wallet && (
        <p>
          <button type="button" onClick={testUsdc}>Get test USDC</button> (svc dev only)
        </p>
      )}
      <h3>Add credits</h3>
      <p>At least 100 credits (1 USDC), paid from your wallet's USDC; the service pays the network fee.</p>
      <AmountForm label="Credits to add" action="Add credits" onSubmit={pay("/deposits", "Added")} other={{ action: "Pay with a phone wallet", onSubmit: payByPhone }} />
      {qr && (
        <figure>
          <div class="qr" role="img" aria-label="Payment QR code" dangerouslySetInnerHTML={{ __html: qr.svg }} />
          <figcaption>
            Scan with a Solana Pay wallet, or open <a href={qr.link}>the payment link</a>. This page updates when the payment lands.
          </figcaption>
        </figure>
      )}
      <h3>Withdraw</h3>
      <p>Any credits not held by running jobs, back to your wallet's USDC account, without fee.</p>
      <AmountForm label="Credits to withdraw" action="Withdraw" onSubmit={pay("/withdrawals", "Withdrew")} />
      {status && <p role="status">{status}</p>}
      {error && <p role="alert">{error}</p>}
      {withdrawals.data && withdrawals.data.data.length > 0 && (
        <div class="scroll">
          <table>
            <caption>Withdrawals</caption>
            <thead>
              <tr><th>Credits</th><th>State</th><th>Time</th><th>Transaction</th></tr>
            </thead>
            <tbody>
              {withdrawals.data.data.map((w) => (
                <tr key={w.withdrawal_tx}>
                  <td>{w.credits}</td><td>{w.state}</td><td>{when(w.created_at)}</td><td><code>{w.withdrawal_tx}</code></td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
