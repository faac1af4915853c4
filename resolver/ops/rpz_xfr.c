/* rpz_xfr.c owns the zone transfer client of RPZ zones (moat/rpz_xfr.h): the TCP exchange with
 * the primary under one deadline, the TSIG of the request and of every message of the answer,
 * and reading the record stream (RFC 5936 AXFR, RFC 1995 IXFR: first SOA = the new serial; an
 * IXFR's diffs are old SOA, deletions, new SOA, additions; the new SOA again ends the stream). */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "moat/bytes.h"
#include "moat/err.h"
#include "moat/rpz_xfr.h"

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Wait for fd to be ready for events before the deadline. 0, or MOAT_EIO on timeout/error. */
static int wait_fd(int fd, short events, uint64_t deadline)
{
	for (;;) {
		uint64_t t = now_ms();
		if (t >= deadline)
			return errno = ETIMEDOUT, MOAT_EIO;
		struct pollfd p = {fd, events, 0};
		int n = poll(&p, 1, (int)(deadline - t));
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return MOAT_EIO;
	}
}

static int tcp_connect(const struct sockaddr_storage *to, uint64_t deadline)
{
	int fd = socket(to->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return MOAT_EIO;
	socklen_t sl =
	    to->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	int e = 0;
	socklen_t el = sizeof(e);
	if (connect(fd, (const struct sockaddr *)to, sl) < 0 &&
	    (errno != EINPROGRESS || wait_fd(fd, POLLOUT, deadline) < 0 ||
	     getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0 || (e && (errno = e)))) {
		close(fd);
		return MOAT_EIO;
	}
	return fd;
}

/* Move all n bytes (write: out, else in) before the deadline. */
static int io_full(int fd, uint8_t *buf, size_t n, bool out, uint64_t deadline)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = out ? send(fd, buf + done, n - done, MSG_NOSIGNAL)
		                : recv(fd, buf + done, n - done, 0);
		if (r > 0) {
			done += (size_t)r;
			continue;
		}
		if (r == 0)
			return errno = ECONNRESET, MOAT_EIO;
		if (errno != EAGAIN && errno != EINTR)
			return MOAT_EIO;
		if (wait_fd(fd, out ? POLLOUT : POLLIN, deadline) < 0)
			return MOAT_EIO;
	}
	return 0;
}

static ldns_rdf *zone_rdf(const struct config_rpz *z)
{
	return ldns_dname_new_frm_data((uint16_t)name_wire_len(z->zone, NAME_MAXWIRE), z->zone);
}

/* The request: AXFR, or IXFR with cur's serial in an SOA in the authority section. */
static ldns_pkt *build_request(const struct config_rpz *z, const struct rpz_data *cur)
{
	ldns_pkt *q;
	ldns_rdf *zn = zone_rdf(z);
	if (!zn)
		return NULL;
	if (cur && cur->loaded) {
		char soa[64];
		ldns_rr *rr = NULL;
		snprintf(soa, sizeof(soa), "@ 0 IN SOA . . %u 0 0 0 0", cur->serial);
		if (ldns_rr_new_frm_str(&rr, soa, 0, zn, NULL) != LDNS_STATUS_OK) {
			ldns_rdf_deep_free(zn);
			return NULL;
		}
		q = ldns_pkt_ixfr_request_new(ldns_rdf_clone(zn), LDNS_RR_CLASS_IN, 0, rr);
	} else {
		q = ldns_pkt_query_new(ldns_rdf_clone(zn), LDNS_RR_TYPE_AXFR, LDNS_RR_CLASS_IN, 0);
	}
	ldns_rdf_deep_free(zn);
	if (q)
		ldns_pkt_set_random_id(q);
	return q;
}

/* Where a transfer is in its record stream. */
struct xfr_stream {
	const struct config_rpz *z;
	enum rpz_kind kind;
	const struct rpz_data *cur;
	struct rpz_data *data;    /* owned while building */
	size_t n;                 /* records seen */
	uint32_t final, diff_new; /* the serial the stream ends on; the current diff's new one */
	enum { XS_START, XS_AXFR, XS_IXFR_DEL, XS_IXFR_ADD } state;
	bool done, ixfr;
	size_t changes;
	uint32_t refresh, retry;
};

static uint32_t soa_serial(const ldns_rr *rr)
{
	return ldns_rdf2native_int32(ldns_rr_rdf(rr, 2));
}

/* A SOA inside the stream: the end, or (IXFR) the boundary of a diff. */
static int stream_soa(struct xfr_stream *s, const ldns_rr *rr, char *err, size_t errlen)
{
	uint32_t ser = soa_serial(rr);
	switch (s->state) {
	case XS_AXFR:
		s->done = true;
		return ser == s->final
		           ? 0
		           : (snprintf(err, errlen, "AXFR ends on another serial"), MOAT_EFORMAT);
	case XS_IXFR_DEL:
		s->diff_new = ser;
		s->state = XS_IXFR_ADD;
		return 0;
	case XS_IXFR_ADD:
		if (s->diff_new == s->final) {
			s->done = true;
			return 0;
		}
		if (ser != s->diff_new)
			return snprintf(err, errlen, "IXFR diffs do not chain"), MOAT_EFORMAT;
		s->state = XS_IXFR_DEL;
		return 0;
	default:
		return MOAT_EFORMAT;
	}
}

/* The second record decides the form: an SOA with cur's serial starts an IXFR's diffs. */
static int stream_second(struct xfr_stream *s, const ldns_rr *rr)
{
	char label[CONFIG_NAME_MAX + 8];
	if (ldns_rr_get_type(rr) == LDNS_RR_TYPE_SOA && s->cur && s->cur->loaded &&
	    soa_serial(rr) == s->cur->serial && soa_serial(rr) != s->final) {
		s->ixfr = true;
		s->state = XS_IXFR_DEL;
		if (!(s->data = rpz_data_copy(s->cur)))
			return MOAT_ENOMEM;
		s->data->max_triggers = s->z->max_triggers; /* a reload may have changed it */
		return 1;
	}
	snprintf(label, sizeof(label), "rpz:%s", s->z->name);
	s->state = XS_AXFR;
	if (!(s->data = rpz_data_new(s->kind, s->z->zone, label)))
		return MOAT_ENOMEM;
	s->data->max_triggers = s->z->max_triggers;
	return 0;
}

static int stream_rr(struct xfr_stream *s, const ldns_rr *rr, char *err, size_t errlen)
{
	bool soa = ldns_rr_get_type(rr) == LDNS_RR_TYPE_SOA;
	int rc;
	if (s->done)
		return snprintf(err, errlen, "records after the end of the transfer"), MOAT_EFORMAT;
	if (s->n++ == 0) {
		if (!soa)
			return snprintf(err, errlen, "the answer does not start with the SOA"),
			       MOAT_EFORMAT;
		s->final = soa_serial(rr);
		s->refresh = ldns_rdf2native_int32(ldns_rr_rdf(rr, 3));
		s->retry = ldns_rdf2native_int32(ldns_rr_rdf(rr, 4));
		return 0;
	}
	if (s->state == XS_START && (rc = stream_second(s, rr)) != 0)
		return rc == 1 ? 0 : rc;
	if (soa)
		return stream_soa(s, rr, err, errlen);
	char where[CONFIG_NAME_MAX + 8];
	snprintf(where, sizeof(where), "rpz:%s", s->z->name);
	rc = rpz_data_apply(s->data, rr, s->state != XS_IXFR_DEL, where, 0, err, errlen);
	s->changes++;
	return rc;
}

/* The TSIG record's own fields against z: the key name and the algorithm configured (the
 * packet never chooses: ldns would compute whatever MAC it names, hmac-md5 included), and the
 * time signed within the record's fudge of now (RFC 8945 5.2.3; the MAC covers both). */
static bool tsig_fields_ok(const ldns_rr *t, const struct config_rpz *z, uint64_t now)
{
	if (ldns_rr_rd_count(t) < 3 || ldns_rdf_size(ldns_rr_rdf(t, 1)) != 6 ||
	    ldns_rdf_size(ldns_rr_rdf(t, 2)) != 2)
		return false;
	ldns_rdf *kn = ldns_dname_new_frm_str(z->tsig_name);
	ldns_rdf *al = ldns_dname_new_frm_str(z->tsig_alg);
	bool ok = kn && al && ldns_dname_compare(ldns_rr_owner(t), kn) == 0 &&
	          ldns_dname_compare(ldns_rr_rdf(t, 0), al) == 0;
	ldns_rdf_deep_free(kn);
	ldns_rdf_deep_free(al);
	const uint8_t *ts = ldns_rdf_data(ldns_rr_rdf(t, 1));
	uint64_t at = (uint64_t)be16_get(ts) << 32 | be32_get(ts + 2);
	uint64_t fudge = be16_get(ldns_rdf_data(ldns_rr_rdf(t, 2)));
	return ok && (at > now ? at - now : now - at) <= fudge;
}

bool rpz_tsig_verify_at(ldns_pkt *p, const uint8_t *wire, size_t len, const struct config_rpz *z,
                        const ldns_rdf *mac, bool timers_only, uint64_t now, uint64_t *signed_at)
{
	ldns_rr *t = ldns_pkt_tsig(p);
	if (!t || !tsig_fields_ok(t, z, now))
		return false;
	if (signed_at) {
		const uint8_t *ts = ldns_rdf_data(ldns_rr_rdf(t, 1));
		*signed_at = (uint64_t)be16_get(ts) << 32 | be32_get(ts + 2);
	}
	bool ok =
	    ldns_pkt_tsig_verify_next(p, wire, len, z->tsig_name, z->tsig_secret, mac, timers_only);
	if (!ok && !ldns_pkt_tsig(p))
		ldns_rr_free(t); /* detached by ldns and not put back */
	return ok;
}

bool rpz_tsig_verify(ldns_pkt *p, const uint8_t *wire, size_t len, const struct config_rpz *z,
                     const ldns_rdf *mac, bool timers_only)
{
	return rpz_tsig_verify_at(p, wire, len, z, mac, timers_only, (uint64_t)time(NULL), NULL);
}

/* Read and check one message of the answer (id, rcode, TSIG), feeding its records to s.
 * *mac is the MAC the next message's TSIG covers (the request's to begin with). */
static int read_message(int fd, struct xfr_stream *s, uint16_t id, ldns_rdf **mac, size_t *total,
                        uint64_t deadline, char *err, size_t errlen)
{
	uint8_t lenb[2];
	static _Thread_local uint8_t buf[65535];
	if (io_full(fd, lenb, 2, false, deadline) < 0 ||
	    io_full(fd, buf, be16_get(lenb), false, deadline) < 0)
		return snprintf(err, errlen, "primary: %m"), MOAT_EIO;
	size_t len = be16_get(lenb);
	if ((*total += len + 2) > RPZ_XFR_MAX_BYTES)
		return snprintf(err, errlen, "transfer larger than %zu bytes", RPZ_XFR_MAX_BYTES),
		       MOAT_ELIMIT;
	ldns_pkt *p = NULL;
	if (ldns_wire2pkt(&p, buf, len) != LDNS_STATUS_OK || ldns_pkt_id(p) != id) {
		ldns_pkt_free(p);
		return snprintf(err, errlen, "malformed answer or wrong id"), MOAT_EFORMAT;
	}
	int rc = 0;
	if (ldns_pkt_get_rcode(p) != LDNS_RCODE_NOERROR) {
		const ldns_lookup_table *rt = ldns_lookup_by_id(ldns_rcodes, ldns_pkt_get_rcode(p));
		snprintf(err, errlen, "primary answered %s%s", rt ? rt->name : "an error",
		         s->z->tsig_name[0] && ldns_pkt_get_rcode(p) == LDNS_RCODE_NOTAUTH
		             ? " (TSIG key refused)"
		             : "");
		rc = MOAT_EIO;
	} else if (s->z->tsig_name[0]) {
		if (!rpz_tsig_verify(p, buf, len, s->z, *mac,
		                     s->n > 0 /* after the first: timers only */)) {
			snprintf(err, errlen, "answer without a valid TSIG of key %s",
			         s->z->tsig_name);
			rc = MOAT_EINVAL;
		} else {
			ldns_rdf_deep_free(*mac);
			*mac = ldns_rdf_clone(ldns_rr_rdf(ldns_pkt_tsig(p), 3));
		}
	}
	ldns_rr_list *an = ldns_pkt_answer(p);
	size_t n = ldns_rr_list_rr_count(an);
	for (size_t i = 0; !rc && i < n; i++)
		rc = stream_rr(s, ldns_rr_list_rr(an, i), err, errlen);
	/* An IXFR answer of the SOA alone: the zone is up to date (or the primary has no diffs
	 * older than ours and said so in its way: the serial shows which). */
	if (!rc && s->n == 1 && n == 1 && s->cur && s->cur->loaded && s->final == s->cur->serial)
		s->done = true;
	ldns_pkt_free(p);
	return rc;
}

/* The request, signed, out; the messages in until the stream ends. */
static int exchange(int fd, ldns_pkt *q, struct xfr_stream *s, uint64_t deadline, char *err,
                    size_t errlen)
{
	const struct config_rpz *z = s->z;
	ldns_rdf *mac = NULL;
	uint8_t *wire = NULL;
	size_t wlen = 0, total = 0;
	int rc = 0;
	if (z->tsig_name[0]) {
		if (ldns_pkt_tsig_sign(q, z->tsig_name, z->tsig_secret, 300, z->tsig_alg, NULL) !=
		    LDNS_STATUS_OK)
			return snprintf(err, errlen, "cannot sign with key %s (algorithm %s)",
			                z->tsig_name, z->tsig_alg),
			       MOAT_EINVAL;
		mac = ldns_rdf_clone(ldns_rr_rdf(ldns_pkt_tsig(q), 3));
	}
	if (ldns_pkt2wire(&wire, q, &wlen) != LDNS_STATUS_OK || wlen > 65535) {
		ldns_rdf_deep_free(mac);
		free(wire);
		return MOAT_ENOMEM;
	}
	uint8_t *msg = malloc(wlen + 2);
	if (!msg)
		rc = MOAT_ENOMEM;
	else {
		be16_put(msg, (uint16_t)wlen);
		memcpy(msg + 2, wire, wlen);
		if (io_full(fd, msg, wlen + 2, true, deadline) < 0)
			rc = MOAT_EIO, snprintf(err, errlen, "primary: %m");
	}
	while (!rc && !s->done)
		rc = read_message(fd, s, ldns_pkt_id(q), &mac, &total, deadline, err, errlen);
	free(msg);
	free(wire);
	ldns_rdf_deep_free(mac);
	return rc;
}

int rpz_xfr_pull(const struct config_rpz *z, enum rpz_kind kind, const struct rpz_data *cur,
                 uint32_t timeout_ms, struct rpz_xfr_result *res, char *err, size_t errlen)
{
	uint64_t deadline = now_ms() + timeout_ms;
	struct xfr_stream s = {.z = z, .kind = kind, .cur = cur};
	memset(res, 0, sizeof(*res));
	ldns_pkt *q = build_request(z, cur);
	if (!q)
		return snprintf(err, errlen, "out of memory"), MOAT_ENOMEM;
	int fd = tcp_connect(&z->primary, deadline), rc;
	if (fd < 0) {
		snprintf(err, errlen, "cannot connect to the primary: %m");
		rc = MOAT_EIO;
	} else {
		rc = exchange(fd, q, &s, deadline, err, errlen);
		close(fd);
	}
	ldns_pkt_free(q);
	if (!rc && s.data) {
		s.data->serial = s.final;
		s.data->loaded = true;
	}
	if (rc) {
		rpz_data_unref(s.data);
		return rc;
	}
	*res = (struct rpz_xfr_result){s.data, s.ixfr, s.final, s.refresh, s.retry, s.changes};
	return 0;
}
