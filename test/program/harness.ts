/**
 * A LiteSVM chain with the committed escrow program deployed and initialized under the service's
 * rules: two mints, a service authority, a treasury, and helpers to fund wallets and workers and
 * to send transactions and read balances back. Tests, the property test and bench/program.ts use it.
 */
import { readFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { Clock, FailedTransactionMetadata, LiteSVM, type TransactionMetadata } from "litesvm";
import type { LiteSvm as NativeSvm } from "litesvm/dist/internal.js";
import { AccountRole, createNoopSigner, type Address, type Instruction } from "@solana/kit";
import { getCreateAccountInstruction } from "@solana-program/system";
import { getInitializeMint2Instruction } from "@solana-program/token";
import { AssociatedTokenAddresses, ED25519_PROGRAM, MINT_SIZE, TOKEN_PROGRAM, addressBytes } from "../../src/chain/addresses.ts";
import { base58Decode } from "../../src/core/base58.ts";
import { createAssociatedTokenIdempotent, ed25519Verify, mintTo } from "../../src/chain/instructions.ts";
import { generateKeypair, type Keypair, type Signer } from "../../src/core/keys.ts";
import { describeTransactionError } from "../../src/chain/svm-errors.ts";
import { buildTransaction } from "../../src/chain/wire.ts";
import { proofMessage } from "../../src/core/proof.ts";
import {
  DEFAULT_RULES,
  ESCROW_PROGRAM,
  ESCROW_PROGRAM_PATH,
  ProgramError,
  escrowInstructions as ix,
  vaultAddress,
  type EscrowRules,
  type ProgramErrorName,
} from "../../src/chain/escrow-program/index.ts";

export const PROGRAM_PATH = ESCROW_PROGRAM_PATH;

export interface Sent {
  ok: boolean;
  /** As Solana spells it, e.g. `InstructionError(0, Custom(6))`. */
  err?: string;
  logs: string[];
  computeUnits: bigint;
  /** Size of the signed transaction on the wire. */
  bytes: number;
  /** Signatures the fee is charged for: the transaction's own plus those the precompile verifies. */
  signatures: number;
}

export function nativeOf(svm: LiteSVM): NativeSvm {
  return (svm as unknown as { inner: NativeSvm }).inner;
}

export class EscrowChain {
  readonly svm = nativeOf(new LiteSVM().withTransactionHistory(0n));
  readonly payer: Keypair;
  readonly authority: Keypair;
  readonly usdcMint: Keypair;
  readonly stakeMint: Keypair;
  readonly mintAuthority: Keypair;
  readonly treasuryOwner: Keypair;
  readonly usdc: AssociatedTokenAddresses;
  readonly stakeTokens: AssociatedTokenAddresses;
  treasury!: Address;
  /** The `initialize` transaction, for its compute units. */
  initialized!: Sent;

  /** `newKey` makes every key the chain's actors use (a seeded test passes its own, to replay a run exactly). */
  private constructor(readonly newKey: () => Keypair) {
    this.payer = newKey();
    this.authority = newKey();
    this.usdcMint = newKey();
    this.stakeMint = newKey();
    this.mintAuthority = newKey();
    this.treasuryOwner = newKey();
    this.usdc = new AssociatedTokenAddresses(this.usdcMint.address);
    this.stakeTokens = new AssociatedTokenAddresses(this.stakeMint.address);
  }

  static async open(rules: EscrowRules = DEFAULT_RULES, newKey: () => Keypair = generateKeypair): Promise<EscrowChain> {
    const chain = new EscrowChain(newKey);
    chain.svm.addProgram(addressBytes(ESCROW_PROGRAM), readFileSync(PROGRAM_PATH));
    chain.svm.airdrop(addressBytes(chain.payer.address), 1_000_000_000_000n);
    chain.createMint(chain.usdcMint, 6);
    chain.createMint(chain.stakeMint, 9);
    chain.treasury = chain.tokenAccount(chain.treasuryOwner.address, chain.usdcMint.address);
    chain.initialized = chain.expectOk(chain.send([ix.initialize({
      serviceAuthority: chain.authority.address,
      payer: chain.payer.address,
      treasury: chain.treasury,
      usdcMint: chain.usdcMint.address,
      stakeMint: chain.stakeMint.address,
      rules,
    })], [chain.authority]));
    return chain;
  }

  /** Signs with the fee payer plus `signers` and executes; never throws for a failed transaction. */
  send(instructions: Instruction[], signers: Signer[] = []): Sent {
    const blockhash = base58Decode(this.svm.latestBlockhash(), 32);
    const unique = signers.filter((s, i) => s.address !== this.payer.address && signers.indexOf(s) === i);
    const { wire } = buildTransaction(this.payer, instructions, blockhash, unique);
    const r: TransactionMetadata | FailedTransactionMetadata = this.svm.sendLegacyTransaction(wire);
    const size = {
      bytes: wire.length,
      signatures: wire[0]! + instructions.filter((i) => i.programAddress === ED25519_PROGRAM).reduce((n, i) => n + i.data![0]!, 0),
    };
    if (r instanceof FailedTransactionMetadata) {
      const meta = r.meta();
      return { ok: false, err: describeTransactionError(r.err()), logs: meta.logs(), computeUnits: meta.computeUnitsConsumed(), ...size };
    }
    return { ok: true, logs: r.logs(), computeUnits: r.computeUnitsConsumed(), ...size };
  }

  expectOk(sent: Sent): Sent {
    if (!sent.ok) throw new Error(`transaction failed: ${sent.err}\n${sent.logs.join("\n")}`);
    return sent;
  }

  private createMint(mint: Keypair, decimals: number): void {
    this.expectOk(this.send([
      getCreateAccountInstruction({
        payer: createNoopSigner(this.payer.address),
        newAccount: createNoopSigner(mint.address),
        lamports: this.svm.minimumBalanceForRentExemption(BigInt(MINT_SIZE)),
        space: MINT_SIZE,
        programAddress: TOKEN_PROGRAM,
      }),
      getInitializeMint2Instruction({ mint: mint.address, decimals, mintAuthority: this.mintAuthority.address }),
    ], [mint]));
  }

  /** The owner's associated token account of `mint`, created if missing. */
  tokenAccount(owner: Address, mint: Address): Address {
    const ata = (mint === this.usdcMint.address ? this.usdc : this.stakeTokens).of(owner);
    this.expectOk(this.send([createAssociatedTokenIdempotent({ payer: this.payer.address, ata, owner, mint })]));
    return ata;
  }

  mint(to: Address, mint: Address, amount: bigint): void {
    this.expectOk(this.send([mintTo({ mint, to, authority: this.mintAuthority.address, amount })], [this.mintAuthority]));
  }

  /** A wallet with an open vault holding `amount` base units, deposited by a plain token transfer. */
  fundedWallet(amount: bigint): { wallet: Keypair; vault: Address; own: Address } {
    const wallet = this.newKey();
    const own = this.tokenAccount(wallet.address, this.usdcMint.address);
    this.expectOk(this.send([ix.openVault({ payer: this.payer.address, wallet: wallet.address, usdcMint: this.usdcMint.address })]));
    const vault = vaultAddress(wallet.address).address;
    if (amount > 0n) this.mint(vault, this.usdcMint.address, amount);
    return { wallet, vault, own };
  }

  balance(tokenAccount: Address): bigint {
    const a = this.svm.getAccount(addressBytes(tokenAccount));
    if (!a || a.data().length < 72) return 0n;
    return new DataView(a.data().buffer, a.data().byteOffset).getBigUint64(64, true);
  }

  data(address: Address): Uint8Array | null {
    return this.svm.getAccount(addressBytes(address))?.data() ?? null;
  }

  now(): bigint {
    return this.svm.getClock().unixTimestamp;
  }

  /** Moves the chain's clock forward (the program reads time from the clock sysvar). */
  advance(seconds: bigint): void {
    const c = this.svm.getClock();
    this.svm.setClock(new Clock(c.slot + 1n, c.epochStartTimestamp, c.epoch, c.leaderScheduleEpoch, c.unixTimestamp + seconds));
    this.svm.expireBlockhash();
  }
}

/** The worker's proof: the Ed25519 precompile instruction over `<job id>:sha256:<hex>`. */
export function proofOf(worker: Signer, jobId: string, output = "the output") {
  const proofHash = createHash("sha256").update(output).digest();
  const message = proofMessage(jobId, `sha256:${proofHash.toString("hex")}`);
  return {
    proofHash: new Uint8Array(proofHash),
    verify: ed25519Verify({ publicKey: worker.publicKey, signature: worker.sign(message), message }),
  };
}

export function customError(name: ProgramErrorName, index = 0): string {
  return `InstructionError(${index}, Custom(${ProgramError[name]}))`;
}

/** `instruction` with account `index` replaced by `address` (a substitution attack). */
export function substitute(instruction: Instruction, index: number, address: Address): Instruction {
  const accounts = [...(instruction.accounts ?? [])];
  accounts[index] = { ...accounts[index]!, address } as (typeof accounts)[number];
  return { ...instruction, accounts };
}

/** `instruction` with account `index` passed read-only and unsigned. */
export function demote(instruction: Instruction, index: number): Instruction {
  const accounts = [...(instruction.accounts ?? [])];
  accounts[index] = { ...accounts[index]!, role: AccountRole.READONLY } as (typeof accounts)[number];
  return { ...instruction, accounts };
}
