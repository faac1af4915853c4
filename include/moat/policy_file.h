/* Compiled policy: a pattern set (allowlists or high-risk names) written once by
 * `moatctl compile` into a read-only file that moatd opens at start and on reload in
 * milliseconds, whatever its size. Little of it is loaded: the filter (about 1.25 bytes a name),
 * the port rules and the source file names are read, checked and kept in moatd's memory at
 * open; a lookup the filter does not answer reads a run of slots and one record with pread, so
 * the page cache holds one copy of what lookups touched for every worker and process, and the
 * rest of the file is never resident in moatd (pages read by pread are not mapped, so the kernel
 * reclaims the cold part of a large list under memory pressure). Nothing is mapped: a file
 * truncated under moatd cannot raise SIGBUS.
 *
 * File format, version 3 (owned by resolver/policy_file.c; host byte order, checked by a mark):
 *   0     header (struct pfile_header, 264 bytes), then zeros up to 4096 (checked: no hash
 *         covers them)
 *   4096  the block table: BLAKE2b-256 (libsodium crypto_generichash) of each 4 KiB block of
 *         bytes data_off..end (the last one short), then zeros up to data_off
 *   data_off (a multiple of 4096) the sections, each at the offset the header records:
 *         slots   cap x 6 bytes {record offset + 1 (u32, 0 = empty), meta (u16)}: meta's top
 *                 bits say which rules the record holds (exact, wild), its low 14 bits are the
 *                 low bits of the name's tag; the home slot is (tag x cap) >> 32, linear
 *                 probing wraps at cap (any size, at most 85% full: ~7 bytes a name)
 *         filter  blocked Bloom filter, 64-byte blocks, 7 bits a name picked from the tag
 *         records per name: its exact rule (u32) if any, its wild rule (u32) if any, then the
 *                 lower-cased wire name; back to back, unaligned
 *         ports   {rule, struct policy_ports} sorted by rule: the port rules
 *         files   the source file names, NUL-terminated, in rule file-index order
 *   The tag is 32 bits of the name's SipHash-2-4 under the key in the header. The header carries
 *   that key, the counts, the section table, data_off and the block count, a BLAKE2b-256 of bytes
 *   4096..data_off (the block table) and one of the header itself; so the header's checksum
 *   covers every byte by way of the table, and so does a signature of the header page
 *   (moat/policy_sig.h), once every block is checked before use.
 * Versions 1 and 2 (16-byte slots in the in-memory layout, read through the mapping) are
 * refused with "recompile it". Measured (tests/bench/compiled.sh): 10M names ~35 bytes a name.
 * A lookup hashes each block it needs on first use (policy_verify: lazy), remembering verified
 * blocks in a bitmap shared by the workers; a block that does not match is counted
 * (policy_file_info.bad_blocks), logged once, and fails the lookup closed: in an allowlist the
 * name is not listed (denied), in a high-risk list it is listed (denied and alerted, the rule
 * names the file "(damaged block)"). A block is hashed once; a lookup that read the file then
 * checks that the open file's size and modification time are unchanged, so a write in place or
 * a truncation after open (cp, rsync --inplace, scp onto the file) taints the set: logged once,
 * counted (policy_file_tainted_total), and every lookup that needs the file fails closed the
 * same way until a reload opens a verified replacement (the in-memory filter still answers
 * the names it rules out: those bytes were checked and are what is used).
 *
 * Written to a temporary file in the same directory and renamed over the target, so a running
 * moatd (which holds the old inode open) and a reload (which opens the new one) each see a whole
 * file. Replace a compiled file only by rename, never by writing into it: moatd refuses a file
 * changed in place. */
#ifndef MOAT_POLICY_FILE_H
#define MOAT_POLICY_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moat/config.h"
#include "moat/policy.h"
#include "moat/policy_file_kind.h"

#define POLICY_FILE_VERSION 3

/* What moatd checks when it opens a file. LAZY (default): the header, the section table, the
 * block table (a few ms) and the blocks of the sections it keeps (filter, port rules, names:
 * 10M names ~12 MiB) at open; every other block when a lookup first uses it, before it uses it
 * (a block that does not match fails that lookup closed).
 * FULL: every block hashed at open (reads the whole file once: ~0.4 GB/s here), so a damaged
 * file is refused before it is used. QUICK: header, section table and small sections; the body
 * is trusted (lookups stay inside the file whatever it holds, so a damaged body gives wrong
 * answers for the damaged names, never a crash). With a policy public key the signature covers
 * the header page only, and the body through the block table: QUICK is then run as LAZY (a
 * trusted body would be an unsigned one), and at start only the header page and the kept
 * sections are hashed. */
enum policy_file_verify {
	POLICY_VERIFY_LAZY = 0,
	POLICY_VERIFY_FULL,
	POLICY_VERIFY_QUICK,
};

/* Write set as a compiled file at path (temporary file + fsync + rename). highrisk records the
 * kind (a high-risk set has no ports). 0, or MOAT_EIO/MOAT_ENOMEM/MOAT_ELIMIT with err set. */
int policy_file_write(const struct policy_set *set, bool highrisk, const char *path, char *err,
                      size_t errlen);

/* Open a compiled file. pubkey (NULL: none) is an Ed25519 public key path.sig must verify with
 * (moat/policy_sig.h). highrisk: the file is used as high-risk names (port rules refused).
 * Ownership: *out is a new read-only set, freed with policy_set_free (which closes the file).
 * Errors (the running policy stays): MOAT_EIO (cannot read), MOAT_EFORMAT (not a compiled policy,
 * another version, truncated, checksum mismatch, bad section table), MOAT_EINVAL (signature),
 * each with err = "path: reason". */
int policy_file_open(const char *path, bool highrisk, enum policy_file_verify mode,
                     const uint8_t *pubkey, struct policy_set **out, char *err, size_t errlen);

/* What a compiled file holds, for `moatctl verify`. */
struct policy_file_info {
	uint32_t version;
	bool highrisk;
	uint64_t file_len, names, patterns, slots, arena_len, nports, nfiles;
	uint64_t blocks, bad_blocks; /* 4 KiB blocks; damaged ones met by lookups so far */
	bool tainted;                /* the file changed after it was opened */
};
int policy_file_info(const struct policy_set *set, struct policy_file_info *info);

/* Every check of a compiled block that failed its hash since start, in all sets (the metric
 * moat_policy_damaged_blocks_total). Any thread. */
uint64_t policy_file_damaged_total(void);

/* Compiled sets whose file changed after it was opened (each counted once), in all sets (the
 * metric moat_policy_files_changed_total). Any thread. */
uint64_t policy_file_tainted_total(void);

/* The loader hook: add the patterns of one allow or high-risk file to set. A compiled file is
 * opened (with cfg's policy_verify and policy_pubkey) and chained to set (policy_set_chain);
 * a text file is read into set. With policy_pubkey set, text files are refused, except the
 * shipped high-risk list (highrisk_files[0], part of the installation). err: "file: reason". */
int policy_source_load(const struct config *cfg, struct policy_set *set, const char *path,
                       bool highrisk, char *err, size_t errlen);

#endif
