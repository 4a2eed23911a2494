// The test wallet's code, run in the page as it is written here: plain JavaScript, so no
// compiler helper sneaks in (test-wallet.ts explains the wallet).
function registerTestWallet(init) {
  const key = crypto.subtle.importKey("pkcs8", new Uint8Array(init.pkcs8), { name: "Ed25519" }, false, ["sign"]);
  const sign = async (bytes) => new Uint8Array(await crypto.subtle.sign("Ed25519", await key, bytes));
  const account = { address: init.address, publicKey: new Uint8Array(init.publicKey), chains: ["solana:localnet"], features: ["solana:signMessage"] };
  const siws = (i) =>
    [
      `${i.domain} wants you to sign in with your Solana account:`,
      init.address,
      "",
      i.statement,
      "",
      `URI: ${i.uri}`,
      `Version: ${i.version}`,
      `Chain ID: ${i.chainId}`,
      `Nonce: ${i.nonce}`,
      `Issued At: ${i.issuedAt}`,
      `Expiration Time: ${i.expirationTime}`,
    ].join("\n");
  const features = {
    "standard:connect": { version: "1.0.0", connect: async () => ({ accounts: [account] }) },
    "standard:events": { version: "1.0.0", on: () => () => undefined },
    "solana:signMessage": {
      version: "1.1.0",
      signMessage: (...inputs) => Promise.all(inputs.map(async (i) => ({ signedMessage: i.message, signature: await sign(i.message) }))),
    },
  };
  if (init.withSignIn) {
    features["solana:signIn"] = {
      version: "1.0.0",
      signIn: (...inputs) =>
        Promise.all(
          inputs.map(async (input) => {
            const signedMessage = new TextEncoder().encode(siws(input));
            return { account, signedMessage, signature: await sign(signedMessage), signatureType: "ed25519" };
          }),
        ),
    };
  }
  const wallet = { version: "1.0.0", name: init.name, icon: "data:image/svg+xml,<svg xmlns='http://www.w3.org/2000/svg'/>", chains: ["solana:localnet"], accounts: [account], features };
  const callback = (api) => api.register(wallet);
  window.addEventListener("wallet-standard:app-ready", (event) => callback(event.detail));
  window.dispatchEvent(new CustomEvent("wallet-standard:register-wallet", { detail: callback }));
}
