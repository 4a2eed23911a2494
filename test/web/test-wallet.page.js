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
  // Fills the wallet's slot of a legacy transaction: signature count (one byte), the signatures,
  // then the message, whose header is 3 bytes and a one-byte key count before the keys.
  features["solana:signTransaction"] = {
    version: "1.0.0",
    supportedTransactionVersions: ["legacy"],
    signTransaction: (...inputs) =>
      Promise.all(
        inputs.map(async (input) => {
          const tx = new Uint8Array(input.transaction);
          const count = tx[0];
          const message = tx.subarray(1 + 64 * count);
          const mine = new Uint8Array(init.publicKey);
          for (let k = 0; k < count; k++) {
            const key = message.subarray(4 + 32 * k, 36 + 32 * k);
            if (key.every((b, i) => b === mine[i])) tx.set(await sign(message), 1 + 64 * k);
          }
          return { signedTransaction: tx };
        }),
      ),
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
