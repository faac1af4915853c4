/* Key files: moat's Ed25519 signing keys (libsodium), one line of text each, and the helpers the
 * signature files of moat/policy_sig.h share with them.
 *   public key file   "moat-public-key 1 PK\n"   PK: 64 hex digits
 *   secret key file   "moat-secret-key 1 SK\n"   SK: 128 hex digits (libsodium's seed+pk)
 * `moatctl keygen -o K` writes K (mode 0600) and K.pub. The config reads `policy_pubkey:` here
 * (so a bad key is an error at its line), below the policy code that checks signatures. */
#ifndef MOAT_KEYFILE_H
#define MOAT_KEYFILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Read a key file: a public key (klen 32) or a secret key (klen 64). 0, MOAT_EIO or
 * MOAT_EFORMAT with err set. */
int keyfile_read(const char *path, uint8_t *key, size_t klen, char *err, size_t errlen);

/* A new key pair: path (secret, mode 0600) and path.pub. 0 or MOAT_EIO. */
int keyfile_keygen(const char *path, char *err, size_t errlen);

/* One line of at most cap-1 bytes from path (opened through moat/pathfd.h, so also after the
 * privilege drop), without its newline. 0, or MOAT_EIO with err set and errno kept. */
int keyfile_line(const char *path, char *line, size_t cap, char *err, size_t errlen);

/* "MAGIC HEX..." (magic: a word and a version): the hex decoded into out[outlen] (exactly).
 * rest NULL: nothing may follow; else *rest points after the hex. 0 or MOAT_EFORMAT. */
int keyfile_hex(const char *line, const char *magic, uint8_t *out, size_t outlen,
                const char **rest);

/* Write text to path through a temporary file, fsync and a rename, with the given mode.
 * 0 or MOAT_EIO with err set. */
int keyfile_write(const char *path, const char *text, mode_t mode, char *err, size_t errlen);

#endif
