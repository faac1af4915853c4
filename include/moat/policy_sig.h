/* Signed policy bundles: an Ed25519 signature (libsodium crypto_sign_detached) of a policy file
 * (compiled policy, RPZ zone, any bytes) kept beside it as FILE.sig. With `policy_pubkey:` set,
 * moatd loads only files whose signature verifies with that key.
 *
 * What is signed: the BLAKE2b-512 (crypto_generichash) of the string "moat-sig-v1" followed by
 * every byte of the file; the 64-byte digest is the Ed25519 message, so a file of any size is
 * signed and checked in one streaming pass.
 * Formats (version 1, one line of text each):
 *   FILE.sig          "moat-sig 1 KEYID SIG\n"      KEYID: 16 hex digits (the first 8 bytes of
 *                                                     BLAKE2b-256 of the public key), SIG: 128
 *   public key file   "moat-public-key 1 PK\n"       PK: 64 hex digits
 *   secret key file   "moat-secret-key 1 SK\n"       SK: 128 hex digits (libsodium's seed+pk)
 * `moatctl keygen -o K` writes K (mode 0600) and K.pub. All functions are pure (files only). */
#ifndef MOAT_POLICY_SIG_H
#define MOAT_POLICY_SIG_H

#include <stddef.h>
#include <stdint.h>

#define POLICY_SIG_EXT ".sig"

/* Verify path against path.sig with the public key pk. 0, or MOAT_EIO (file or signature
 * missing/unreadable), MOAT_EFORMAT (malformed .sig), MOAT_EINVAL (made with another key, or
 * the file changed since it was signed), with err = "path: reason". */
int policy_sig_verify_file(const char *path, const uint8_t pk[32], char *err, size_t errlen);

/* The same for an open file (its bytes are read through fd with pread, so what is verified is
 * what the caller maps; path names it and its .sig). */
int policy_sig_verify_fd(int fd, const char *path, const uint8_t pk[32], char *err, size_t errlen);

/* Sign path with the secret key sk into path.sig (temporary file + rename). 0 or MOAT_EIO. */
int policy_sig_sign_file(const char *path, const uint8_t sk[64], char *err, size_t errlen);

/* BLAKE2b of prefix (may be NULL) then len bytes of fd from off, into out[outlen] (16..64).
 * 0 or MOAT_EIO (short file, read error). */
int policy_sig_hash_fd(int fd, uint64_t off, uint64_t len, const char *prefix, uint8_t *out,
                       size_t outlen);

/* Read a key file: a public key (klen 32) or a secret key (klen 64). 0, MOAT_EIO or
 * MOAT_EFORMAT with err set. */
int policy_sig_read_key(const char *path, uint8_t *key, size_t klen, char *err, size_t errlen);

/* A new key pair: path (secret, mode 0600) and path.pub. 0 or MOAT_EIO. */
int policy_sig_keygen(const char *path, char *err, size_t errlen);

#endif
