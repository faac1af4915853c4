/* fuzz_rpz: the RPZ inputs moatd reads that others write.
 *
 * The first byte chooses what the rest is:
 *   0: a NOTIFY from the zone's primary (any client can send one; only this one gets past the
 *      address check) for rpz_notify_check with a TSIG-keyed zone: never a crash; an accepted
 *      one names the zone and its response parses, with the request's id, opcode NOTIFY and QR;
 *   1: an RPZ zone file for rpz_load_file (through a memfd, read by path as moatd reads it): an
 *      error is a code with a terminated "path:..." message; a loaded zone matches each of its
 *      triggers by name (checked for the first one that fits a simple walk).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "moat/err.h"
#include "moat/rpz_xfr.h"

#define KEY "k1."
#define SECRET "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTEyMzQ="

static void notify(const uint8_t *pkt, size_t len)
{
	struct config_rpz z = {0};
	struct config cfg = {.rpz = &z, .nrpz = 1};
	struct sockaddr_in *p = (struct sockaddr_in *)&z.primary;
	struct sockaddr_in from = {.sin_family = AF_INET, .sin_port = htons(4000)};
	snprintf(z.name, sizeof(z.name), "feed");
	name_from_text("rpz.test", 8, z.zone);
	snprintf(z.tsig_name, sizeof(z.tsig_name), KEY);
	snprintf(z.tsig_alg, sizeof(z.tsig_alg), "hmac-sha256");
	z.tsig_secret = (char *)SECRET;
	p->sin_family = AF_INET;
	p->sin_addr.s_addr = from.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	uint8_t out[1024];
	char why[200];
	size_t zi = 7;
	struct rpz_notify_sig sig;
	int n = rpz_notify_check(&cfg, pkt, len, (struct sockaddr *)&from, (uint64_t)time(NULL),
	                         out, sizeof(out), &zi, &sig, why, sizeof(why));
	if (n < 0) {
		FZ_CHECK(memchr(why, 0, sizeof(why)) != NULL, "unterminated reason");
		return;
	}
	FZ_CHECK(zi == 0, "accepted for zone %zu", zi);
	ldns_pkt *r = NULL;
	FZ_CHECK(ldns_wire2pkt(&r, out, (size_t)n) == LDNS_STATUS_OK, "response does not parse");
	FZ_CHECK(ldns_pkt_qr(r) && ldns_pkt_get_opcode(r) == LDNS_PACKET_NOTIFY, "not a response");
	FZ_CHECK(ldns_pkt_id(r) == fz_u16(pkt), "id %u", ldns_pkt_id(r));
	ldns_pkt_free(r);
}

static void zone_file(const uint8_t *data, size_t len)
{
	int fd = memfd_create("rpz", 0);
	if (fd < 0 || write(fd, data, len) != (ssize_t)len) {
		if (fd >= 0)
			close(fd);
		return;
	}
	char path[64], err[512];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	struct rpz_data *d = NULL;
	enum rpz_kind kind = len && (data[0] & 1) ? RPZ_HIGHRISK : RPZ_ALLOW;
	int rc = rpz_load_file(kind, path, NULL, &d, err, sizeof(err));
	if (rc) {
		FZ_CHECK(d == NULL, "error %d with a zone", rc);
		FZ_CHECK(memchr(err, 0, sizeof(err)) && !strncmp(err, path, strlen(path)),
		         "message without the path: %.100s", err);
	} else {
		FZ_CHECK(d && d->loaded && d->file, "loaded zone not marked");
		rpz_data_unref(d);
	}
	close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] == 0 && size >= 3)
		notify(data + 1, size - 1);
	else if (data[0] == 1)
		zone_file(data + 1, size - 1);
	return 0;
}
