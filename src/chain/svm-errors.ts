/**
 * LiteSVM reports errors as numeric enums and small classes whose enum names exist only in its
 * type declarations (const enums, absent at run time). This renders them the way Solana's RPC and
 * logs spell them, e.g. `BlockhashNotFound`, `InstructionError(0, Custom(2))`.
 */

// Order as in litesvm 1.5.0's TransactionErrorFieldless and InstructionErrorFieldless.
const TRANSACTION_ERRORS = [
  "AccountInUse", "AccountLoadedTwice", "AccountNotFound", "ProgramAccountNotFound", "InsufficientFundsForFee",
  "InvalidAccountForFee", "AlreadyProcessed", "BlockhashNotFound", "CallChainTooDeep", "MissingSignatureForFee",
  "InvalidAccountIndex", "SignatureFailure", "InvalidProgramForExecution", "SanitizeFailure", "ClusterMaintenance",
  "AccountBorrowOutstanding", "WouldExceedMaxBlockCostLimit", "UnsupportedVersion", "InvalidWritableAccount",
  "WouldExceedMaxAccountCostLimit", "WouldExceedAccountDataBlockLimit", "TooManyAccountLocks",
  "AddressLookupTableNotFound", "InvalidAddressLookupTableOwner", "InvalidAddressLookupTableData",
  "InvalidAddressLookupTableIndex", "InvalidRentPayingAccount", "WouldExceedMaxVoteCostLimit",
  "WouldExceedAccountDataTotalLimit", "MaxLoadedAccountsDataSizeExceeded", "ResanitizationNeeded",
  "InvalidLoadedAccountsDataSizeLimit", "UnbalancedTransaction", "ProgramCacheHitMaxLimit", "CommitCancelled",
];

const INSTRUCTION_ERRORS = [
  "GenericError", "InvalidArgument", "InvalidInstructionData", "InvalidAccountData", "AccountDataTooSmall",
  "InsufficientFunds", "IncorrectProgramId", "MissingRequiredSignature", "AccountAlreadyInitialized",
  "UninitializedAccount", "UnbalancedInstruction", "ModifiedProgramId", "ExternalAccountLamportSpend",
  "ExternalAccountDataModified", "ReadonlyLamportChange", "ReadonlyDataModified", "DuplicateAccountIndex",
  "ExecutableModified", "RentEpochModified", "NotEnoughAccountKeys", "AccountDataSizeChanged",
  "AccountNotExecutable", "AccountBorrowFailed", "AccountBorrowOutstanding", "DuplicateAccountOutOfSync",
  "InvalidError", "ExecutableDataModified", "ExecutableLamportChange", "ExecutableAccountNotRentExempt",
  "UnsupportedProgramId", "CallDepth", "MissingAccount", "ReentrancyNotAllowed", "MaxSeedLengthExceeded",
  "InvalidSeeds", "InvalidRealloc", "ComputationalBudgetExceeded", "PrivilegeEscalation",
  "ProgramEnvironmentSetupFailure", "ProgramFailedToComplete", "ProgramFailedToCompile", "Immutable",
  "IncorrectAuthority", "AccountNotRentExempt", "InvalidAccountOwner", "ArithmeticOverflow", "UnsupportedSysvar",
  "IllegalOwner", "MaxAccountsDataAllocationsExceeded", "MaxAccountsExceeded", "MaxInstructionTraceLengthExceeded",
  "BuiltinProgramsMustConsumeComputeUnits", "BorshIoError",
];

export const ALREADY_PROCESSED = "AlreadyProcessed";

function instructionError(err: unknown): string {
  if (typeof err === "number") return INSTRUCTION_ERRORS[err] ?? `InstructionError#${err}`;
  if (err && typeof err === "object" && "code" in err) return `Custom(${String(err.code)})`;
  if (err && typeof err === "object" && "msg" in err) return `BorshIoError(${JSON.stringify(err.msg)})`;
  return String(err);
}

export function describeTransactionError(err: unknown): string {
  if (typeof err === "number") return TRANSACTION_ERRORS[err] ?? `TransactionError#${err}`;
  if (err && typeof err === "object") {
    const e = err as { index?: number; accountIndex?: number; err?: () => unknown };
    if (typeof e.err === "function" && typeof e.index === "number") {
      return `InstructionError(${e.index}, ${instructionError(e.err())})`;
    }
    const kind = err.constructor.name.replace(/^TransactionError/, "");
    if (typeof e.accountIndex === "number") return `${kind} { account_index: ${e.accountIndex} }`;
    if (typeof e.index === "number") return `${kind}(${e.index})`;
  }
  return String(err);
}

function instructionErrorFromJson(err: unknown): string {
  if (err && typeof err === "object") {
    const [[kind, value]] = Object.entries(err) as [[string, unknown]];
    return kind === "BorshIoError" ? `BorshIoError(${JSON.stringify(value)})` : `${kind}(${String(value)})`;
  }
  return String(err);
}

/**
 * A transaction error as an RPC node sends it (`"BlockhashNotFound"`,
 * `{"InstructionError":[0,{"Custom":2}]}`, `{"InsufficientFundsForRent":{"account_index":1}}`),
 * spelled as above, so a cluster's outcomes read the same as the embedded chain's.
 */
export function describeRpcTransactionError(err: unknown): string {
  if (!err || typeof err !== "object") return String(err);
  const entries = Object.entries(err);
  if (entries.length !== 1) return JSON.stringify(err);
  const [[kind, value]] = entries as [[string, unknown]];
  if (kind === "InstructionError" && Array.isArray(value)) return `InstructionError(${String(value[0])}, ${instructionErrorFromJson(value[1])})`;
  if (value && typeof value === "object" && "account_index" in value) return `${kind} { account_index: ${String(value.account_index)} }`;
  return `${kind}(${String(value)})`;
}
