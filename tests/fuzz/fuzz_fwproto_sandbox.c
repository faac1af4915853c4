/* fuzz_fwproto_sandbox: the firewall channel's runtime-sandbox messages (fwproto_sandbox.c).
 * moat-fw reads SANDBOX_ADD/DEL from a peer it must not trust blindly and moat run reads
 * SANDBOX_REPLY from moat-fw, so both decoders run on arbitrary bytes:
 *   - a decoded message re-encodes to exactly the input bytes (one encoding per message);
 *   - a rejected message leaves the caller's struct untouched;
 *   - a decoded request is ADD or DEL, of family 4 or 6 with no bit set past its prefix and a
 *     terminated interface name of 1..15 bytes; fwproto_is_sandbox agrees with the decoder;
 *   - a decoded reply has a known status, at most FWPROTO_SBX_MAXRES resolvers on ports other
 *     than 0 and printable text. */
#include <string.h>

#include "fuzz_common.h"
#include "moat/err.h"
#include "moat/fwproto.h"
#include "moat/fwproto_sandbox.h"

static void check_request(const uint8_t *data, size_t size)
{
	static struct fwproto_sandbox s, before;
	static uint8_t out[FWPROTO_SBX_MAXREQ + 8];
	memset(&s, 0xA5, sizeof(s));
	memcpy(&before, &s, sizeof(s));
	int rc = fwproto_sandbox_decode(data, size, &s);
	FZ_CHECK(rc == 0 || rc == MOAT_EFORMAT, "sandbox_decode returned %d", rc);
	if (rc != 0) {
		FZ_CHECK(memcmp(&s, &before, sizeof(s)) == 0,
		         "rejected request changed the struct");
		return;
	}
	FZ_CHECK(fwproto_is_sandbox(data, size), "decoded but not a sandbox message");
	FZ_CHECK(s.type == FWPROTO_SANDBOX_ADD || s.type == FWPROTO_SANDBOX_DEL, "type %u", s.type);
	FZ_CHECK((s.family == 4 && s.bits <= 32) || (s.family == 6 && s.bits <= 128),
	         "family %u bits %u", s.family, s.bits);
	for (unsigned i = s.bits; i < 128; i++)
		FZ_CHECK(!(s.addr[i / 8] & (0x80u >> (i % 8))), "bit %u set past /%u", i, s.bits);
	size_t n = strnlen(s.ifname, sizeof(s.ifname));
	FZ_CHECK(n >= 1 && n < sizeof(s.ifname), "ifname length %zu", n);
	int m = fwproto_sandbox_encode(&s, out, sizeof(out));
	FZ_CHECK(m > 0 && (size_t)m == size && memcmp(out, data, size) == 0,
	         "decoded request does not re-encode to the same bytes (%d vs %zu)", m, size);
	FZ_CHECK(fwproto_sandbox_encode(&s, out, size - 1) == MOAT_ESPACE, "short buffer");
}

static void check_reply(const uint8_t *data, size_t size)
{
	static struct fwproto_sandbox_reply r, before;
	static uint8_t out[FWPROTO_SBX_MAXREPLY + 8];
	memset(&r, 0x5A, sizeof(r));
	memcpy(&before, &r, sizeof(r));
	int rc = fwproto_sandbox_reply_decode(data, size, &r);
	FZ_CHECK(rc == 0 || rc == MOAT_EFORMAT, "reply_decode returned %d", rc);
	if (rc != 0) {
		FZ_CHECK(memcmp(&r, &before, sizeof(r)) == 0, "rejected reply changed the struct");
		return;
	}
	FZ_CHECK(strcmp(fwproto_status_str(r.status), "UNKNOWN") != 0, "status %u", r.status);
	FZ_CHECK(r.nres <= FWPROTO_SBX_MAXRES, "nres %u", r.nres);
	for (unsigned i = 0; i < r.nres; i++)
		FZ_CHECK((r.res[i].family == 4 || r.res[i].family == 6) && r.res[i].port,
		         "resolver %u", i);
	for (const char *p = r.text; *p; p++)
		FZ_CHECK(*p >= 0x20 && *p <= 0x7e, "text byte %u", (unsigned char)*p);
	int m = fwproto_sandbox_reply_encode(&r, out, sizeof(out));
	FZ_CHECK(m > 0 && (size_t)m == size && memcmp(out, data, size) == 0,
	         "decoded reply does not re-encode to the same bytes (%d vs %zu)", m, size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_request(data, size);
	check_reply(data, size);
	return 0;
}
