/*
 * The worker's proof, checked through the instructions sysvar: the same transaction must carry an
 * Ed25519 precompile instruction over this worker's key and the exact message
 * `<job id>:sha256:<hex>`. The precompile fails the whole transaction on a bad signature, so a
 * matching instruction being present means the signature was verified.
 */
#include "escrow.h"

#define SELF_INSTRUCTION 0xffff
#define ED25519_OFFSETS_SIZE 14

/* A message the precompile verified: under `worker`'s key, starting with `prefix`; `exact` asks
   for the prefix to be the whole message. Found, `message` and `message_len` point into the
   instructions sysvar. */
typedef struct {
  const Pubkey *worker;
  const u8 *prefix;
  u64 prefix_len;
  bool exact;
  const u8 *message;
  u64 message_len;
} SignedMessage;

/* Whether one precompile instruction's data holds a signature `want` asks for. */
static bool ed25519_covers(const u8 *ix, u64 len, SignedMessage *want) {
  if (len < 2) return false;
  for (u64 s = 0; s < ix[0]; s++) {
    const u8 *o = ix + 2 + ED25519_OFFSETS_SIZE * s;
    if (2 + ED25519_OFFSETS_SIZE * (s + 1) > len) return false;
    /* Only data carried in the precompile instruction itself: offsets into another instruction
       would verify bytes this check does not read. */
    if (read_u16(o + 2) != SELF_INSTRUCTION || read_u16(o + 6) != SELF_INSTRUCTION ||
        read_u16(o + 12) != SELF_INSTRUCTION)
      continue;
    u64 key_at = read_u16(o + 4), message_at = read_u16(o + 8), size = read_u16(o + 10);
    if (key_at + 32 > len || message_at + size > len || size < want->prefix_len) continue;
    if (want->exact && size != want->prefix_len) continue;
    if (bytes_equal(ix + key_at, want->worker, 32) && bytes_equal(ix + message_at, want->prefix, want->prefix_len)) {
      want->message = ix + message_at;
      want->message_len = size;
      return true;
    }
  }
  return false;
}

/* Finds, among the transaction's instructions, a precompile signature `want` asks for. */
static u64 find_signed(const AccountInfo *sysvar, SignedMessage *want) {
  TRY(expect_key(sysvar, &INSTRUCTIONS_SYSVAR));
  const u8 *d = sysvar->data;
  u64 len = sysvar->data_len;
  if (len < 2) return E_PROOF_MISSING;
  u64 count = read_u16(d);
  if (2 + 2 * count > len) return E_PROOF_MISSING;
  for (u64 i = 0; i < count; i++) {
    u64 at = read_u16(d + 2 + 2 * i);
    if (at + 2 > len) return E_PROOF_MISSING;
    u64 program_at = at + 2 + 33 * (u64)read_u16(d + at); /* each account: flags byte and key */
    if (program_at + 34 > len) return E_PROOF_MISSING;
    u64 data_len = read_u16(d + program_at + 32);
    const u8 *data = d + program_at + 34;
    if (program_at + 34 + data_len > len) return E_PROOF_MISSING;
    if (key_equal((const Pubkey *)(d + program_at), &ED25519_PROGRAM) && ed25519_covers(data, data_len, want)) return E_OK;
  }
  return E_PROOF_MISSING;
}

static u64 check_proof(const AccountInfo *sysvar, const Pubkey *worker, const u8 *message, u64 message_len) {
  SignedMessage want = {worker, message, message_len, true, NULL, 0};
  return find_signed(sysvar, &want);
}

/* `<job id>:sha256:<64 lowercase hex digits>` into `out`; returns its length. */
static u64 proof_message(const Escrow *e, const u8 *hash, u8 *out) {
  static const char hex[] = "0123456789abcdef";
  static const char infix[] = ":sha256:";
  u64 n = e->job_id_len;
  sol_memcpy_(out, e->job_id, n);
  sol_memcpy_(out + n, infix, 8);
  n += 8;
  for (u64 i = 0; i < 32; i++) {
    out[n++] = hex[hash[i] >> 4];
    out[n++] = hex[hash[i] & 15];
  }
  return n;
}
