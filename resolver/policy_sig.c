/* policy_sig.c owns signed policy files: the .sig and key file formats (moat/policy_sig.h), the
 * streaming digest of a file, signing and checking. */
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
#include "moat/pathfd.h"
#include "moat/policy_sig.h"

#define SIG_CONTEXT "moat-sig-v1"
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

/* One line of at most cap-1 bytes from path, without its newline. */
static int read_line(const char *path, char *line, size_t cap, char *err, size_t errlen)
{
	FILE *f = pathfd_fopen(path); /* also after the privilege drop (moat/pathfd.h) */
	if (!f) {
		int e = errno;
		snprintf(err, errlen, "%s: cannot open: %m", path);
		errno = e;
		return MOAT_EIO;
	}
	size_t n = fread(line, 1, cap - 1, f);
	fclose(f);
	line[n] = 0;
	char *nl = strchr(line, '\n');
	if (nl)
		*nl = 0;
	return 0;
}

/* "WORD 1 HEX..." with WORD magic: the hex decoded into out[outlen] (exactly). */
static int parse_hex_line(const char *line, const char *magic, uint8_t *out, size_t outlen,
                          const char **rest)
{
	size_t ml = strlen(magic), bin = 0;
	const char *end;
	if (strncmp(line, magic, ml) != 0 || strncmp(line + ml, " 1 ", 3) != 0)
		return MOAT_EFORMAT;
	line += ml + 3;
	if (sodium_hex2bin(out, outlen, line, strlen(line), NULL, &bin, &end) != 0 || bin != outlen)
		return MOAT_EFORMAT;
	if (rest)
		*rest = end;
	else if (*end)
		return MOAT_EFORMAT;
	return 0;
}

int policy_sig_read_key(const char *path, uint8_t *key, size_t klen, char *err, size_t errlen)
{
	char line[256];
	const char *magic = klen == 32 ? "moat-public-key" : "moat-secret-key";
	int rc = read_line(path, line, sizeof(line), err, errlen);
	if (rc)
		return rc;
	if ((klen != 32 && klen != 64) || parse_hex_line(line, magic, key, klen, NULL)) {
		snprintf(err, errlen, "%s: not a moat %s key (expected '%s 1 HEX')", path,
		         klen == 32 ? "public" : "secret", magic);
		return MOAT_EFORMAT;
	}
	return 0;
}

int policy_sig_verify_fd(int fd, const char *path, const uint8_t pk[32], char *err, size_t errlen)
{
	char sigpath[4096], line[256], want[17];
	uint8_t sig[64], d[64], id[8];
	const char *rest;
	snprintf(sigpath, sizeof(sigpath), "%s%s", path, POLICY_SIG_EXT);
	int rc = read_line(sigpath, line, sizeof(line), err, errlen);
	if (rc && errno == ENOENT) /* (not access(2): moatd's seccomp filter refuses it) */
		snprintf(err, errlen, "%s: no signature (%s missing): policy_pubkey is set", path,
		         sigpath);
	if (rc)
		return rc;
	/* "moat-sig 1 KEYID SIG": the key id, a blank, then the signature. */
	if (parse_hex_line(line, "moat-sig", id, sizeof(id), &rest) || *rest != ' ' ||
	    sodium_hex2bin(sig, sizeof(sig), rest + 1, strlen(rest + 1), NULL, NULL, NULL) != 0 ||
	    strlen(rest + 1) != 128) {
		snprintf(err, errlen,
		         "%s: malformed signature file (expected 'moat-sig 1 KEYID SIG')", sigpath);
		return MOAT_EFORMAT;
	}
	key_id(pk, want);
	char got[17];
	sodium_bin2hex(got, sizeof(got), id, sizeof(id));
	if (strcmp(got, want) != 0) {
		snprintf(err, errlen, "%s: signed with key %s, policy_pubkey is key %s", path, got,
		         want);
		return MOAT_EINVAL;
	}
	if ((rc = file_digest(fd, d))) {
		snprintf(err, errlen, "%s: read error while checking the signature", path);
		return rc;
	}
	if (crypto_sign_verify_detached(sig, d, sizeof(d), pk) != 0) {
		snprintf(err, errlen, "%s: bad signature: the file changed after it was signed",
		         path);
		return MOAT_EINVAL;
	}
	return 0;
}

int policy_sig_verify_file(const char *path, const uint8_t pk[32], char *err, size_t errlen)
{
	FILE *f = pathfd_fopen(path);
	if (!f) {
		snprintf(err, errlen, "%s: cannot open: %m", path);
		return MOAT_EIO;
	}
	int rc = policy_sig_verify_fd(fileno(f), path, pk, err, errlen);
	fclose(f);
	return rc;
}

/* Write text to path through a temporary file and a rename, with the given mode. */
static int write_atomic(const char *path, const char *text, mode_t mode, char *err, size_t errlen)
{
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path);
	int fd = mkstemp(tmp);
	if (fd < 0) {
		snprintf(err, errlen, "%s: cannot create: %m", tmp);
		return MOAT_EIO;
	}
	size_t len = strlen(text);
	bool ok = fchmod(fd, mode) == 0 && write(fd, text, len) == (ssize_t)len && fsync(fd) == 0;
	ok = close(fd) == 0 && ok;
	if (!ok || rename(tmp, path) != 0) {
		snprintf(err, errlen, "%s: cannot write: %m", path);
		unlink(tmp);
		return MOAT_EIO;
	}
	return 0;
}

int policy_sig_sign_file(const char *path, const uint8_t sk[64], char *err, size_t errlen)
{
	char sigpath[4096], id[17], hex[129], line[256];
	uint8_t d[64], sig[64];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "%s: cannot open: %m", path);
		return MOAT_EIO;
	}
	int rc = file_digest(fd, d);
	close(fd);
	if (rc) {
		snprintf(err, errlen, "%s: read error", path);
		return rc;
	}
	crypto_sign_detached(sig, NULL, d, sizeof(d), sk);
	key_id(sk + 32, id); /* libsodium's secret key ends with the public key */
	sodium_bin2hex(hex, sizeof(hex), sig, sizeof(sig));
	snprintf(line, sizeof(line), "moat-sig 1 %s %s\n", id, hex);
	snprintf(sigpath, sizeof(sigpath), "%s%s", path, POLICY_SIG_EXT);
	return write_atomic(sigpath, line, 0644, err, errlen);
}

int policy_sig_keygen(const char *path, char *err, size_t errlen)
{
	uint8_t pk[32], sk[64];
	char pkhex[65], skhex[129], line[256], pubpath[4096];
	if (sodium_init() < 0 || crypto_sign_keypair(pk, sk) != 0) {
		snprintf(err, errlen, "keygen: libsodium failed");
		return MOAT_EIO;
	}
	sodium_bin2hex(pkhex, sizeof(pkhex), pk, sizeof(pk));
	sodium_bin2hex(skhex, sizeof(skhex), sk, sizeof(sk));
	sodium_memzero(sk, sizeof(sk));
	snprintf(line, sizeof(line), "moat-secret-key 1 %s\n", skhex);
	sodium_memzero(skhex, sizeof(skhex));
	int rc = write_atomic(path, line, 0600, err, errlen);
	sodium_memzero(line, sizeof(line));
	if (rc)
		return rc;
	snprintf(line, sizeof(line), "moat-public-key 1 %s\n", pkhex);
	snprintf(pubpath, sizeof(pubpath), "%s.pub", path);
	return write_atomic(pubpath, line, 0644, err, errlen);
}
