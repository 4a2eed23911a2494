/*
 * The escrow program's entrypoint. The program is one translation unit (the linker takes a single
 * object), assembled here from its parts.
 */
#include "escrow.h"
#include "checks.c"
#include "cpi.c"
#include "proof.c"
#include "config.c"
#include "vault.c"
#include "job.c"
#include "stake.c"
#include "dispute.c"
#include "table.c"
#include "table_dispute.c"

u64 entrypoint(u8 *input) {
  Input in;
  if (!deserialize(input, &in)) return E_INVALID_INSTRUCTION;
  if (in.data_len == 0) return E_INVALID_INSTRUCTION;
  switch (in.data[0]) {
    case OP_INITIALIZE: return initialize(&in);
    case OP_OPEN_VAULT: return open_vault(&in);
    case OP_WITHDRAW: return withdraw(&in);
    case OP_LOCK: return lock(&in);
    case OP_SETTLE: return settle(&in);
    case OP_REFUND: return refund(&in);
    case OP_STAKE: return stake(&in);
    case OP_REQUEST_UNSTAKE: return request_unstake(&in);
    case OP_WITHDRAW_STAKE: return withdraw_stake(&in);
    case OP_DISPUTE: return dispute(&in);
    case OP_RESOLVE: return resolve(&in);
    case OP_SLASH: return slash(&in);
    case OP_CLOSE_ESCROW: return close_escrow(&in);
    case OP_LOCK_BATCH: return lock_batch(&in);
    case OP_SETTLE_BATCH: return settle_batch(&in);
    case OP_REFUND_SLOTS: return refund_slots(&in);
    case OP_CLOSE_TABLE: return close_table(&in);
    case OP_DISPUTE_SLOT: return dispute_slot(&in);
    case OP_RESOLVE_SLOT: return resolve_slot(&in);
    default: return E_INVALID_INSTRUCTION;
  }
}
