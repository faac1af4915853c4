/* fuzz_policy: the operator's files, read at start-up and on every reload (a bad file must leave
 * moatd running on the old policy, never crash it): allowlist/high-risk pattern files, blocked
 * range files and the YAML config.
 *
 * The first byte chooses what the rest is:
 *   0: patterns, one per line, each given to policy_set_add; every accepted pattern then matches
 *      its own wire name (an exact pattern the name itself, "*.name" every name below it and not
 *      the name, unless that is listed too), and the set counts what it accepted;
 *   1: a pattern file for policy_set_load_file (comments, blanks, whitespace, line numbers);
 *   2: a blocked-range file for addrguard_load_file;
 *   3: YAML for config_load_string (config_init and config_free around it, then config_validate
 *      on success), and netaddr_parse_addrport / netaddr_parse_cidr on the text.
 * Files are handed over through a memfd, read by path (/proc/self/fd/N) as moatd reads them.
 * Errors must come back as codes with a terminated message, never as a crash or a leak. */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "moat/addrguard.h"
#include "moat/config.h"
#include "moat/config_load.h"
#include "moat/err.h"
#include "moat/idn.h"
#include "moat/name.h"
#include "moat/policy.h"

/* libfyaml 0.7.12 leaks a 4 KB buffer when fy_node_get_scalar unescapes some long single-quoted
 * scalars (reproduced with libfyaml alone: parse, get the scalar, destroy the document; see
 * corpus/policy/regress-libfyaml-quoted-scalar-leak.bin). Its frames cannot be told apart (it is
 * built without frame pointers, so the allocation stack ends in the library), so LeakSanitizer
 * ignores allocations made inside libfyaml. moat's own allocations (config.c, policy.c,
 * addrguard.c) are still checked. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
	return "leak:libfyaml.so\n";
}

static void check_err(const char *err, size_t cap)
{
	FZ_CHECK(memchr(err, 0, cap) != NULL, "error text not terminated");
}

static void fuzz_patterns(const uint8_t *data, size_t size)
{
	struct policy_set *set = policy_set_new();
	FZ_CHECK(set != NULL, "policy_set_new");
	size_t accepted = 0;
	const char *s = (const char *)data, *end = s + size;
	while (s <= end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		size_t len = nl ? (size_t)(nl - s) : (size_t)(end - s);
		int rc = policy_set_add(set, s, len, "fuzz", 1);
		FZ_CHECK(rc == 0 || rc == MOAT_EINVAL, "policy_set_add returned %d", rc);
		if (rc == 0) {
			accepted++;
			/* The name as moat reads it: UTF-8 and A-labels go through idn.c first. */
			char conv[IDN_MAXTEXT], why[200];
			const char *t = s;
			size_t tl = len;
			int cl = idn_from_user(s, len, conv, sizeof(conv), why, sizeof(why));
			FZ_CHECK(cl >= 0, "accepted pattern refused by idn_from_user");
			if (cl > 0) {
				t = conv;
				tl = (size_t)cl;
			}
			bool wild = tl >= 2 && t[0] == '*';
			uint8_t wire[NAME_MAXWIRE], below[NAME_MAXWIRE];
			int wl = name_from_text(t + (wild ? 2 : 0), tl - (wild ? 2 : 0), wire);
			FZ_CHECK(wl > 0, "accepted pattern is no name");
			struct policy_rule rule;
			if (!wild) {
				FZ_CHECK(policy_set_match(set, wire, &rule) && !rule.wildcard &&
				             rule.file && strcmp(rule.file, "fuzz") == 0 &&
				             rule.line == 1,
				         "exact pattern does not match its name");
			} else if (wl + 2 <= NAME_MAXWIRE) {
				below[0] = 1;
				below[1] = 'x';
				memcpy(below + 2, wire, (size_t)wl);
				FZ_CHECK(policy_set_match(set, below, &rule),
				         "wildcard does not match a child");
			}
		}
		if (!nl)
			break;
		s = nl + 1;
	}
	FZ_CHECK(policy_set_count(set) <= accepted, "count %zu > accepted %zu",
	         policy_set_count(set), accepted);
	policy_set_free(set);
}

/* The input as a file moatd can open by path. Returns the fd or -1. */
static int as_file(const uint8_t *data, size_t size, char *path, size_t cap)
{
	int fd = memfd_create("fuzz", MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t done = 0;
	while (done < size) {
		ssize_t n = write(fd, data + done, size - done);
		if (n <= 0) {
			close(fd);
			return -1;
		}
		done += (size_t)n;
	}
	snprintf(path, cap, "/proc/self/fd/%d", fd);
	return fd;
}

static void fuzz_pattern_file(const uint8_t *data, size_t size)
{
	char path[64], err[256];
	int fd = as_file(data, size, path, sizeof(path));
	if (fd < 0)
		return;
	struct policy_set *set = policy_set_new();
	FZ_CHECK(set != NULL, "policy_set_new");
	memset(err, 'X', sizeof(err));
	err[sizeof(err) - 1] = 0;
	int rc = policy_set_load_file(set, path, err, sizeof(err));
	FZ_CHECK(rc == 0 || rc == MOAT_EINVAL || rc == MOAT_ELIMIT, "load_file returned %d", rc);
	check_err(err, sizeof(err));
	policy_set_free(set);
	close(fd);
}

static void fuzz_range_file(const uint8_t *data, size_t size)
{
	char path[64], err[256];
	int fd = as_file(data, size, path, sizeof(path));
	if (fd < 0)
		return;
	struct addrguard *g = addrguard_new();
	FZ_CHECK(g != NULL, "addrguard_new");
	memset(err, 'X', sizeof(err));
	err[sizeof(err) - 1] = 0;
	int rc = addrguard_load_file(g, path, err, sizeof(err));
	FZ_CHECK(rc == 0 || rc == MOAT_EINVAL || rc == MOAT_ELIMIT, "load_file returned %d", rc);
	check_err(err, sizeof(err));
	static const uint8_t probe[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 169, 254, 1, 2};
	FZ_CHECK(addrguard_check(g, probe + 12, 4) == addrguard_check(g, probe, 16),
	         "IPv4 and IPv4-mapped disagree");
	addrguard_free(g);
	close(fd);
}

static void fuzz_config(const uint8_t *data, size_t size)
{
	struct config cfg;
	char err[512];
	config_init(&cfg);
	memset(err, 'X', sizeof(err));
	err[sizeof(err) - 1] = 0;
	int rc = config_load_string(&cfg, (const char *)data, size, "fuzz.yaml", err, sizeof(err));
	FZ_CHECK(rc == 0 || rc == MOAT_EINVAL || rc == MOAT_ENOMEM || rc == MOAT_EIO,
	         "config_load_string returned %d", rc);
	check_err(err, sizeof(err));
	if (rc == 0) {
		rc = config_validate(&cfg, err, sizeof(err));
		FZ_CHECK(rc == 0 || rc == MOAT_EINVAL, "config_validate returned %d", rc);
		for (size_t i = 0; i < cfg.nagents; i++)
			FZ_CHECK(memchr(cfg.agents[i].name, 0, CONFIG_NAME_MAX) != NULL,
			         "agent name not terminated");
	}
	config_free(&cfg);

	/* The address and range parsers, on the text up to the first NUL or newline. */
	char s[128];
	size_t n = 0;
	while (n < size && n < sizeof(s) - 1 && data[n] && data[n] != '\n') {
		s[n] = (char)data[n];
		n++;
	}
	s[n] = 0;
	struct sockaddr_storage ss;
	struct cidr c;
	rc = netaddr_parse_addrport(s, 53, &ss);
	FZ_CHECK(rc <= 0, "parse_addrport returned %d", rc);
	if (rc == 0)
		FZ_CHECK(ss.ss_family == AF_INET || ss.ss_family == AF_INET6, "family");
	rc = netaddr_parse_cidr(s, &c);
	FZ_CHECK(rc <= 0, "parse_cidr returned %d", rc);
	if (rc == 0)
		FZ_CHECK(c.bits <= 128, "prefix length %u", c.bits);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 65536)
		return 0;
	switch (data[0] & 3) {
	case 0:
		fuzz_patterns(data + 1, size - 1);
		break;
	case 1:
		fuzz_pattern_file(data + 1, size - 1);
		break;
	case 2:
		fuzz_range_file(data + 1, size - 1);
		break;
	case 3:
		fuzz_config(data + 1, size - 1);
		break;
	}
	return 0;
}
