/**
 * JSON-RPC errors with the codes Solana's nodes use, so clients (kit turns them into typed
 * `SolanaError`s) recognise them.
 */

export const PARSE_ERROR = -32700;
export const INVALID_REQUEST = -32600;
export const METHOD_NOT_FOUND = -32601;
export const INVALID_PARAMS = -32602;
export const INTERNAL_ERROR = -32603;
/** `sendTransaction`'s preflight simulation failed; `data` carries the simulation (err, logs). */
export const SEND_TRANSACTION_PREFLIGHT_FAILURE = -32002;
export const TRANSACTION_SIGNATURE_VERIFICATION_FAILURE = -32003;

export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

export function invalidParams(message: string): RpcError {
  return new RpcError(INVALID_PARAMS, `Invalid params: ${message}`);
}
