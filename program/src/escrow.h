/*
 * The escrow program's accounts, instruction codes and errors. Layouts are fixed-size, little-endian,
 * with u64 fields at multiples of 8; docs/program.md and src/chain/escrow-program/layouts.ts mirror
 * them byte for byte.
 */
#pragma once
#include "sol.h"

enum Op {
  OP_INITIALIZE = 0,
  OP_OPEN_VAULT = 1,
  OP_WITHDRAW = 2,
  OP_LOCK = 3,
  OP_SETTLE = 4,
  OP_REFUND = 5,
  OP_STAKE = 6,
  OP_REQUEST_UNSTAKE = 7,
  OP_WITHDRAW_STAKE = 8,
  OP_DISPUTE = 9,
  OP_RESOLVE = 10,
  OP_SLASH = 11,
  OP_CLOSE_ESCROW = 12,
  OP_LOCK_BATCH = 13,
  OP_SETTLE_BATCH = 14,
  OP_REFUND_SLOTS = 15,
  OP_CLOSE_TABLE = 16,
  OP_DISPUTE_SLOT = 17,
  OP_RESOLVE_SLOT = 18,
};

/* Custom error codes (InstructionError::Custom(n)). */
enum Error {
  E_OK = 0,
  E_INVALID_INSTRUCTION = 1,
  E_NOT_ENOUGH_ACCOUNTS = 2,
  E_MISSING_SIGNER = 3,
  E_NOT_WRITABLE = 4,
  E_WRONG_OWNER = 5,
  E_WRONG_ADDRESS = 6,
  E_WRONG_MINT = 7,
  E_WRONG_TOKEN_OWNER = 8,
  E_INVALID_CONFIG = 9,
  E_ALREADY_EXISTS = 10,
  E_INSUFFICIENT_FUNDS = 11,
  E_OVERFLOW = 12,
  E_WRONG_STATUS = 13,
  E_PROOF_MISSING = 14,
  E_CHARGE_EXCEEDS_LOCK = 15,
  E_TOO_EARLY = 16,
  E_INVALID_AMOUNT = 17,
  E_WRONG_ACCOUNT_TYPE = 18,
  E_INVALID_JOB_ID = 19,
  E_SAME_HASH = 20,
  E_WINDOW_CLOSED = 21,
  E_WINDOW_OPEN = 22,
  E_TABLE_FULL = 23,
  E_WRONG_SLOT = 24,
};

/* The first byte of every account this program owns. */
enum Tag { TAG_CONFIG = 1, TAG_ESCROW = 2, TAG_STAKE = 3, TAG_DISPUTE = 4, TAG_TABLE = 5 };

/* A job escrow's life. A dispute moves SETTLED to DISPUTED; its resolution moves it back to
   SETTLED (rejected) or to REVERSED (the charge went back to the vault). */
enum EscrowStatus { ESCROW_LOCKED = 1, ESCROW_SETTLED = 2, ESCROW_REFUNDED = 3, ESCROW_DISPUTED = 4, ESCROW_REVERSED = 5 };

/* How an arbitration ended; OPEN until it does. */
enum Outcome { OUTCOME_OPEN = 0, OUTCOME_UPHELD = 1, OUTCOME_REJECTED = 2, OUTCOME_INCONCLUSIVE = 3 };

/* A worker stake's status: a slashed stake never earns the staked share again. */
enum StakeStatus { STAKE_ACTIVE = 0, STAKE_SLASHED = 1 };

#define MAX_JOB_ID 32
#define BPS_DENOMINATOR 10000
/* The arbitration window the unstake cooldown must outlast, beyond the dispute window. */
#define ARBITRATION_WINDOW_S (72 * 3600)

typedef struct {
  u8 tag;
  u8 version;
  u8 config_bump;
  u8 authority_bump;
  u8 pool_bump;
  u8 stake_pool_bump;
  u16 worker_share_bps;
  u16 staked_worker_share_bps;
  u8 pad[6];
  Pubkey service_authority;
  Pubkey treasury; /* the treasury's USDC token account */
  Pubkey usdc_mint;
  Pubkey stake_mint;
  Pubkey pool;       /* holds every locked job's credits and every open dispute's bond */
  Pubkey stake_pool; /* holds every worker's stake */
  Pubkey vault_authority; /* the PDA that is the token authority of vaults and pools */
  u64 min_active_stake;
  i64 job_timeout_s;
  i64 dispute_window_s;
  i64 unstake_cooldown_s;
  u8 reserved[16];
} Config;

typedef struct {
  u8 tag;
  u8 status;
  u8 bump;
  u8 tier;
  u8 job_id_len;
  u8 worker_staked;
  u8 pad[2];
  u8 job_id[MAX_JOB_ID];
  Pubkey wallet;
  Pubkey vault;
  Pubkey worker;
  u8 proof_hash[32];
  u64 amount_locked;
  i64 locked_at;
  u64 charge;
  u64 worker_paid;
  u64 treasury_paid;
  u64 returned;
  i64 closed_at;
  u8 reserved[32];
} Escrow;

typedef struct {
  u8 tag;
  u8 status;
  u8 bump;
  u8 pad[5];
  Pubkey worker;
  u64 active;
  u64 unstaking;
  i64 unstake_requested_at;
  u64 slashed_total;
  i64 last_slashed_at;
  u8 reserved[48];
} Stake;

/* One dispute of a settled job, at ["dispute", job id], or of a table's slot, at ["dispute", table, slot u8]. */
typedef struct {
  u8 tag;
  u8 outcome;
  u8 bump;
  u8 slot;     /* the disputed slot, when of_table */
  u8 of_table; /* 1: `escrow` is a table and `slot` its disputed slot */
  u8 pad[3];
  Pubkey escrow;
  u8 caller_hash[32];
  i64 opened_at;
  i64 resolved_at;
  u64 returned; /* the charge paid back to the vault from the treasury (upheld, inconclusive) */
  u64 bond;     /* held in the pool from the caller's vault until the outcome: back to the vault, or to the treasury when rejected */
  u8 reserved[24];
} Dispute;

/*
 * An escrow table: the jobs of one wallet locked within APPEND_WINDOW_S of the table's opening, at
 * ["table", wallet, table id u64 LE]. Each job is a 12-byte slot instead of an account of its own;
 * its job id, tier and the worker's proof are in the transactions that locked and settled it.
 */
typedef struct {
  u8 tag;
  u8 bump;
  u8 capacity; /* slots the account has room for, fixed when it is created */
  u8 used;     /* slots locked so far, in order */
  u8 open;     /* slots still LOCKED or DISPUTED */
  u8 pad[3];
  u64 table_id;
  Pubkey wallet;
  Pubkey vault;
  i64 opened_at;
  i64 last_closed_at; /* the latest settlement or refund of any of its slots */
} Table;

/* One job's slot. `amount` is what is locked while LOCKED, the charge once SETTLED, DISPUTED or
   REVERSED, what went back once REFUNDED. */
typedef struct {
  u8 amount[8];
  u8 status;       /* an EscrowStatus */
  u8 locked_after; /* bits 0-6: seconds after the table opened; bit 7: the worker was staked */
  u8 closed_after[2]; /* u16 seconds after the table opened, 65535 for anything later */
} Slot;

/* How long a table takes new locks; a slot's lock time is at most this after the opening, and
   fits in 7 bits. */
#define APPEND_WINDOW_S 60
#define SLOT_STAKED 0x80

_Static_assert(sizeof(Config) == 288, "config layout");
_Static_assert(sizeof(Escrow) == 256, "escrow layout");
_Static_assert(sizeof(Stake) == 128, "stake layout");
_Static_assert(sizeof(Dispute) == 128, "dispute layout");
_Static_assert(sizeof(Table) == 96, "table layout");
_Static_assert(sizeof(Slot) == 12, "slot layout");

/* SPL token account fields the program reads. */
#define TOKEN_ACCOUNT_SIZE 165
#define TOKEN_MINT_AT 0
#define TOKEN_OWNER_AT 32
#define TOKEN_AMOUNT_AT 64
#define TOKEN_STATE_AT 108
