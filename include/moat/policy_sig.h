/* Signed policy bundles: an Ed25519 signature (libsodium crypto_sign_detached) of a policy file
 * (compiled policy, RPZ zone, any bytes) kept beside it as FILE.sig. With `policy_pubkey:` set,
 * moatd loads only files whose signature verifies with that key.
 *
 * Two kinds, each the Ed25519 signature of a 64-byte BLAKE2b-512 (crypto_generichash) digest:
 *   whole file (version 1)   digest of "moat-sig-v1" then every byte of the file: RPZ zones and
 *                            any file that is not a compiled policy; one streaming pass.
 *   header page (version 2)  digest of "moat-sig-head-v2" then bytes 0..4096 of the file (the
 *                            header page, POLICY_SIG_HEAD): compiled policies (POLICY_FILE_EXT)
 *                            only. The page holds the header, whose checksum covers it, and the
 *                            BLAKE2b-256 of the block table, which holds one BLAKE2b-256 of each
 *                            4 KiB data block (moat/policy_file.h): the loader checks the table at
 *                            open and each block before first use, so the signature covers every
 *                            byte while only 4 KiB is hashed at start (10M names: ~480 MB not
 *                            read). That is why a compiled file opened with a key never trusts
 *                            the body unchecked (policy_verify: quick is raised to lazy).
 * The two context strings differ at byte 9, so neither digest input is a prefix-extension of the
 * other (a context that began with "moat-sig-v1" would let the whole-file signature of a
 * 4101-byte file "-head..." stand for the header signature of the page after it).
 * Which kind a file needs is fixed by how it is loaded, never by the .sig file (which is not
 * signed itself): a compiled policy needs a header signature, everything else a whole-file one,
 * and the other kind is refused with its reason. A whole-file signature of a compiled policy is
 * refused too (not also accepted): it would make moatd read the whole file at start, the cost
 * the header signature removes, without saying so; compiled files of a new format version must
 * be recompiled, so signed again, anyway. Re-sign with `moatctl sign`.
 * Formats (one line of text each):
 *   FILE.sig          "moat-sig 1 KEYID SIG\n"       whole file (as before: old .sig files load)
 *                     "moat-sig 2 KEYID head SIG\n"  header page
 *                                                     KEYID: 16 hex digits (the first 8 bytes of
 *                                                     BLAKE2b-256 of the public key), SIG: 128
 * Key files are moat/keyfile.h's. All functions are pure (files only). */
#ifndef MOAT_POLICY_SIG_H
#define MOAT_POLICY_SIG_H

#include <sodium.h>
#include <stddef.h>
#include <stdint.h>

#define POLICY_SIG_EXT ".sig"
#define POLICY_SIG_HEAD 4096 /* what a header signature covers: a compiled file's header page */

/* Errors of the verify functions, each with err = "path: reason": MOAT_EIO (file or signature
 * missing/unreadable), MOAT_EFORMAT (malformed .sig), MOAT_EINVAL (made with another key, the
 * file changed since it was signed, or a signature of the other kind). */

/* A whole-file signature of the file open as fd (its bytes are read through fd with pread, so
 * what is verified is what the caller reads; path names it and its .sig): for files loaded as
 * anything but a compiled policy (RPZ zones). A header signature is refused. */
int policy_sig_verify_fd(int fd, const char *path, const uint8_t pk[32], char *err, size_t errlen);

/* A whole-file signature checked over the bytes as the caller reads them (an RPZ zone as it is
 * parsed: what is verified is what is loaded, in one pass). begin loads path.sig (the errors
 * above; nothing to end then), add takes every byte read in order, end checks the signature
 * over them: 0 or MOAT_EINVAL ("bad signature"). */
struct policy_sig_stream {
	crypto_generichash_state st;
	uint8_t sig[64], pk[32];
};
int policy_sig_stream_begin(struct policy_sig_stream *s, const char *path, const uint8_t pk[32],
                            char *err, size_t errlen);
void policy_sig_stream_add(struct policy_sig_stream *s, const void *p, size_t n);
int policy_sig_stream_end(struct policy_sig_stream *s, const char *path, char *err, size_t errlen);

/* A header signature of a compiled policy whose header page is page: the bytes the caller
 * checked and goes on to use (not read again, so they cannot change in between). A page without
 * the compiled magic and a whole-file signature are refused. */
int policy_sig_verify_head(const uint8_t page[POLICY_SIG_HEAD], const char *path,
                           const uint8_t pk[32], char *err, size_t errlen);

/* The same with the page read through fd with pread. */
int policy_sig_verify_head_fd(int fd, const char *path, const uint8_t pk[32], char *err,
                              size_t errlen);

/* Verify path against path.sig, the kind chosen by the name: a compiled policy
 * (policy_file_is_compiled) by its header page, any other file whole (for moatctl verify). */
int policy_sig_verify_file(const char *path, const uint8_t pk[32], char *err, size_t errlen);

/* Sign path with the secret key sk into path.sig (temporary file + rename): a compiled policy
 * (by its name) over its header page, refused with MOAT_EFORMAT unless it starts with the
 * compiled magic; any other file whole. 0, MOAT_EIO or MOAT_EFORMAT. */
int policy_sig_sign_file(const char *path, const uint8_t sk[64], char *err, size_t errlen);

/* BLAKE2b of prefix (may be NULL) then len bytes of fd from off, into out[outlen] (16..64).
 * 0 or MOAT_EIO (short file, read error). */
int policy_sig_hash_fd(int fd, uint64_t off, uint64_t len, const char *prefix, uint8_t *out,
                       size_t outlen);

#endif
