/**
 * Wallet Standard discovery and the Solana features the app uses, written against the standard's
 * two window events so the bundle carries no wallet library: the app announces itself with
 * `wallet-standard:app-ready`, and wallets (loaded before or after) register through
 * `wallet-standard:register-wallet`.
 */
import { formatSignInMessage, type SignInFields } from "../../src/web/siws-message.ts";

export interface WalletAccount {
  address: string;
  publicKey: Uint8Array;
  chains: readonly string[];
  features: readonly string[];
}

export interface StandardWallet {
  name: string;
  icon: string;
  accounts: readonly WalletAccount[];
  features: Record<string, any>;
}

/** Calls `onChange` with every wallet found so far, now and whenever another registers. */
export function discoverWallets(onChange: (wallets: StandardWallet[]) => void): void {
  const wallets: StandardWallet[] = [];
  const register = (...added: StandardWallet[]) => {
    for (const wallet of added) if (!wallets.includes(wallet) && isSolanaWallet(wallet)) wallets.push(wallet);
    onChange([...wallets]);
    return () => undefined;
  };
  const api = Object.freeze({ register });
  window.addEventListener("wallet-standard:register-wallet", (event) => (event as CustomEvent).detail(api));
  window.dispatchEvent(new CustomEvent("wallet-standard:app-ready", { detail: api }));
}

function isSolanaWallet(wallet: StandardWallet): boolean {
  return "standard:connect" in wallet.features && ("solana:signIn" in wallet.features || "solana:signMessage" in wallet.features);
}

export async function connect(wallet: StandardWallet): Promise<WalletAccount> {
  const { accounts } = await wallet.features["standard:connect"].connect();
  const account = (accounts as WalletAccount[])[0];
  if (!account) throw new Error(`${wallet.name} shared no account.`);
  return account;
}

export interface SignedIn {
  address: string;
  message: Uint8Array;
  signature: Uint8Array;
}

/** Sign In With Solana: `solana:signIn` when the wallet has it, else the same message through signMessage. */
export async function signIn(wallet: StandardWallet, account: WalletAccount, input: Omit<SignInFields, "address">): Promise<SignedIn> {
  if ("solana:signIn" in wallet.features) {
    const [output] = await wallet.features["solana:signIn"].signIn({ ...input, address: account.address });
    return { address: output.account.address, message: output.signedMessage, signature: output.signature };
  }
  const message = new TextEncoder().encode(formatSignInMessage({ ...input, address: account.address }));
  const [output] = await wallet.features["solana:signMessage"].signMessage({ account, message });
  return { address: account.address, message: output.signedMessage, signature: output.signature };
}

export function toBase64(bytes: Uint8Array): string {
  let text = "";
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text);
}
