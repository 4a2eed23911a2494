/**
 * The embedded chain's JSON-RPC server, driven by @solana/kit's own RPC client, subscriptions and
 * send-and-confirm factory against a real (in-memory) LiteSVM chain on loopback.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  airdropFactory,
  assertIsTransactionWithBlockhashLifetime,
  appendTransactionMessageInstructions,
  createSolanaRpc,
  createSolanaRpcSubscriptions,
  createTransactionMessage,
  getBase58Decoder,
  getBase64EncodedWireTransaction,
  getTransactionEncoder,
  devnet,
  generateKeyPairSigner,
  getSignatureFromTransaction,
  isSolanaError,
  lamports,
  pipe,
  sendAndConfirmTransactionFactory,
  setTransactionMessageFeePayerSigner,
  setTransactionMessageLifetimeUsingBlockhash,
  signTransactionMessageWithSigners,
  SOLANA_ERROR__JSON_RPC__INVALID_PARAMS,
  SOLANA_ERROR__JSON_RPC__METHOD_NOT_FOUND,
  SOLANA_ERROR__JSON_RPC__SERVER_ERROR_SEND_TRANSACTION_PREFLIGHT_FAILURE,
  SOLANA_ERROR__JSON_RPC__SERVER_ERROR_TRANSACTION_SIGNATURE_VERIFICATION_FAILURE,
  SOLANA_ERROR__TRANSACTION_ERROR__BLOCKHASH_NOT_FOUND,
  SOLANA_ERROR__TRANSACTION_ERROR__INSUFFICIENT_FUNDS_FOR_RENT,
  type Address,
  type Base64EncodedWireTransaction,
  type Instruction,
  type KeyPairSigner,
  type Signature,
} from "@solana/kit";
import { getTransferSolInstruction } from "@solana-program/system";
import { openChain, startChainRpc, startChainRpcThread, type Chain, type ChainRpcServer } from "../../src/chain/index.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import { newId } from "../../src/core/ids.ts";
import { outputHash, proofMessage } from "../../src/core/proof.ts";
import { creditsToBaseUnits } from "../../src/core/units.ts";
import { ESCROW_PROGRAM, escrowPoolAddress } from "../../src/chain/escrow-program/index.ts";
import { tempDir } from "../support/service.ts";

const SOL = 1_000_000_000n;

/** The dev-only USDC faucet is a custom method kit's typed API does not know; kit's client still calls it. */
type WithUsdcFaucet = { requestUsdcAirdrop(owner: Address, amount: number): { send(): Promise<Signature> } };

/** Typed as devnet, the cluster kind whose API includes airdrops. */
function clients(server: ChainRpcServer) {
  return { rpc: createSolanaRpc(devnet(server.url)), rpcSubscriptions: createSolanaRpcSubscriptions(devnet(server.wsUrl)) };
}

/** The server in this thread (`svc chain serve`), and on a thread of its own beside a gateway (`svc dev`, `svc serve`). */
const SERVERS = [["in the chain's owner thread", startChainRpc], ["on a thread of its own", startChainRpcThread]] as const;

for (const [where, start] of SERVERS) describe(`Solana JSON-RPC over the embedded chain, served ${where}`, () => {
  let chain: Chain;
  let server: ChainRpcServer;
  let rpc: ReturnType<typeof clients>["rpc"];
  let rpcSubscriptions: ReturnType<typeof clients>["rpcSubscriptions"];
  let payer: KeyPairSigner;

  before(async () => {
    chain = await openChain({ slotMs: 100 });
    server = await start({ chain, port: 0, faucet: true });
    ({ rpc, rpcSubscriptions } = clients(server));
    payer = await generateKeyPairSigner();
    await airdropFactory({ rpc, rpcSubscriptions })({ recipientAddress: payer.address, lamports: lamports(10n * SOL), commitment: "confirmed" });
  });
  after(async () => {
    await server.close();
    await chain.close();
  });

  async function sign(instructions: Instruction[]) {
    const { value: blockhash } = await rpc.getLatestBlockhash().send();
    const message = pipe(
      createTransactionMessage({ version: "legacy" }),
      (m) => setTransactionMessageFeePayerSigner(payer, m),
      (m) => setTransactionMessageLifetimeUsingBlockhash(blockhash, m),
      (m) => appendTransactionMessageInstructions(instructions, m),
    );
    const signed = await signTransactionMessageWithSigners(message);
    assertIsTransactionWithBlockhashLifetime(signed);
    return signed;
  }

  async function sendAndConfirm(instructions: Instruction[]): Promise<Signature> {
    const signed = await sign(instructions);
    await sendAndConfirmTransactionFactory({ rpc, rpcSubscriptions })(signed, { commitment: "confirmed" });
    return getSignatureFromTransaction(signed);
  }

  test("an airdrop lands as a transaction whose status, balance and history the client reads", async () => {
    assert.equal((await rpc.getBalance(payer.address).send()).value, 10n * SOL);
    const [signature] = await rpc.getSignaturesForAddress(payer.address).send();
    assert.ok(signature);
    const { value: statuses } = await rpc.getSignatureStatuses([signature.signature]).send();
    assert.equal(statuses[0]?.confirmationStatus, "finalized");
    assert.equal(statuses[0]?.err, null);
    assert.match(signature.memo ?? "", /^\[\d+\] svc:airdrop /);
  });

  test("balances before a transaction count what changed the accounts since the last one wrote them", async () => {
    // Each airdrop tops up the faucet key outside any transaction, then sends from it: the second
    // transfer's balances before it must show the top-up, not the empty faucet the first left.
    const recipient = generateKeypair().address;
    const airdrop = airdropFactory({ rpc, rpcSubscriptions });
    await airdrop({ recipientAddress: recipient, lamports: lamports(SOL), commitment: "confirmed" });
    const second = await airdrop({ recipientAddress: recipient, lamports: lamports(2n * SOL), commitment: "confirmed" });
    const tx = await rpc.getTransaction(second, { encoding: "json", maxSupportedTransactionVersion: 0 }).send();
    assert.ok(tx?.meta);
    const faucet = 0; // the fee payer, first of the keys
    const to = tx.transaction.message.accountKeys.indexOf(recipient);
    assert.equal(tx.meta.preBalances[faucet], 2n * SOL + 5_000n);
    assert.equal(tx.meta.postBalances[faucet], 0n);
    assert.equal(tx.meta.preBalances[to], SOL);
    assert.equal(tx.meta.postBalances[to], 3n * SOL);
  });

  test("a transfer confirmed through kit's factory, with fee and balances in getTransaction", async () => {
    const recipient = generateKeypair().address;
    const signature = await sendAndConfirm([getTransferSolInstruction({ source: payer, destination: recipient, amount: 2n * SOL })]);
    assert.equal((await rpc.getBalance(recipient).send()).value, 2n * SOL);

    const tx = await rpc.getTransaction(signature, { encoding: "json", maxSupportedTransactionVersion: 0 }).send();
    assert.ok(tx?.meta);
    assert.equal(tx.meta.err, null);
    assert.equal(tx.meta.fee, 5_000n);
    assert.equal(tx.version, "legacy");
    assert.ok(typeof tx.blockTime === "bigint" && Math.abs(Number(tx.blockTime) - Date.now() / 1000) < 120, "blockTime is about now");
    const keys = tx.transaction.message.accountKeys;
    const at = (a: Address) => keys.indexOf(a);
    assert.equal(tx.meta.preBalances[at(payer.address)]! - tx.meta.postBalances[at(payer.address)]!, 2n * SOL + 5_000n);
    assert.equal(tx.meta.postBalances[at(recipient)], 2n * SOL);
    assert.ok(tx.meta.logMessages?.some((l) => l.startsWith("Program 11111111111111111111111111111111 success")));
    const encoded = await rpc.getTransaction(signature, { encoding: "base64", maxSupportedTransactionVersion: 0 }).send();
    assert.equal(encoded?.transaction[1], "base64");
  });

  test("a failing transaction is refused at preflight as kit's error, with the logs, and does not land", async () => {
    const poor = await generateKeyPairSigner();
    // Below the rent-exempt minimum: the runtime refuses to create the account.
    const attempt = sendAndConfirm([getTransferSolInstruction({ source: payer, destination: poor.address, amount: 1n })]);
    await assert.rejects(attempt, (err: unknown) => {
      assert.ok(isSolanaError(err, SOLANA_ERROR__JSON_RPC__SERVER_ERROR_SEND_TRANSACTION_PREFLIGHT_FAILURE), String(err));
      assert.ok(isSolanaError(err.cause, SOLANA_ERROR__TRANSACTION_ERROR__INSUFFICIENT_FUNDS_FOR_RENT), String(err.cause));
      assert.ok(Array.isArray(err.context.logs));
      return true;
    });
    assert.equal((await rpc.getBalance(poor.address).send()).value, 0n);
  });

  test("with skipPreflight a failing transaction lands, pays its fee, and kit's confirmation raises its error", async () => {
    const signed = await sign([getTransferSolInstruction({ source: payer, destination: generateKeypair().address as Address, amount: 1n })]);
    const before = (await rpc.getBalance(payer.address).send()).value;
    const attempt = sendAndConfirmTransactionFactory({ rpc, rpcSubscriptions })(signed, { commitment: "confirmed", skipPreflight: true });
    await assert.rejects(attempt, (err: unknown) => isSolanaError(err, SOLANA_ERROR__TRANSACTION_ERROR__INSUFFICIENT_FUNDS_FOR_RENT));
    const tx = await rpc.getTransaction(getSignatureFromTransaction(signed), { encoding: "json", maxSupportedTransactionVersion: 0 }).send();
    assert.deepEqual(tx?.meta?.err, { InsufficientFundsForRent: { account_index: 1n } });
    assert.equal(before - (await rpc.getBalance(payer.address).send()).value, 5_000n, "only the fee moved");
  });

  test("simulateTransaction runs without landing; sendTransaction also takes base58", async () => {
    const recipient = generateKeypair().address as Address;
    const signed = await sign([getTransferSolInstruction({ source: payer, destination: recipient, amount: SOL })]);
    const { value: sim } = await rpc.simulateTransaction(getBase64EncodedWireTransaction(signed), { encoding: "base64" }).send();
    assert.equal(sim.err, null);
    assert.ok(sim.logs?.length && sim.unitsConsumed && sim.unitsConsumed > 0n);
    assert.equal((await rpc.getBalance(recipient).send()).value, 0n, "a simulation moves nothing");
    const base58 = getBase58Decoder().decode(getTransactionEncoder().encode(signed));
    const sendBase58 = rpc.sendTransaction(base58 as unknown as Base64EncodedWireTransaction, { encoding: "base58" } as unknown as { encoding: "base64" });
    assert.equal(await sendBase58.send(), getSignatureFromTransaction(signed));
    assert.equal((await rpc.getBalance(recipient).send()).value, SOL);
  });

  test("a service-made escrow lock and settlement read back with logs, token balances and history", async () => {
    const wallet = generateKeypair().address;
    const worker = generateKeypair();
    const jobId = newId("job");
    await chain.deposit({ wallet, credits: 100 });
    const lock = await chain.lockEscrow({ jobId, tier: "standard", wallet, credits: 10 });
    const proofHash = outputHash("the output");
    const settle = await chain.settle({
      jobId, wallet, creditsLocked: 10, creditsCharged: 4, workerPublicKey: worker.address,
      proofHash, proofSignature: worker.sign(proofMessage(jobId, proofHash)),
    });

    const tx = await rpc.getTransaction(settle.signature as Signature, { encoding: "json", maxSupportedTransactionVersion: 0 }).send();
    assert.ok(tx?.meta);
    assert.equal(tx.slot, BigInt(settle.slot));
    assert.equal(tx.meta.fee, 10_000n, "the service authority's signature (it pays its own fees), and the worker's the precompile verifies");
    assert.equal(tx.transaction.signatures.length, 1, "one signature: the authority is the fee payer");
    assert.equal(tx.transaction.message.accountKeys[0], chain.serviceAuthority, "and pays");
    assert.ok(tx.meta.logMessages?.some((l) => l.startsWith(`Program ${ESCROW_PROGRAM} success`)), "the escrow program's log line");
    const keys = tx.transaction.message.accountKeys;
    const ataProgram = keys.indexOf("ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL" as Address);
    const ataCall = tx.transaction.message.instructions.findIndex((i) => i.programIdIndex === ataProgram);
    assert.ok(tx.meta.innerInstructions?.find((i) => i.index === ataCall)?.instructions.length, "the calls the associated token program made");
    const poolIndex = tx.transaction.message.accountKeys.indexOf(escrowPoolAddress().address);
    const pre = tx.meta.preTokenBalances?.find((b) => b.accountIndex === poolIndex);
    const post = tx.meta.postTokenBalances?.find((b) => b.accountIndex === poolIndex);
    assert.equal(BigInt(pre!.uiTokenAmount.amount) - BigInt(post!.uiTokenAmount.amount), creditsToBaseUnits(10), "the whole lock left the pool");
    assert.equal(pre?.mint, chain.mint);
    const workerIndex = tx.transaction.message.accountKeys.indexOf(chain.workerTokenAccount(worker.address));
    const paid = tx.meta.postTokenBalances?.find((b) => b.accountIndex === workerIndex);
    assert.equal(paid?.owner, worker.address);
    assert.equal(BigInt(paid?.uiTokenAmount.amount ?? -1), creditsToBaseUnits(3), "75% of 4 credits");

    const history = await rpc.getSignaturesForAddress(lock.escrowAddress).send();
    assert.deepEqual(history.map((h) => h.signature), [settle.signature, lock.signature], "newest first");
    const page = await rpc.getSignaturesForAddress(lock.escrowAddress, { limit: 1, before: settle.signature as Signature }).send();
    assert.deepEqual(page.map((h) => h.signature), [lock.signature]);
  });

  test("test USDC from the dev faucet shows in token balances and token accounts by owner", async () => {
    const owner = generateKeypair().address;
    const signature = await (rpc as unknown as WithUsdcFaucet).requestUsdcAirdrop(owner, 2_500_000).send();
    const { value: statuses } = await rpc.getSignatureStatuses([signature]).send();
    assert.equal(statuses[0]?.err, null);
    const ata = chain.workerTokenAccount(owner);
    const { value: balance } = await rpc.getTokenAccountBalance(ata).send();
    assert.equal(balance.amount, "2500000");
    assert.equal(balance.uiAmountString, "2.5", "with the mint's 6 decimals");
    const { value: owned } = await rpc.getTokenAccountsByOwner(owner, { mint: chain.mint }, { encoding: "jsonParsed" }).send();
    assert.equal(owned.length, 1);
    assert.equal(owned[0]!.pubkey, ata);
    assert.equal(owned[0]!.account.data.parsed.info.tokenAmount.amount, "2500000");
    const { value: raw } = await rpc.getAccountInfo(ata, { encoding: "base64" }).send();
    assert.equal(Buffer.from(raw!.data[0], "base64").length, 165);
  });

  test("accountSubscribe notifies when the account changes", async () => {
    const watched = generateKeypair().address as Address;
    const abort = new AbortController();
    const notifications = await rpcSubscriptions.accountNotifications(watched, { encoding: "base64" }).subscribe({ abortSignal: abort.signal });
    const first = (async () => {
      for await (const n of notifications) return n;
    })();
    await sendAndConfirm([getTransferSolInstruction({ source: payer, destination: watched, amount: SOL })]);
    const notification = await first;
    abort.abort();
    assert.equal(notification?.value.lamports, SOL);
    assert.equal(notification?.value.owner, "11111111111111111111111111111111");
  });

  test("bad params and unknown methods are JSON-RPC errors with Solana's codes", async () => {
    await assert.rejects(rpc.getBalance("not-an-address" as Address).send(), (err: unknown) => isSolanaError(err, SOLANA_ERROR__JSON_RPC__INVALID_PARAMS));
    await assert.rejects(rpc.getTransaction("1" as Signature).send(), (err: unknown) => isSolanaError(err, SOLANA_ERROR__JSON_RPC__INVALID_PARAMS));
    await assert.rejects(rpc.getAccountInfo(payer.address, { encoding: "base64+zstd" }).send(), (err: unknown) => isSolanaError(err, SOLANA_ERROR__JSON_RPC__INVALID_PARAMS));
    const unknown = (rpc as unknown as { getBlockProduction(): { send(): Promise<unknown> } }).getBlockProduction();
    await assert.rejects(unknown.send(), (err: unknown) => isSolanaError(err, SOLANA_ERROR__JSON_RPC__METHOD_NOT_FOUND));
  });

  test("forged signatures, versioned transactions and expired blockhashes are refused before they land", async () => {
    const recipient = generateKeypair().address as Address;
    const signed = await sign([getTransferSolInstruction({ source: payer, destination: recipient, amount: SOL })]);
    const wire = new Uint8Array(getTransactionEncoder().encode(signed));
    wire[1]! ^= 1; // the fee payer's signature
    const forged = Buffer.from(wire).toString("base64") as Base64EncodedWireTransaction;
    await assert.rejects(rpc.sendTransaction(forged, { encoding: "base64" }).send(), (err: unknown) =>
      isSolanaError(err, SOLANA_ERROR__JSON_RPC__SERVER_ERROR_TRANSACTION_SIGNATURE_VERIFICATION_FAILURE));

    const { value: blockhash } = await rpc.getLatestBlockhash().send();
    const v0 = await signTransactionMessageWithSigners(pipe(
      createTransactionMessage({ version: 0 }),
      (m) => setTransactionMessageFeePayerSigner(payer, m),
      (m) => setTransactionMessageLifetimeUsingBlockhash(blockhash, m),
      (m) => appendTransactionMessageInstructions([getTransferSolInstruction({ source: payer, destination: recipient, amount: SOL })], m),
    ));
    await assert.rejects(rpc.sendTransaction(getBase64EncodedWireTransaction(v0), { encoding: "base64" }).send(), (err: unknown) =>
      isSolanaError(err, SOLANA_ERROR__JSON_RPC__INVALID_PARAMS));

    const stale = await signTransactionMessageWithSigners(pipe(
      createTransactionMessage({ version: "legacy" }),
      (m) => setTransactionMessageFeePayerSigner(payer, m),
      (m) => setTransactionMessageLifetimeUsingBlockhash({ ...blockhash, blockhash: recipient as unknown as typeof blockhash.blockhash }, m),
      (m) => appendTransactionMessageInstructions([getTransferSolInstruction({ source: payer, destination: recipient, amount: SOL })], m),
    ));
    await assert.rejects(rpc.sendTransaction(getBase64EncodedWireTransaction(stale), { encoding: "base64", skipPreflight: true }).send(), (err: unknown) => {
      assert.ok(isSolanaError(err, SOLANA_ERROR__JSON_RPC__SERVER_ERROR_SEND_TRANSACTION_PREFLIGHT_FAILURE), String(err));
      assert.ok(isSolanaError(err.cause, SOLANA_ERROR__TRANSACTION_ERROR__BLOCKHASH_NOT_FOUND), String(err.cause));
      return true;
    });
    assert.equal((await rpc.getBalance(recipient).send()).value, 0n);
  });

  test("a batch of calls gets one response; a body that is not JSON is a parse error", async () => {
    // kit sends one call per request, so the batch form is exercised directly.
    const post = (body: string) => fetch(server.url, { method: "POST", headers: { "Content-Type": "application/json" }, body }).then((r) => r.json());
    const batch = (await post(JSON.stringify([
      { jsonrpc: "2.0", id: 1, method: "getHealth" },
      { jsonrpc: "2.0", id: 2, method: "getBalance", params: ["nope"] },
    ]))) as { id: number; result?: unknown; error?: { code: number } }[];
    assert.deepEqual(batch.map((r) => [r.id, r.result ?? r.error?.code]), [[1, "ok"], [2, -32602]]);
    assert.equal(((await post("{")) as { error: { code: number } }).error.code, -32700);
  });

  test("cluster methods agree with each other", async () => {
    const { value: latest } = await rpc.getLatestBlockhash().send();
    assert.equal((await rpc.isBlockhashValid(latest.blockhash).send()).value, true);
    const slot = await rpc.getSlot().send();
    const epoch = await rpc.getEpochInfo().send();
    assert.ok(epoch.absoluteSlot >= slot && latest.lastValidBlockHeight > epoch.blockHeight);
    assert.equal(await rpc.getHealth().send(), "ok");
    const signed = await sign([getTransferSolInstruction({ source: payer, destination: generateKeypair().address as Address, amount: SOL })]);
    const message = Buffer.from(signed.messageBytes).toString("base64") as Parameters<typeof rpc.getFeeForMessage>[0];
    assert.equal((await rpc.getFeeForMessage(message).send()).value, 5_000n, "one signature");
    assert.equal(await rpc.getGenesisHash().send(), await rpc.getGenesisHash().send());
    assert.equal(await rpc.getMinimumBalanceForRentExemption(0n).send(), 890_880n);
    assert.ok((await rpc.getVersion().send())["solana-core"]);
  });
});

describe("a default port that is taken", () => {
  test("is given up for a free one instead of crashing the process", async () => {
    const chain = await openChain({});
    const first = await startChainRpc({ chain, port: 0 });
    try {
      const second = await startChainRpc({ chain, port: first.port, orFreePort: true });
      assert.notEqual(second.port, first.port);
      assert.equal(await createSolanaRpc(second.url).getHealth().send(), "ok");
      await second.close();
      await assert.rejects(startChainRpc({ chain, port: first.port }), /EADDRINUSE/, "an explicit port is not replaced");
    } finally {
      await first.close();
      await chain.close();
    }
  });
});

describe("transactions sent over JSON-RPC are journaled with the chain", () => {
  test("after a restart of the chain, getTransaction and getSignaturesForAddress still answer with the metadata", async () => {
    const dir = await tempDir("svc-rpc-journal-");
    try {
      const first = await openChain({ dataDir: dir.path, slotMs: 100 });
      const firstServer = await startChainRpc({ chain: first, port: 0, faucet: true });
      const { rpc, rpcSubscriptions } = clients(firstServer);
      const wallet = await generateKeyPairSigner();
      const signature = await airdropFactory({ rpc, rpcSubscriptions })({ recipientAddress: wallet.address, lamports: lamports(SOL), commitment: "confirmed" });
      const before = await rpc.getTransaction(signature, { encoding: "json", maxSupportedTransactionVersion: 0 }).send();
      await firstServer.close();
      await first.close();

      const second = await openChain({ dataDir: dir.path, slotMs: 100 });
      const secondServer = await startChainRpc({ chain: second, port: 0 });
      try {
        const again = clients(secondServer).rpc;
        assert.equal((await again.getBalance(wallet.address).send()).value, SOL);
        const after = await again.getTransaction(signature, { encoding: "json", maxSupportedTransactionVersion: 0 }).send();
        assert.ok(after?.meta && before?.meta);
        assert.deepEqual(after, before, "the same transaction, slot, time and balances");
        assert.deepEqual((await again.getSignaturesForAddress(wallet.address).send()).map((s) => s.signature), [signature]);
        await assert.rejects(
          (again as unknown as { requestAirdrop(a: Address, l: number): { send(): Promise<unknown> } }).requestAirdrop(wallet.address, 1).send(),
          (err: unknown) => isSolanaError(err, SOLANA_ERROR__JSON_RPC__METHOD_NOT_FOUND),
          "airdrops only where the faucet is on",
        );
      } finally {
        await secondServer.close();
        await second.close();
      }
    } finally {
      await dir.remove();
    }
  });
});
