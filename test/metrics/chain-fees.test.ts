/**
 * The fee the metrics count for a landed transaction (Chain.feePaid), on a cluster reached over
 * JSON-RPC (`svc chain serve` in its own process): the node's own record of the transaction's
 * fee, priority fee included, and on the embedded chain the same figure from the bytes.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { openChain, type Chain } from "../../src/chain/index.ts";
import { transactionFee } from "../../src/chain/tx-meta.ts";
import { parseTransaction } from "../../src/chain/wire.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import { startChainServer, type ChainServer } from "../support/chain-server.ts";

let server: ChainServer;
let chain: Chain;
before(async () => {
  server = await startChainServer({ slotMs: 50 });
  chain = await openChain({ chainUrl: server.url, keysDir: server.keysDir, priorityFeeMicroLamports: 1_000n });
});
after(async () => {
  await chain.close();
  await server.close();
});

test("a landed transaction's fee is the one the cluster recorded, its priority fee included", async () => {
  const prepared = await chain.prepareDeposit({ wallet: generateKeypair().address, credits: 3 });
  const receipt = await chain.send(prepared.wire);
  const fee = await chain.feePaid(receipt.signature, prepared.wire);
  const recorded = (await chain.backend.getTransaction(receipt.signature))!.meta!.fee;
  assert.equal(fee, BigInt(recorded));
  const signatures = BigInt(parseTransaction(prepared.wire).numSigners);
  assert.ok(fee > signatures * 5_000n, `${fee} lamports: the signatures' and a priority fee`);
  assert.equal(fee, transactionFee(parseTransaction(prepared.wire)), "what the bytes ask is what the node charged");
});

test("on the embedded chain the fee read from the bytes is the one its record holds", async () => {
  const embedded = await openChain({ priorityFeeMicroLamports: 1_000n });
  try {
    const prepared = await embedded.prepareDeposit({ wallet: generateKeypair().address, credits: 3 });
    const receipt = await embedded.send(prepared.wire);
    const recorded = (await embedded.backend.getTransaction(receipt.signature))!.meta!.fee;
    assert.equal(await embedded.feePaid(receipt.signature, prepared.wire), BigInt(recorded));
  } finally {
    await embedded.close();
  }
});
