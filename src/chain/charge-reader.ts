/**
 * What the chain alone says about one job's charge, read over Solana JSON-RPC from any node: the
 * program's config, the job's escrow record, and its lock and settlement (or refund)
 * transactions with their instructions and the token transfers the program made. `svc verify`
 * checks these facts against each other and against what the service claimed; nothing here
 * trusts the service.
 */
import { createSolanaRpc, type Address, type Signature } from "@solana/kit";
import { decodeInnerInstructions, decodeInstructions, type DecodedInstruction } from "./decode.ts";
import {
  ESCROW_PROGRAM,
  configAddress,
  decodeConfig,
  decodeEscrow,
  escrowAddress,
  escrowPoolAddress,
  vaultAddress,
  type EscrowConfig,
  type JobEscrow,
} from "./escrow-program/index.ts";
import { ED25519_HEADER_SIZE } from "./instructions.ts";
import type { TxMeta } from "./tx-meta.ts";
import { parseTransaction } from "./wire.ts";

export interface ChainTransactionFacts {
  signature: string;
  slot: number;
  ok: boolean;
  err: string | null;
  instructions: DecodedInstruction[];
  /** The token transfers and other calls the programs made, in order. */
  innerInstructions: DecodedInstruction[];
  /** Ed25519 precompile instructions: the key, the message (as text and as bytes) and the signature it verified. */
  proofs: { publicKey: string; message: string; bytes: Uint8Array; signature: Uint8Array }[];
}

export interface ChargeFacts {
  jobId: string;
  config: EscrowConfig;
  escrowAddress: Address;
  /** Owner of the account at the escrow address; null when there is none. */
  escrowOwner: string | null;
  escrow: JobEscrow | null;
  /** The vault the program derives for the escrow's wallet. */
  expectedVault: Address | null;
  escrowPool: Address;
  lock: ChainTransactionFacts | null;
  settlement: ChainTransactionFacts | null;
  refund: ChainTransactionFacts | null;
  /** The transaction that deleted the record after its dispute window, when it was. */
  close: ChainTransactionFacts | null;
  /** The record was gone, and `escrow` was read back from the job's transactions instead. */
  fromTransactions: boolean;
}

/** floor(amount × bps / 10000), as the program computes it. */
function shareOf(amount: bigint, bps: number): bigint {
  return (amount * BigInt(bps)) / 10_000n;
}

/**
 * A closed record, rebuilt from the transactions that made it: the lock's data, the settlement's
 * data and the transfers the program made. Whether the worker was staked is read off what it was
 * paid, which the split check then holds to one of the two shares. The lock is the instruction
 * naming this job: its transaction may carry other jobs' locks too (Chain.prepareLockEscrows).
 */
function escrowFromTransactions(f: Pick<ChargeFacts, "jobId" | "lock" | "settlement" | "refund" | "config" | "escrowPool">, program: Address): JobEscrow | null {
  const lock = f.lock?.instructions.find((i) => i.program === "escrow" && i.kind === "lock" && i.jobId === f.jobId);
  if (!lock?.owner || lock.amount === undefined) return null;
  const wallet = lock.owner;
  const vault = vaultAddress(wallet, program).address;
  const settle = f.settlement?.instructions.find((i) => i.program === "escrow" && i.kind === "settle");
  const paid = new Map<string, bigint>();
  for (const t of [...(f.settlement?.innerInstructions ?? []), ...(f.refund?.innerInstructions ?? [])]) {
    if (t.kind === "transfer" && t.from === f.escrowPool && t.to) paid.set(t.to, (paid.get(t.to) ?? 0n) + (t.amount ?? 0n));
  }
  const charge = settle?.amount ?? 0n;
  const treasuryPaid = paid.get(f.config.treasury) ?? 0n;
  const workerPaid = [...paid].filter(([to]) => to !== vault && to !== f.config.treasury).reduce((sum, [, v]) => sum + v, 0n);
  return {
    status: settle ? "settled" : f.refund ? "refunded" : "locked",
    tier: lock.tier ?? 0,
    jobId: lock.jobId ?? "",
    wallet,
    vault,
    worker: settle?.publicKey ?? ("11111111111111111111111111111111" as Address),
    proofHash: new Uint8Array(Buffer.from((settle?.proofHash ?? "sha256:").slice(7), "hex")),
    workerStaked: settle !== undefined && f.config.stakedWorkerShareBps !== f.config.workerShareBps && workerPaid === shareOf(charge, f.config.stakedWorkerShareBps),
    amountLocked: lock.amount,
    lockedAt: 0n,
    charge,
    workerPaid,
    treasuryPaid,
    returned: paid.get(vault) ?? 0n,
    closedAt: 0n,
  };
}

/** The signature bytes of each single-signature Ed25519 precompile instruction whose data holds them itself. */
function proofsOf(tx: ReturnType<typeof parseTransaction>, decoded: DecodedInstruction[]): ChainTransactionFacts["proofs"] {
  return decoded.flatMap((d, i) => {
    if (d.kind !== "ed25519" || d.publicKey === undefined || d.message === undefined) return [];
    const data = tx.instructions[i]!.data;
    if (data.length < ED25519_HEADER_SIZE) return [];
    const at = new DataView(data.buffer, data.byteOffset, data.byteLength).getUint16(2, true);
    return [{ publicKey: d.publicKey, message: d.message, bytes: d.messageBytes ?? new Uint8Array(), signature: data.slice(at, at + 64) }];
  });
}

export class ChargeReader {
  private readonly rpc;

  constructor(
    rpcUrl: string,
    /** Where the escrow program lives on that chain: ESCROW_PROGRAM on the embedded one, `svc chain init`'s id on a cluster. */
    readonly program: Address = ESCROW_PROGRAM,
  ) {
    this.rpc = createSolanaRpc(rpcUrl);
  }

  async accountData(address: Address): Promise<{ owner: string; data: Uint8Array } | null> {
    const { value } = await this.rpc.getAccountInfo(address, { encoding: "base64" }).send();
    return value ? { owner: value.owner, data: new Uint8Array(Buffer.from(value.data[0], "base64")) } : null;
  }

  /** The signatures of the transactions that touched `address`, newest first, failed ones left out. */
  async signaturesFor(address: Address): Promise<string[]> {
    return (await this.rpc.getSignaturesForAddress(address).send()).filter((s) => !s.err).map((s) => s.signature);
  }

  /** The program's config, which names the treasury and the shares. */
  async config(): Promise<EscrowConfig> {
    const config = await this.accountData(configAddress(this.program).address);
    if (!config || config.owner !== this.program) throw new Error(`no escrow program config at ${configAddress(this.program).address}: is this the service's chain?`);
    return decodeConfig(config.data);
  }

  async transaction(signature: string): Promise<ChainTransactionFacts | null> {
    const found = await this.rpc.getTransaction(signature as Signature, { encoding: "base64", maxSupportedTransactionVersion: 0 }).send();
    if (!found) return null;
    const tx = parseTransaction(new Uint8Array(Buffer.from(found.transaction[0], "base64")));
    const meta = { innerInstructions: (found.meta?.innerInstructions ?? []).map((g) => ({ index: Number(g.index), instructions: g.instructions.map((c) => ({ programIdIndex: Number(c.programIdIndex), accounts: c.accounts.map(Number), data: c.data, stackHeight: Number(c.stackHeight ?? 0) })) })) } as unknown as TxMeta;
    const instructions = decodeInstructions(tx, this.program);
    const err = found.meta?.err ?? null;
    return {
      signature,
      slot: Number(found.slot),
      ok: err === null,
      err: err === null ? null : JSON.stringify(err, (_, v) => (typeof v === "bigint" ? Number(v) : v)),
      instructions,
      innerInstructions: decodeInnerInstructions(tx, meta, this.program),
      proofs: proofsOf(tx, instructions),
    };
  }

  /** The job's transactions that touched its escrow address, found by the program instruction each carries. */
  private async discover(escrow: Address): Promise<{ lock?: string; settlement?: string; refund?: string; close?: string }> {
    const found: { lock?: string; settlement?: string; refund?: string; close?: string } = {};
    for (const signature of await this.signaturesFor(escrow)) {
      const tx = await this.transaction(signature);
      const kinds = new Set(tx?.instructions.filter((i) => i.program === "escrow").map((i) => i.kind));
      if (kinds.has("lock")) found.lock ??= signature;
      if (kinds.has("settle")) found.settlement ??= signature;
      if (kinds.has("refund")) found.refund ??= signature;
      if (kinds.has("closeEscrow")) found.close ??= signature;
    }
    return found;
  }

  /** Everything the chain holds about the job's charge; signatures not given are found from the escrow address. */
  async read(jobId: string, given: { lock?: string | undefined; settlement?: string | undefined } = {}): Promise<ChargeFacts> {
    const program = this.program;
    const config = await this.config();
    const address = escrowAddress(jobId, program).address;
    const account = await this.accountData(address);
    const recorded = account?.owner === program ? decodeEscrow(account.data) : null;
    const found = given.lock && given.settlement && recorded ? {} : await this.discover(address);
    const read = (s: string | undefined) => (s === undefined ? Promise.resolve(null) : this.transaction(s));
    const facts = {
      jobId,
      config,
      escrowAddress: address,
      escrowOwner: account?.owner ?? null,
      escrowPool: escrowPoolAddress(program).address,
      lock: await read(given.lock ?? found.lock),
      settlement: await read(given.settlement ?? found.settlement),
      refund: await read(found.refund),
      close: await read(found.close),
    };
    const escrow = recorded ?? (facts.close ? escrowFromTransactions(facts, program) : null);
    return { ...facts, escrow, expectedVault: escrow ? vaultAddress(escrow.wallet, program).address : null, fromTransactions: recorded === null && escrow !== null };
  }
}

/** A 32-byte hash as `sha256:<hex>`. */
export function hashText(bytes: Uint8Array): string {
  return `sha256:${Buffer.from(bytes).toString("hex")}`;
}
