/* fuzz_pfile: compiled policy files (policy_file.c) as moatd maps them at start and reload. A
 * damaged or hostile file must be refused with a terminated reason, or, in the quick mode that
 * trusts the body, searched without a read outside the mapping or a hang.
 *
 * The input is the file, with the last byte choosing repairs so the fuzzer gets past the checks
 * it could never satisfy by chance: bit 0 writes the magic, version and byte-order mark, bit 1
 * the true file length, bit 2 the header's own checksum (after the other repairs). The file goes
 * through a memfd (opened by /proc/self/fd/N), is opened QUICK and FULL, and a set that opens is
 * searched for names cut from the input and walked with policy_set_each. */
#include <sodium.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "moat/err.h"
#include "moat/name.h"
#include "moat/policy.h"
#include "moat/policy_file.h"

static void count_cb(void *ctx, const uint8_t *lname, const struct policy_rule *exact,
                     const struct policy_rule *wild)
{
	(void)lname;
	*(size_t *)ctx += (exact && exact->file) + (wild && wild->file);
}

static void search(const struct policy_set *s, const uint8_t *data, size_t size)
{
	uint8_t wire[NAME_MAXWIRE];
	struct policy_rule r;
	for (size_t off = 0; off + 8 <= size && off < 4096; off += 97) {
		size_t len = size - off < 40 ? size - off : 40;
		if (name_from_text((const char *)data + off, len, wire) > 0)
			(void)policy_set_match(s, wire, &r);
	}
	static const char *fixed[] = {"example.com", "a.b.c.example.org", "n00000001.bench.test"};
	for (size_t i = 0; i < 3; i++) {
		FZ_CHECK(name_from_text(fixed[i], strlen(fixed[i]), wire) > 0, "name");
		(void)policy_set_match(s, wire, &r);
	}
	size_t n = 0;
	policy_set_each(s, count_cb, &n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* The repairs write into the 264-byte header (its checksum at 232..263) with libsodium,
	 * which ASan does not see: a shorter input would let them overrun the copy unnoticed. */
	if (size < 264 + 1 || size > ((size_t)1 << 22) || sodium_init() < 0)
		return 0;
	uint8_t fix = data[size - 1];
	size--;
	uint8_t *f = malloc(size);
	FZ_CHECK(f != NULL, "malloc");
	memcpy(f, data, size);
	if (fix & 1) {
		uint32_t v = POLICY_FILE_VERSION, e = 0x01020304u;
		memcpy(f, "MOATPOL", 8);
		memcpy(f + 8, &v, 4);
		memcpy(f + 12, &e, 4);
	}
	if (fix & 2) {
		uint64_t len = size;
		memcpy(f + 24, &len, 8);
	}
	uint64_t data_off;
	memcpy(&data_off, f + 184, 8);
	if ((fix & 8) && data_off > 4096 && data_off <= size) /* the block table's sum */
		crypto_generichash(f + 200, 32, f + 4096, (size_t)(data_off - 4096), NULL, 0);
	if (fix & 4)
		crypto_generichash(f + 232, 32, f, 232, NULL, 0);
	int fd = memfd_create("fuzz_pfile", MFD_CLOEXEC);
	FZ_CHECK(fd >= 0, "memfd_create");
	FZ_CHECK(write(fd, f, size) == (ssize_t)size, "write");
	free(f);
	char path[64], err[512];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	enum policy_file_verify modes[] = {POLICY_VERIFY_LAZY, POLICY_VERIFY_FULL,
	                                   POLICY_VERIFY_QUICK};
	for (int mode = 0; mode < 3; mode++) {
		struct policy_set *s = NULL;
		err[0] = 0;
		int rc = policy_file_open(path, mode == 2, modes[mode], NULL, &s, err, sizeof(err));
		FZ_CHECK(memchr(err, 0, sizeof(err)) != NULL, "error text not terminated");
		if (rc) {
			FZ_CHECK(s == NULL && err[0], "refused without a reason (rc %d)", rc);
			continue;
		}
		search(s, data, size);
		policy_set_free(s);
	}
	close(fd);
	return 0;
}
