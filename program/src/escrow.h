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
};

/* The first byte of every account this program owns. */
enum Tag { TAG_CONFIG = 1, TAG_ESCROW = 2, TAG_STAKE = 3 };

/* A job escrow's life; DISPUTED and SLASHED are kept for the disputes work. */
enum EscrowStatus { ESCROW_LOCKED = 1, ESCROW_SETTLED = 2, ESCROW_REFUNDED = 3, ESCROW_DISPUTED = 4, ESCROW_SLASHED = 5 };

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
  Pubkey pool;       /* holds every locked job's credits */
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
  u8 reserved[64];
} Stake;

_Static_assert(sizeof(Config) == 288, "config layout");
_Static_assert(sizeof(Escrow) == 256, "escrow layout");
_Static_assert(sizeof(Stake) == 128, "stake layout");

/* SPL token account fields the program reads. */
#define TOKEN_ACCOUNT_SIZE 165
#define TOKEN_MINT_AT 0
#define TOKEN_OWNER_AT 32
#define TOKEN_AMOUNT_AT 64
#define TOKEN_STATE_AT 108
