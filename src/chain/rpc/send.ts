/**
 * `sendTransaction` and `simulateTransaction`. A send goes to the same backend the service sends
 * through (journaled, executed once per signature); unless told to skip it, it is first simulated,
 * and a failing simulation is refused with -32002 and its logs, so nothing lands and no fee is paid.
 */
import { ChainTxError } from "../backend.ts";
import type { Simulation, SimulationOptions } from "../backend.ts";
import { outcomeError } from "./encoding.ts";
import { RpcError, SEND_TRANSACTION_PREFLIGHT_FAILURE, TRANSACTION_SIGNATURE_VERIFICATION_FAILURE, invalidParams } from "./errors.ts";
import { withContext, type Method, type RpcContext } from "./context.ts";
import * as p from "./params.ts";

interface SendConfig {
  encoding: string;
  skipPreflight: boolean;
}

interface SimulateConfig {
  encoding: string;
  sigVerify: boolean;
  replaceRecentBlockhash: boolean;
}

function simulationValue(sim: Simulation): Record<string, unknown> {
  return {
    err: outcomeError(sim),
    logs: sim.logs,
    accounts: null,
    unitsConsumed: sim.unitsConsumed,
    returnData: null,
  };
}

/** Malformed or unsupported transactions are the caller's params, not a failed execution. */
async function simulate(ctx: RpcContext, wire: Uint8Array, options: SimulationOptions): Promise<Simulation> {
  try {
    return await ctx.backend.simulateTransaction(wire, options);
  } catch (err) {
    if (err instanceof ChainTxError) throw invalidParams(`invalid transaction: ${err.message}`);
    throw err;
  }
}

function preflightFailure(sim: Simulation): RpcError {
  if (sim.err === "SignatureFailure") return new RpcError(TRANSACTION_SIGNATURE_VERIFICATION_FAILURE, "Transaction signature verification failure");
  return new RpcError(SEND_TRANSACTION_PREFLIGHT_FAILURE, `Transaction simulation failed: ${sim.err ?? "unknown error"}`, simulationValue(sim));
}

export const sendTransaction: Method = async (ctx, params) => {
  const config = p.config<SendConfig>(params, 1);
  const wire = p.encodedBytes(params[0], config.encoding, "transaction");
  if (!config.skipPreflight) {
    const sim = await simulate(ctx, wire, {});
    if (!sim.ok) throw preflightFailure(sim);
  }
  try {
    return (await ctx.backend.sendTransaction(wire)).signature;
  } catch (err) {
    if (!(err instanceof ChainTxError)) throw err;
    // A transaction that failed on-chain is still sent: its signature reports the failure.
    if (err.details.landed) return err.details.signature;
    if (err.details.err === "SanitizeFailure" || err.details.err === "UnsupportedVersion") throw invalidParams(`invalid transaction: ${err.message}`);
    throw preflightFailure({ ok: false, err: err.details.err, logs: err.details.logs, unitsConsumed: 0n });
  }
};

export const simulateTransaction: Method = async (ctx, params) => {
  const config = p.config<SimulateConfig>(params, 1);
  const wire = p.encodedBytes(params[0], config.encoding, "transaction");
  if (config.sigVerify && config.replaceRecentBlockhash) throw invalidParams("sigVerify may not be used with replaceRecentBlockhash");
  const sim = await simulate(ctx, wire, { sigVerify: config.sigVerify ?? false, replaceBlockhash: config.replaceRecentBlockhash ?? false });
  const value = simulationValue(sim);
  if (config.replaceRecentBlockhash) {
    const { blockhash, lastValidBlockHeight } = await ctx.backend.latestBlockhash();
    value.replacementBlockhash = { blockhash, lastValidBlockHeight };
  }
  return withContext(ctx, value);
};
