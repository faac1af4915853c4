/* keyfile.c owns moat's one-line key files (formats in moat/keyfile.h): reading one line,
 * the `MAGIC HEX` form they and signature files share, writing one atomically, and making a
 * key pair with libsodium. */
#include "moat/keyfile.h"

#include <errno.h>
#include <stdbool.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "moat/err.h"
#include "moat/pathfd.h"

int keyfile_line(const char *path, char *line, size_t cap, char *err, size_t errlen)
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

int keyfile_hex(const char *line, const char *magic, uint8_t *out, size_t outlen, const char **rest)
{
	size_t ml = strlen(magic), bin = 0;
	const char *end;
	if (strncmp(line, magic, ml) != 0 || line[ml] != ' ')
		return MOAT_EFORMAT;
	line += ml + 1;
	if (sodium_hex2bin(out, outlen, line, strlen(line), NULL, &bin, &end) != 0 || bin != outlen)
		return MOAT_EFORMAT;
	if (rest)
		*rest = end;
	else if (*end)
		return MOAT_EFORMAT;
	return 0;
}

int keyfile_read(const char *path, uint8_t *key, size_t klen, char *err, size_t errlen)
{
	char line[256];
	const char *magic = klen == 32 ? "moat-public-key 1" : "moat-secret-key 1";
	int rc = keyfile_line(path, line, sizeof(line), err, errlen);
	if (rc)
		return rc;
	if ((klen != 32 && klen != 64) || keyfile_hex(line, magic, key, klen, NULL)) {
		snprintf(err, errlen, "%s: not a moat %s key (expected '%s HEX')", path,
		         klen == 32 ? "public" : "secret", magic);
		return MOAT_EFORMAT;
	}
	return 0;
}

int keyfile_write(const char *path, const char *text, mode_t mode, char *err, size_t errlen)
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

int keyfile_keygen(const char *path, char *err, size_t errlen)
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
	int rc = keyfile_write(path, line, 0600, err, errlen);
	sodium_memzero(line, sizeof(line));
	if (rc)
		return rc;
	snprintf(line, sizeof(line), "moat-public-key 1 %s\n", pkhex);
	snprintf(pubpath, sizeof(pubpath), "%s.pub", path);
	return keyfile_write(pubpath, line, 0644, err, errlen);
}
