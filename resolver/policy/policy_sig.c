/* policy_sig.c owns signed policy files: the .sig and key file formats (moat/policy_sig.h), the
 * two signed digests (of a whole file, streamed; of a compiled file's header page), signing and
 * checking, and which kind a file needs. Key files and the one-line file helpers are
 * moat/keyfile.h's. */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "moat/err.h"
#include "moat/keyfile.h"
#include "moat/pathfd.h"
#include "moat/policy_file_kind.h"
#include "moat/policy_sig.h"

#define SIG_CONTEXT "moat-sig-v1"
#define SIG_HEAD_CONTEXT "moat-sig-head-v2" /* not an extension of SIG_CONTEXT: see the header */
#define HASH_CHUNK ((size_t)1 << 20)

int policy_sig_hash_fd(int fd, uint64_t off, uint64_t len, const char *prefix, uint8_t *out,
                       size_t outlen)
{
	crypto_generichash_state st;
	void *mem = NULL;
	/* Aligned, and whole pages asked for, so the caller may read with O_DIRECT. */
	if (posix_memalign(&mem, 4096, HASH_CHUNK) != 0)
		return MOAT_ENOMEM;
	uint8_t *buf = mem;
	if (sodium_init() < 0 || crypto_generichash_init(&st, NULL, 0, outlen) != 0) {
		free(buf);
		return MOAT_ENOMEM;
	}
	if (prefix)
		crypto_generichash_update(&st, (const uint8_t *)prefix, strlen(prefix));
	while (len > 0) {
		size_t want = len < HASH_CHUNK ? (size_t)len : HASH_CHUNK;
		ssize_t got = pread(fd, buf, (want + 4095) & ~(size_t)4095, (off_t)off);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			free(buf);
			return MOAT_EIO;
		}
		got = (size_t)got > want ? (ssize_t)want : got;
		crypto_generichash_update(&st, buf, (size_t)got);
		off += (uint64_t)got;
		len -= (uint64_t)got;
	}
	free(buf);
	crypto_generichash_final(&st, out, outlen);
	return 0;
}

static void key_id(const uint8_t pk[32], char hex[17])
{
	uint8_t h[32];
	crypto_generichash(h, sizeof(h), pk, 32, NULL, 0);
	sodium_bin2hex(hex, 17, h, 8);
}

/* The digest that is signed: of the context string and the whole file. */
static int file_digest(int fd, uint8_t d[64])
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return MOAT_EIO;
	return policy_sig_hash_fd(fd, 0, (uint64_t)st.st_size, SIG_CONTEXT, d, 64);
}

/* The kinds of moat/policy_sig.h, by their version in the .sig line. */
enum sig_kind { SIG_FILE = 1, SIG_HEAD = 2 };

/* The digest a header signature signs: of its context string and the header page. */
static void head_digest(const uint8_t page[POLICY_SIG_HEAD], uint8_t d[64])
{
	crypto_generichash_state st;
	crypto_generichash_init(&st, NULL, 0, 64);
	crypto_generichash_update(&st, (const uint8_t *)SIG_HEAD_CONTEXT, strlen(SIG_HEAD_CONTEXT));
	crypto_generichash_update(&st, page, POLICY_SIG_HEAD);
	crypto_generichash_final(&st, d, 64);
}

static bool sodium_ready(const char *path, char *err, size_t errlen)
{
	if (sodium_init() >= 0)
		return true;
	snprintf(err, errlen, "%s: libsodium failed", path);
	return false;
}

static bool page_is_compiled(const uint8_t page[POLICY_SIG_HEAD])
{
	return memcmp(page, POLICY_FILE_MAGIC, sizeof(POLICY_FILE_MAGIC)) == 0;
}

/* The header page through fd: 0, or MOAT_EFORMAT (shorter) / MOAT_EIO with err set. */
static int read_page(int fd, const char *path, uint8_t page[POLICY_SIG_HEAD], char *err,
                     size_t errlen)
{
	ssize_t got = pread(fd, page, POLICY_SIG_HEAD, 0);
	if (got == POLICY_SIG_HEAD)
		return 0;
	snprintf(err, errlen, "%s: %s", path,
	         got < 0 ? "read error" : "not a compiled moat policy (shorter than its header)");
	return got < 0 ? MOAT_EIO : MOAT_EFORMAT;
}

/* "moat-sig 1 KEYID SIG" or "moat-sig 2 KEYID head SIG": its kind, key id and signature. */
static int parse_sig(const char *line, enum sig_kind *kind, uint8_t id[8], uint8_t sig[64])
{
	const char *rest;
	if (keyfile_hex(line, "moat-sig 1", id, 8, &rest) == 0)
		*kind = SIG_FILE;
	else if (keyfile_hex(line, "moat-sig 2", id, 8, &rest) == 0 &&
	         strncmp(rest, " head", 5) == 0)
		*kind = SIG_HEAD, rest += 5;
	else
		return MOAT_EFORMAT;
	if (*rest != ' ' || strlen(rest + 1) != 128 ||
	    sodium_hex2bin(sig, 64, rest + 1, 128, NULL, NULL, NULL) != 0)
		return MOAT_EFORMAT;
	return 0;
}

static const char *kind_name(enum sig_kind k)
{
	return k == SIG_HEAD ? "a header signature (moat-sig 2 head)"
	                     : "a whole-file signature (moat-sig 1)";
}

/* path.sig read and checked against what the caller loads: of the kind want, made with pk.
 * 0 with sig[64] filled, or an error of moat/policy_sig.h with err set. */
static int sig_load(const char *path, const uint8_t pk[32], enum sig_kind want, uint8_t sig[64],
                    char *err, size_t errlen)
{
	char sigpath[4096], line[256], wantid[17], got[17];
	uint8_t id[8];
	enum sig_kind kind;
	snprintf(sigpath, sizeof(sigpath), "%s%s", path, POLICY_SIG_EXT);
	int rc = keyfile_line(sigpath, line, sizeof(line), err, errlen);
	if (rc && errno == ENOENT) /* (not access(2): moatd's seccomp filter refuses it) */
		snprintf(err, errlen, "%s: no signature (%s missing): policy_pubkey is set", path,
		         sigpath);
	if (rc)
		return rc;
	if (parse_sig(line, &kind, id, sig)) {
		snprintf(err, errlen,
		         "%s: malformed signature file (expected 'moat-sig 1 KEYID SIG' or "
		         "'moat-sig 2 KEYID head SIG')",
		         sigpath);
		return MOAT_EFORMAT;
	}
	if (kind != want) {
		snprintf(err, errlen, "%s: %s, but it is loaded as %s, which needs %s%s", path,
		         kind_name(kind),
		         want == SIG_HEAD ? "a compiled policy" : "a whole file (not compiled)",
		         kind_name(want),
		         want == SIG_HEAD ? ": sign it again with moatctl sign" : "");
		return MOAT_EINVAL;
	}
	key_id(pk, wantid);
	sodium_bin2hex(got, sizeof(got), id, sizeof(id));
	if (strcmp(got, wantid) != 0) {
		snprintf(err, errlen, "%s: signed with key %s, policy_pubkey is key %s", path, got,
		         wantid);
		return MOAT_EINVAL;
	}
	return 0;
}

static int sig_check(const uint8_t sig[64], const uint8_t d[64], const uint8_t pk[32],
                     const char *path, char *err, size_t errlen)
{
	if (crypto_sign_verify_detached(sig, d, 64, pk) == 0)
		return 0;
	snprintf(err, errlen, "%s: bad signature: the file changed after it was signed", path);
	return MOAT_EINVAL;
}

int policy_sig_verify_fd(int fd, const char *path, const uint8_t pk[32], char *err, size_t errlen)
{
	uint8_t sig[64], d[64];
	int rc = sig_load(path, pk, SIG_FILE, sig, err, errlen);
	if (rc)
		return rc;
	if ((rc = file_digest(fd, d))) {
		snprintf(err, errlen, "%s: read error while checking the signature", path);
		return rc;
	}
	return sig_check(sig, d, pk, path, err, errlen);
}

int policy_sig_stream_begin(struct policy_sig_stream *s, const char *path, const uint8_t pk[32],
                            char *err, size_t errlen)
{
	memset(s, 0, sizeof(*s));
	if (!sodium_ready(path, err, errlen))
		return MOAT_ENOMEM;
	int rc = sig_load(path, pk, SIG_FILE, s->sig, err, errlen);
	if (rc)
		return rc;
	memcpy(s->pk, pk, sizeof(s->pk));
	crypto_generichash_init(&s->st, NULL, 0, 64);
	crypto_generichash_update(&s->st, (const uint8_t *)SIG_CONTEXT, strlen(SIG_CONTEXT));
	return 0;
}

void policy_sig_stream_add(struct policy_sig_stream *s, const void *p, size_t n)
{
	crypto_generichash_update(&s->st, p, n);
}

int policy_sig_stream_end(struct policy_sig_stream *s, const char *path, char *err, size_t errlen)
{
	uint8_t d[64];
	crypto_generichash_final(&s->st, d, sizeof(d));
	int rc = sig_check(s->sig, d, s->pk, path, err, errlen);
	sodium_memzero(s, sizeof(*s));
	return rc;
}

int policy_sig_verify_head(const uint8_t page[POLICY_SIG_HEAD], const char *path,
                           const uint8_t pk[32], char *err, size_t errlen)
{
	uint8_t sig[64], d[64];
	if (!sodium_ready(path, err, errlen))
		return MOAT_ENOMEM;
	if (!page_is_compiled(page)) {
		snprintf(err, errlen, "%s: not a compiled moat policy: no header signature applies",
		         path);
		return MOAT_EINVAL;
	}
	int rc = sig_load(path, pk, SIG_HEAD, sig, err, errlen);
	if (rc)
		return rc;
	head_digest(page, d);
	return sig_check(sig, d, pk, path, err, errlen);
}

int policy_sig_verify_head_fd(int fd, const char *path, const uint8_t pk[32], char *err,
                              size_t errlen)
{
	uint8_t page[POLICY_SIG_HEAD];
	int rc = read_page(fd, path, page, err, errlen);
	return rc ? rc : policy_sig_verify_head(page, path, pk, err, errlen);
}

int policy_sig_verify_file(const char *path, const uint8_t pk[32], char *err, size_t errlen)
{
	FILE *f = pathfd_fopen(path);
	if (!f) {
		snprintf(err, errlen, "%s: cannot open: %m", path);
		return MOAT_EIO;
	}
	int rc = policy_file_is_compiled(path)
	             ? policy_sig_verify_head_fd(fileno(f), path, pk, err, errlen)
	             : policy_sig_verify_fd(fileno(f), path, pk, err, errlen);
	fclose(f);
	return rc;
}

/* The digest path.sig signs and its kind: by the name (a compiled policy: its header page,
 * which must start with the compiled magic), else the whole file. */
static int sign_digest(int fd, const char *path, uint8_t d[64], enum sig_kind *kind, char *err,
                       size_t errlen)
{
	uint8_t page[POLICY_SIG_HEAD];
	int rc;
	*kind = policy_file_is_compiled(path) ? SIG_HEAD : SIG_FILE;
	if (!sodium_ready(path, err, errlen))
		return MOAT_ENOMEM;
	if (*kind == SIG_FILE) {
		if ((rc = file_digest(fd, d)))
			snprintf(err, errlen, "%s: read error", path);
		return rc;
	}
	if ((rc = read_page(fd, path, page, err, errlen)))
		return rc;
	if (!page_is_compiled(page)) {
		snprintf(err, errlen,
		         "%s: not a compiled moat policy (no %s header), but named like one (%s): "
		         "make it with moatctl compile, or rename it to sign it as a whole file",
		         path, POLICY_FILE_MAGIC, POLICY_FILE_EXT);
		return MOAT_EFORMAT;
	}
	head_digest(page, d);
	return 0;
}

int policy_sig_sign_file(const char *path, const uint8_t sk[64], char *err, size_t errlen)
{
	char sigpath[4096], id[17], hex[129], line[256];
	uint8_t d[64], sig[64];
	enum sig_kind kind;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "%s: cannot open: %m", path);
		return MOAT_EIO;
	}
	int rc = sign_digest(fd, path, d, &kind, err, errlen);
	close(fd);
	if (rc)
		return rc;
	crypto_sign_detached(sig, NULL, d, sizeof(d), sk);
	key_id(sk + 32, id); /* libsodium's secret key ends with the public key */
	sodium_bin2hex(hex, sizeof(hex), sig, sizeof(sig));
	snprintf(line, sizeof(line), "moat-sig %d %s%s %s\n", kind, id,
	         kind == SIG_HEAD ? " head" : "", hex);
	snprintf(sigpath, sizeof(sigpath), "%s%s", path, POLICY_SIG_EXT);
	return keyfile_write(sigpath, line, 0644, err, errlen);
}
