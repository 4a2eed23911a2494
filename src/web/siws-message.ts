/**
 * The Sign In With Solana message: the text `solana:signIn` wallets produce from an app's input,
 * which the page also builds itself to sign with `solana:signMessage` when a wallet lacks signIn.
 * Pure and free of Node APIs: the page's bundle and the server share it.
 */
export const SIGN_IN_STATEMENT = "Sign in to manage your credits, API key, webhooks and settings.";
export const SIGN_IN_VERSION = "1";
export interface SignInFields {
  domain: string;
  address: string;
  statement: string;
  uri: string;
  version: string;
  chainId: string;
  nonce: string;
  issuedAt: string;
  expirationTime: string;
}

const HEADER_SUFFIX = " wants you to sign in with your Solana account:";
const LINES: [keyof SignInFields, string][] = [
  ["uri", "URI"],
  ["version", "Version"],
  ["chainId", "Chain ID"],
  ["nonce", "Nonce"],
  ["issuedAt", "Issued At"],
  ["expirationTime", "Expiration Time"],
];

export function formatSignInMessage(f: SignInFields): string {
  const head = [`${f.domain}${HEADER_SUFFIX}`, f.address, "", f.statement, ""];
  return [...head, ...LINES.map(([key, label]) => `${label}: ${f[key]}`)].join("\n");
}

/** The fields of a message in the standard layout; undefined when it is not one. */
export function parseSignInMessage(text: string): SignInFields | undefined {
  const lines = text.split("\n");
  if (lines.length !== 5 + LINES.length || !lines[0]!.endsWith(HEADER_SUFFIX) || lines[2] !== "" || lines[4] !== "") return undefined;
  const fields: Partial<SignInFields> = { domain: lines[0]!.slice(0, -HEADER_SUFFIX.length), address: lines[1]!, statement: lines[3]! };
  for (const [i, [key, label]] of LINES.entries()) {
    const line = lines[5 + i]!;
    if (!line.startsWith(`${label}: `)) return undefined;
    fields[key] = line.slice(label.length + 2);
  }
  return fields as SignInFields;
}
