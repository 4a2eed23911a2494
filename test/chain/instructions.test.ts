/**
 * The hand-built encodings (base58, instructions, derivations, the legacy wire format) agree
 * byte for byte with @solana/kit and the program clients.
 */
import assert from "node:assert/strict";
import { randomBytes, verify, createPublicKey } from "node:crypto";
import { test } from "node:test";
import {
  createAddressWithSeed,
  createNoopSigner,
  decompileTransactionMessage,
  getBase58Codec,
  getCompiledTransactionMessageDecoder,
  getTransactionDecoder,
  type Address,
  type Instruction,
} from "@solana/kit";
import { getCreateAccountWithSeedInstruction } from "@solana-program/system";
import {
  findAssociatedTokenPda,
  getCloseAccountInstruction,
  getCreateAssociatedTokenIdempotentInstruction,
  getInitializeAccount3Instruction,
  getMintToInstruction,
  getTransferInstruction,
} from "@solana-program/token";
import { getAddMemoInstruction } from "@solana-program/memo";
import { AssociatedTokenAddresses, MEMO_PROGRAM, TOKEN_PROGRAM, addressWithSeed } from "../../src/chain/addresses.ts";
import { base58Decode, base58Encode } from "../../src/core/base58.ts";
import * as ix from "../../src/chain/instructions.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import { buildTransaction, parseTransaction } from "../../src/chain/wire.ts";

const addr = () => generateKeypair().address;

function shape(i: Instruction) {
  return {
    programAddress: i.programAddress,
    accounts: (i.accounts ?? []).map((a) => ({ address: a.address, role: a.role })),
    data: Buffer.from(i.data ?? []).toString("hex"),
  };
}

test("base58 matches kit for addresses, signatures, leading zeros and empty input", () => {
  const kit = getBase58Codec();
  for (let i = 0; i < 500; i++) {
    const bytes = randomBytes([32, 64, 0, 1, 7][i % 5]!);
    if (i % 3 === 0 && bytes.length > 2) bytes.fill(0, 0, 2);
    const text = kit.decode(bytes);
    assert.equal(base58Encode(bytes), text);
    assert.deepEqual(Buffer.from(base58Decode(text)), bytes);
  }
  assert.throws(() => base58Decode("0OIl"), /not base58/);
  assert.throws(() => base58Decode("abc", 32), /32 bytes/);
});

test("token, system, associated-token and memo instructions encode as the program clients do", () => {
  const [a, b, c, d] = [addr(), addr(), addr(), addr()];
  const signer = (x: Address) => createNoopSigner(x);
  const pairs: [Instruction, Instruction][] = [
    [ix.tokenTransfer({ from: a, to: b, authority: c, amount: 123_456n }), getTransferInstruction({ source: a, destination: b, authority: signer(c), amount: 123_456n })],
    [ix.mintTo({ mint: a, to: b, authority: c, amount: 10_000n }), getMintToInstruction({ mint: a, token: b, mintAuthority: signer(c), amount: 10_000n })],
    [ix.closeTokenAccount({ account: a, destination: b, authority: c }), getCloseAccountInstruction({ account: a, destination: b, owner: signer(c) })],
    [ix.initializeTokenAccount({ account: a, mint: b, owner: c }), getInitializeAccount3Instruction({ account: a, mint: b, owner: c })],
    [
      ix.createAccountWithSeed({ payer: a, newAccount: b, base: c, seed: "01ARZ3NDEKTSV4RRFFQ69G5FAV", lamports: 2_039_280n, space: 165, owner: TOKEN_PROGRAM }),
      getCreateAccountWithSeedInstruction({
        payer: signer(a), newAccount: b, baseAccount: signer(c), base: c, seed: "01ARZ3NDEKTSV4RRFFQ69G5FAV", amount: 2_039_280n, space: 165n, programAddress: TOKEN_PROGRAM,
      }),
    ],
    [
      ix.createAssociatedTokenIdempotent({ payer: a, ata: b, owner: c, mint: d }),
      getCreateAssociatedTokenIdempotentInstruction({ payer: signer(a), ata: b, owner: c, mint: d }),
    ],
    [ix.memo("svc:refund job=x ✓"), getAddMemoInstruction({ memo: "svc:refund job=x ✓" }, { programAddress: MEMO_PROGRAM })],
  ];
  for (const [ours, theirs] of pairs) assert.deepEqual(shape(ours), shape(theirs));
});

test("derived addresses match kit: create-with-seed and associated token accounts", async () => {
  const [base, mint] = [addr(), addr()];
  assert.equal(addressWithSeed(base, "seed-1", TOKEN_PROGRAM), await createAddressWithSeed({ baseAddress: base, programAddress: TOKEN_PROGRAM, seed: "seed-1" }));
  assert.throws(() => addressWithSeed(base, "x".repeat(33), TOKEN_PROGRAM), /32 bytes/);
  const atas = new AssociatedTokenAddresses(mint);
  for (let i = 0; i < 20; i++) {
    const owner = addr();
    const [expected] = await findAssociatedTokenPda({ owner, mint, tokenProgram: TOKEN_PROGRAM });
    assert.equal(atas.of(owner), expected);
  }
});

test("a built transaction decodes with kit to the same instructions, signed by each signer, on the event loop or the thread pool alike", async () => {
  const [payer, authority] = [generateKeypair(), generateKeypair()];
  const [from, to, other] = [addr(), addr(), addr()];
  const instructions = [
    ix.ed25519Verify({ publicKey: authority.publicKey, signature: new Uint8Array(64).fill(9), message: new TextEncoder().encode("m") }),
    ix.tokenTransfer({ from, to, authority: authority.address, amount: 5n }),
    ix.tokenTransfer({ from: to, to: other, authority: authority.address, amount: 1n }),
    ix.memo("hello"),
  ];
  const blockhash = randomBytes(32);
  const { signature, wire } = buildTransaction(payer, instructions, blockhash, [authority]);

  const tx = getTransactionDecoder().decode(wire);
  const message = decompileTransactionMessage(getCompiledTransactionMessageDecoder().decode(tx.messageBytes));
  assert.equal(message.feePayer.address, payer.address);
  assert.deepEqual((message.instructions as readonly Instruction[]).map(shape), instructions.map(shape));
  assert.equal(Object.keys(tx.signatures)[0], payer.address, "the fee payer signs first");
  for (const signer of [payer, authority]) {
    const key = createPublicKey({ key: Buffer.concat([Buffer.from("302a300506032b6570032100", "hex"), signer.publicKey]), format: "der", type: "spki" });
    assert.ok(verify(null, new Uint8Array(tx.messageBytes), key, tx.signatures[signer.address]!));
  }
  assert.equal(signature, base58Encode(tx.signatures[payer.address]!));

  const parsed = parseTransaction(wire);
  assert.deepEqual(Buffer.from(parsed.blockhash), blockhash);
  assert.equal(parsed.numSigners, 2);
  assert.equal(parsed.instructions.length, 4);
});

test("building refuses missing or unneeded signers and oversized transactions", () => {
  const [payer, authority, stranger] = [generateKeypair(), generateKeypair(), generateKeypair()];
  const transfer = ix.tokenTransfer({ from: addr(), to: addr(), authority: authority.address, amount: 1n });
  const blockhash = randomBytes(32);
  assert.throws(() => buildTransaction(payer, [transfer], blockhash, []), /missing signer/);
  assert.throws(() => buildTransaction(payer, [transfer], blockhash, [authority, stranger]), /no instruction needs/);
  assert.throws(() => buildTransaction(payer, [ix.memo("x".repeat(1300))], blockhash, []), /larger than 1232/);
});
