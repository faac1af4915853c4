/* fuzz_ctlproto: moatd's control-socket request parser (ctlproto.c), which reads whatever a
 * client of the socket writes. Properties: ctlproto_parse never reads past len and either
 * refuses with MOAT_EINVAL and a message, or accepts a request whose name (when it has one) is a
 * valid lower-cased wire name; an accepted request formats to one line that parses back to the
 * same request (command, name, client, type). */
#include <string.h>

#include "fuzz_common.h"
#include "moat/ctlproto.h"
#include "moat/err.h"
#include "moat/name.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctl_request a, b;
	char err[256], line[CTLPROTO_MAXLINE + 2];
	const char *text = (const char *)data;
	int rc = ctlproto_parse(text, size, &a, err, sizeof(err));
	FZ_CHECK(rc == 0 || rc == MOAT_EINVAL, "rc %d", rc);
	if (rc < 0) {
		FZ_CHECK(err[0] != 0 && strlen(err) < sizeof(err), "no message");
		return 0;
	}
	if (a.has_name) {
		int w = name_wire_len(a.lname, NAME_MAXWIRE);
		FZ_CHECK(w > 0, "invalid name");
		uint8_t lo[NAME_MAXWIRE];
		memcpy(lo, a.lname, (size_t)w);
		name_lower(lo);
		FZ_CHECK(memcmp(lo, a.lname, (size_t)w) == 0, "name not lower-cased");
	}
	int n = ctlproto_format(&a, line, sizeof(line));
	if (n == MOAT_ESPACE)
		return 0; /* a name of escapes can outgrow one line; the daemon never formats */
	FZ_CHECK(n > 0 && line[n - 1] == '\n' && memchr(line, '\n', (size_t)n - 1) == NULL,
	         "format %d", n);
	rc = ctlproto_parse(line, (size_t)n, &b, err, sizeof(err));
	FZ_CHECK(rc == 0, "formatted line refused: %s (%s)", line, err);
	FZ_CHECK(a.cmd == b.cmd && a.qtype == b.qtype && a.has_name == b.has_name &&
	             a.has_client == b.has_client,
	         "round trip of %s", line);
	if (a.has_name)
		FZ_CHECK(name_equal(a.lname, b.lname), "name round trip of %s", line);
	if (a.has_client)
		FZ_CHECK(!memcmp(&a.client, &b.client, sizeof(a.client)), "client round trip %s",
		         line);
	return 0;
}
