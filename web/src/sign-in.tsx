/** Connect a Wallet Standard wallet and Sign In With Solana; in `svc dev`, or use the dev wallet. */
import { useEffect, useState } from "preact/hooks";
import { api } from "./api.ts";
import { connect, discoverWallets, signIn, toBase64, type StandardWallet, type WalletAccount } from "./wallets.ts";

export function SignInPage({ onSignedIn }: { onSignedIn: (wallet: string) => void }) {
  const [wallets, setWallets] = useState<StandardWallet[]>([]);
  const [choosing, setChoosing] = useState(false);
  const [connected, setConnected] = useState<{ wallet: StandardWallet; account: WalletAccount } | null>(null);
  const [devWallet, setDevWallet] = useState<string | null>(null);
  const [error, setError] = useState("");
  useEffect(() => {
    discoverWallets(setWallets);
    api("GET", "/config").then((c) => setDevWallet(c.dev_wallet));
  }, []);

  const attempt = (action: () => Promise<void>) => () => {
    setError("");
    action().catch((e: Error) => setError(e.message));
  };
  const choose = (wallet: StandardWallet) =>
    attempt(async () => {
      setConnected({ wallet, account: await connect(wallet) });
      setChoosing(false);
    });
  const signInWithWallet = attempt(async () => {
    const input = await api("POST", "/session/nonce");
    const signed = await signIn(connected!.wallet, connected!.account, input);
    const session = await api("POST", "/session", { address: signed.address, message: toBase64(signed.message), signature: toBase64(signed.signature) });
    onSignedIn(session.wallet);
  });
  const useDevWallet = attempt(async () => onSignedIn((await api("POST", "/session/dev")).wallet));

  return (
    <main class="sign-in">
      <h1>svc</h1>
      <p>Sign in with your Solana wallet to manage your credits, API key, webhooks and settings.</p>
      {!connected && (
        <button type="button" onClick={() => setChoosing(true)}>
          Connect wallet
        </button>
      )}
      {choosing && !connected && (
        <ul aria-label="Wallets" class="wallets">
          {wallets.length === 0 && <li>No wallet found in this browser. Install a Solana wallet that supports the Wallet Standard.</li>}
          {wallets.map((w) => (
            <li key={w.name}>
              <button type="button" onClick={choose(w)}>
                {w.icon && <img src={w.icon} alt="" width={20} height={20} />} {w.name}
              </button>
            </li>
          ))}
        </ul>
      )}
      {connected && (
        <p>
          {connected.wallet.name}: <code>{connected.account.address}</code>{" "}
          <button type="button" onClick={signInWithWallet}>
            Sign in
          </button>
        </p>
      )}
      {devWallet && (
        <p>
          <button type="button" onClick={useDevWallet}>
            Use the dev wallet
          </button>{" "}
          (development only: <code>{devWallet}</code>)
        </p>
      )}
      {error && <p role="alert">{error}</p>}
    </main>
  );
}
