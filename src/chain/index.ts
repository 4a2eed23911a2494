/** The chain part's public surface: `openChain` and the `Chain` it returns, and the journal of what the service sends. */
export { Chain, settlementLeaf, MAX_LOCKS_PER_TRANSACTION, MAX_TABLE_LOCKS_PER_TRANSACTION, MAX_TABLE_SETTLEMENTS_PER_TRANSACTION, openChain, signWalletSlot, walletSignedCopy } from "./chain.ts";
export type {
  ChainReceipt,
  ChainStatus,
  ChainTransaction,
  DepositInput,
  LockEscrowInput,
  OpenChainOptions,
  PreparedTransaction,
  RefundInput,
  SettleInput,
  TableLockInput,
  TableSettlementInput,
  TableSettlementJob,
} from "./chain.ts";
export { ChainTxError } from "./backend.ts";
export type { ChainBackend } from "./backend.ts";
export type { DecodedInstruction, InstructionKind, ProgramName } from "./decode.ts";
export type { LiteSvmBackend, LiteSvmBackendOptions } from "./litesvm-backend.ts";
export { openLiteSvmBackend } from "./litesvm-open.ts";
export { DEFAULT_RPC_LIMITS, DEFAULT_RPC_PORT, startChainRpc, startChainRpcThread } from "./rpc/index.ts";
export type { ChainRpcOptions, ChainRpcServer } from "./rpc/index.ts";
export { ChainJournal, ChainRejectedError } from "./journal.ts";
export type { ActionOwner, ActionOwnerNode, ActionState, ChainAction, SendOutcome, SentAction } from "./journal.ts";
export { CHAIN_MIGRATIONS } from "./schema.ts";
export { StakeClient, formatNative, nativeUnits } from "./stake-client.ts";
export type { StakeStatus } from "./stake-client.ts";
export { ChargeReader, hashText } from "./charge-reader.ts";
export type { ChainTransactionFacts, ChargeFacts } from "./charge-reader.ts";
export { readTableCharge, settlementIn } from "./table-charge-reader.ts";
export type { SignedSettlement, TableChargeFacts, TableReceipt } from "./table-charge-reader.ts";
export { ESCROW_PROGRAM, TABLE_APPEND_WINDOW_S, tierOfCode } from "./escrow-program/index.ts";
export { toAddress } from "./addresses.ts";
export { initChain } from "./chain-init.ts";
export type { EscrowConfig, EscrowTable, JobEscrow, TableSlot } from "./escrow-program/index.ts";
