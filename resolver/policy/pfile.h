/* pfile.h: the layout of a compiled policy file (format in moat/policy_file.h), private to
 * policy_file.c (which writes it) and policy_file_read.c (which checks it and reads it back):
 * the constants, the header and the slot encoding both sides must agree on. */
#ifndef MOAT_PFILE_H
#define MOAT_PFILE_H

#include <sodium.h>
#include <stdint.h>
#include <string.h>

#include "moat/policy_file.h"

#define PF_MAGIC POLICY_FILE_MAGIC
#define PF_ENDIAN 0x01020304u
#define PF_HEAD 4096u  /* the header page; sections start after it */
#define PF_BLOCK 4096u /* the unit of verification */
#define PF_BHASH 32u   /* BLAKE2b-256 a block */
#define PF_LOAD_PCT 85 /* slot table fill: 7 bytes a name, ~4 slots a hit probes */
#define PF_PROBE 16    /* slots read at once by a lookup (96 bytes) */

/* A slot: {record offset + 1 (0: empty), meta}, 6 bytes, unaligned. meta: which rules the
 * record holds and 14 bits of the tag, so a probe reads a record only on a likely match
 * (the home slot comes from the tag's high bits: names that probe the same slots differ
 * in their low bits, so the fingerprint tells them apart almost always). */
#define PF_SLOT 6u
#define PF_META_EXACT 0x8000u
#define PF_META_WILD 0x4000u
#define PF_META_FP 0x3FFFu

static inline uint64_t pf_home(uint32_t tag, uint64_t cap)
{
	return ((uint64_t)tag * cap) >> 32;
}

static inline uint32_t pf_slot_rec(const uint8_t *slot)
{
	uint32_t r;
	memcpy(&r, slot, 4);
	return r;
}

static inline uint16_t pf_slot_meta(const uint8_t *slot)
{
	uint16_t m;
	memcpy(&m, slot + 4, 2);
	return m;
}

static inline uint64_t pf_align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

enum { SEC_SLOTS, SEC_FILTER, SEC_ARENA, SEC_PORTS, SEC_FILES, SEC_HASHES, SEC_N };

struct pfile_header {
	char magic[8];                              /* "MOATPOL\0" */
	uint32_t version, endian, header_len, kind; /* kind: 0 allowlist, 1 high-risk */
	uint64_t file_len, npatterns, used, cap, filter_blocks;
	uint32_t nfiles, nports;
	uint8_t key[crypto_shorthash_KEYBYTES];
	struct {
		uint64_t off, len;
	} sec[SEC_N];
	uint64_t data_off, nblocks; /* blocks of PF_BLOCK over data_off..file_len (last short) */
	uint8_t table_sum[32];      /* BLAKE2b-256 of bytes header_len..data_off (the hashes) */
	uint8_t head_sum[32];       /* BLAKE2b-256 of the bytes of this struct before head_sum */
};
_Static_assert(sizeof(struct pfile_header) == 264, "header layout");

#endif
