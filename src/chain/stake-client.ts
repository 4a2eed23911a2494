/**
 * A worker's own stake in the escrow program, over any Solana JSON-RPC endpoint (a cluster, or
 * the one `svc dev` serves): what it holds, and the transactions it signs itself to stake, to
 * ask for an unstake and to withdraw after the cooldown. The worker pays its own fees.
 */
import { createSolanaRpc, type Address, type Base64EncodedWireTransaction, type Instruction, type Signature } from "@solana/kit";
import { NATIVE_DECIMALS, base58Decode, type Signer } from "../core/index.ts";
import { AssociatedTokenAddresses } from "./addresses.ts";
import {
  ESCROW_PROGRAM,
  ProgramError,
  configAddress,
  decodeConfig,
  decodeStake,
  escrowInstructions,
  stakeAddress,
  type EscrowConfig,
  type ProgramErrorName,
} from "./escrow-program/index.ts";
import { buildTransaction } from "./wire.ts";

export interface StakeStatus {
  worker: Address;
  /** Base units of the native token. */
  active: bigint;
  unstaking: bigint;
  /** When what is unstaking can be withdrawn (null when nothing is). */
  withdrawableAt: Date | null;
  slashed: boolean;
  slashedTotal: bigint;
  /** Whether the stake earns the staked payout share now. */
  earnsStakedShare: boolean;
  minActiveStake: bigint;
}

const UNITS = 10n ** BigInt(NATIVE_DECIMALS);

/** Whole or decimal native tokens ("1000", "2.5") in base units; throws on anything else. */
export function nativeUnits(tokens: string): bigint {
  const match = /^(\d{1,12})(?:\.(\d{1,9}))?$/.exec(tokens);
  if (!match) throw new RangeError(`not an amount of tokens: ${tokens}`);
  const units = BigInt(match[1]!) * UNITS + BigInt((match[2] ?? "").padEnd(NATIVE_DECIMALS, "0"));
  if (units === 0n) throw new RangeError("the amount must be more than zero");
  return units;
}

export function formatNative(units: bigint): string {
  const fraction = (units % UNITS).toString().padStart(NATIVE_DECIMALS, "0").replace(/0+$/, "");
  return `${units / UNITS}${fraction ? `.${fraction}` : ""}`;
}

/** What a refused send says, in the program's own words where it is one of its errors. */
function refusal(error: unknown): string {
  const cause = (error as { cause?: { message?: string } }).cause?.message ?? (error as Error).message;
  const code = /Custom program error: #(\d+)/.exec(cause)?.[1];
  const name = code === undefined ? undefined : (Object.keys(ProgramError) as ProgramErrorName[]).find((k) => ProgramError[k] === Number(code));
  return name === undefined ? cause : `${cause} (${name})`;
}

export class StakeClient {
  private readonly rpc;

  constructor(
    rpcUrl: string,
    /** Where the escrow program lives on that chain (ESCROW_PROGRAM, the embedded chain's, by default). */
    readonly program: Address = ESCROW_PROGRAM,
  ) {
    this.rpc = createSolanaRpc(rpcUrl);
  }

  private async account(address: Address): Promise<Uint8Array | null> {
    const { value } = await this.rpc.getAccountInfo(address, { encoding: "base64" }).send();
    return value ? new Uint8Array(Buffer.from(value.data[0], "base64")) : null;
  }

  async config(): Promise<EscrowConfig> {
    const data = await this.account(configAddress(this.program).address);
    if (!data) throw new Error("the escrow program's config is not on this chain: is this the service's chain?");
    return decodeConfig(data);
  }

  async status(worker: Address): Promise<StakeStatus> {
    const [config, data] = await Promise.all([this.config(), this.account(stakeAddress(worker, this.program).address)]);
    const stake = data ? decodeStake(data) : undefined;
    const active = stake?.active ?? 0n;
    const unstaking = stake?.unstaking ?? 0n;
    const slashed = stake?.slashed ?? false;
    return {
      worker,
      active,
      unstaking,
      withdrawableAt: unstaking > 0n ? new Date(Number((stake!.unstakeRequestedAt + config.unstakeCooldownSeconds) * 1000n)) : null,
      slashed,
      slashedTotal: stake?.slashedTotal ?? 0n,
      earnsStakedShare: !slashed && active >= config.minActiveStake,
      minActiveStake: config.minActiveStake,
    };
  }

  /** Stakes `amount` base units from the worker's own token account of the stake mint. */
  async stake(worker: Signer, amount: bigint): Promise<string> {
    const config = await this.config();
    const source = new AssociatedTokenAddresses(config.stakeMint).of(worker.address);
    return this.send(worker, [escrowInstructions.stake({ worker: worker.address, payer: worker.address, source, amount, program: this.program })]);
  }

  async requestUnstake(worker: Signer, amount: bigint): Promise<string> {
    return this.send(worker, [escrowInstructions.requestUnstake({ worker: worker.address, amount, program: this.program })]);
  }

  async withdrawStake(worker: Signer): Promise<string> {
    const config = await this.config();
    const destination = new AssociatedTokenAddresses(config.stakeMint).of(worker.address);
    return this.send(worker, [escrowInstructions.withdrawStake({ worker: worker.address, destination, program: this.program })]);
  }

  /** Signs with the worker as fee payer, sends, and waits until the chain has it; throws with the chain's error. */
  private async send(worker: Signer, instructions: Instruction[]): Promise<string> {
    const { value } = await this.rpc.getLatestBlockhash().send();
    const { wire, signature } = buildTransaction(worker, instructions, base58Decode(value.blockhash, 32), []);
    await this.rpc
      .sendTransaction(Buffer.from(wire).toString("base64") as Base64EncodedWireTransaction, { encoding: "base64" })
      .send()
      .catch((error: unknown) => {
        throw new Error(`the chain refused the transaction: ${refusal(error)}`);
      });
    for (let i = 0; i < 100; i++) {
      const { value: [status] } = await this.rpc.getSignatureStatuses([signature as Signature]).send();
      if (status?.err) throw new Error(`the chain refused ${signature}: ${JSON.stringify(status.err, (_, v) => (typeof v === "bigint" ? Number(v) : v))}`);
      if (status?.confirmationStatus === "confirmed" || status?.confirmationStatus === "finalized") return signature;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`${signature} was sent but not confirmed within 10 s; check it before sending again`);
  }
}
