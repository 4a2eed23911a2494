/**
 * Credit vaults: opened once per wallet at its program address, filled by plain token transfers,
 * emptied only by the wallet's own signed withdrawal to a token account of its own; and program
 * addresses that someone funded ahead of time still open.
 */
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { tokenTransfer } from "../../src/chain/instructions.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import { Rent } from "litesvm";
import { createNoopSigner } from "@solana/kit";
import { getTransferSolInstruction } from "@solana-program/system";
import { addressBytes } from "../../src/chain/addresses.ts";
import {
  decodeEscrow,
  escrowAddress,
  escrowInstructions as ix,
  escrowPoolAddress,
  vaultAddress,
} from "../../src/chain/escrow-program/index.ts";
import { EscrowChain, customError, demote, substitute } from "./harness.ts";

describe("credit vaults", () => {
  let chain: EscrowChain;
  before(async () => {
    chain = await EscrowChain.open();
  });

  test("a vault opens once, at the wallet's program address, as a USDC account of the vault authority", () => {
    const { wallet, vault } = chain.fundedWallet(0n);
    const data = chain.data(vault)!;
    assert.equal(data.length, 165);
    assert.equal(chain.svm.getBalance(addressBytes(vault)), chain.svm.minimumBalanceForRentExemption(165n), "exactly rent-exempt");
    const again = chain.send([ix.openVault({ payer: chain.payer.address, wallet: wallet.address, usdcMint: chain.usdcMint.address })]);
    assert.equal(again.err, customError("alreadyExists"));
    const wrongMint = ix.openVault({ payer: chain.payer.address, wallet: generateKeypair().address, usdcMint: chain.stakeMint.address });
    assert.equal(chain.send([wrongMint]).err, customError("wrongAddress"));
    const elsewhere = substitute(ix.openVault({ payer: chain.payer.address, wallet: wallet.address, usdcMint: chain.usdcMint.address }), 2, generateKeypair().address);
    assert.equal(chain.send([elsewhere]).err, customError("wrongAddress"), "only at the derived address");
  });

  test("a deposit is a plain token transfer; the owner withdraws to its own account", () => {
    const { wallet, vault, own } = chain.fundedWallet(0n);
    chain.mint(own, chain.usdcMint.address, 500_000n);
    chain.expectOk(chain.send([tokenTransfer({ from: own, to: vault, authority: wallet.address, amount: 400_000n })], [wallet]));
    assert.equal(chain.balance(vault), 400_000n);
    chain.expectOk(chain.send([ix.withdraw({ wallet: wallet.address, destination: own, amount: 150_000n })], [wallet]));
    assert.equal(chain.balance(vault), 250_000n);
    assert.equal(chain.balance(own), 250_000n);
    chain.expectOk(chain.send([ix.withdraw({ wallet: wallet.address, destination: own, amount: 250_000n })], [wallet]));
    assert.equal(chain.balance(vault), 0n, "the whole vault can be withdrawn");
  });

  test("refusals: beyond the vault, zero, unsigned, another wallet, someone else's account, another mint", () => {
    const { wallet, vault, own } = chain.fundedWallet(100_000n);
    const thief = generateKeypair();
    const thiefAccount = chain.tokenAccount(thief.address, chain.usdcMint.address);
    const cases: [string, ReturnType<typeof chain.send>, string][] = [
      ["beyond the vault", chain.send([ix.withdraw({ wallet: wallet.address, destination: own, amount: 100_001n })], [wallet]), customError("insufficientFunds")],
      ["u64 max", chain.send([ix.withdraw({ wallet: wallet.address, destination: own, amount: 2n ** 64n - 1n })], [wallet]), customError("insufficientFunds")],
      ["zero", chain.send([ix.withdraw({ wallet: wallet.address, destination: own, amount: 0n })], [wallet]), customError("invalidAmount")],
      ["unsigned", chain.send([demote(ix.withdraw({ wallet: wallet.address, destination: own, amount: 1n }), 1)]), customError("missingSigner")],
      // The thief signs for itself but names the victim's vault: the vault is not derived from the signer.
      ["another wallet's vault", chain.send([substitute(ix.withdraw({ wallet: thief.address, destination: thiefAccount, amount: 1n }), 2, vault)], [thief]), customError("wrongAddress")],
      ["to someone else's account", chain.send([ix.withdraw({ wallet: wallet.address, destination: thiefAccount, amount: 1n })], [wallet]), customError("wrongTokenOwner")],
      ["to the escrow pool", chain.send([ix.withdraw({ wallet: wallet.address, destination: escrowPoolAddress().address, amount: 1n })], [wallet]), customError("wrongTokenOwner")],
      ["to an account of another mint", chain.send([ix.withdraw({ wallet: wallet.address, destination: chain.tokenAccount(wallet.address, chain.stakeMint.address), amount: 1n })], [wallet]), customError("wrongMint")],
      ["a look-alike vault", chain.send([substitute(ix.withdraw({ wallet: wallet.address, destination: own, amount: 1n }), 2, own)], [wallet]), customError("wrongAddress")],
    ];
    for (const [name, sent, err] of cases) assert.equal(sent.err, err, name);
    assert.equal(chain.balance(vault), 100_000n, "nothing left the vault");
    assert.equal(chain.balance(thiefAccount), 0n);
    assert.equal(vaultAddress(wallet.address).address, vault);
  });
});

test("lamports sent ahead to a vault's or an escrow's address do not block its creation", async () => {
  const chain = await EscrowChain.open();
  const wallet = generateKeypair();
  const vault = vaultAddress(wallet.address).address;
  const jobId = "job_prefunded";
  const escrow = escrowAddress(jobId).address;
  const griefer = generateKeypair();
  chain.svm.airdrop(addressBytes(griefer.address), 10_000_000n);
  for (const target of [vault, escrow]) {
    chain.expectOk(chain.send([getTransferSolInstruction({ source: createNoopSigner(griefer.address), destination: target, amount: 1_000_000n })], [griefer]));
  }
  chain.expectOk(chain.send([ix.openVault({ payer: chain.payer.address, wallet: wallet.address, usdcMint: chain.usdcMint.address })]));
  chain.mint(vault, chain.usdcMint.address, 50_000n);
  chain.expectOk(chain.send([ix.lock({ serviceAuthority: chain.authority.address, payer: chain.payer.address, wallet: wallet.address, jobId, tier: 0, amount: 50_000n })], [chain.authority]));
  assert.equal(chain.balance(escrowPoolAddress().address), 50_000n);
  assert.equal(decodeEscrow(chain.data(escrow)!).amountLocked, 50_000n);
  const rent = chain.svm.minimumBalanceForRentExemption(256n);
  assert.equal(chain.svm.getBalance(addressBytes(escrow)), rent, "topped up to exactly rent-exempt");
});

test("accounts are funded at the rent sysvar's minimum whatever its threshold (an f64 read without floats)", async () => {
  const chain = await EscrowChain.open();
  for (const [perByteYear, threshold] of [[3480n, 2.0], [3480n, 1.5], [6960n, 1.0], [1000n, 0.75]] as const) {
    chain.svm.setRent(new Rent(perByteYear, threshold, 50));
    const { vault } = chain.fundedWallet(0n);
    const expected = chain.svm.minimumBalanceForRentExemption(165n);
    assert.equal(chain.svm.getBalance(addressBytes(vault)), expected, `threshold ${threshold}`);
  }
});
