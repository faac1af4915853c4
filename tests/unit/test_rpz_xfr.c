/* Unit tests for the RPZ transfer client (rpz_xfr.c) against a scripted primary on loopback:
 * AXFR over several TSIG-signed messages, IXFR diffs applied to a copy, an up-to-date answer,
 * diffs that do not fit, a bad or missing TSIG, a refused key, a rejected record named by its
 * owner, a silent primary; and the NOTIFY check (rpz_notify.c): zone, source, TSIG, response. */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include "moat/err.h"
#include "moat/rpz_xfr.h"

#define KEY "k1."
#define SECRET "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTEyMzQ="
#define OTHER "b3RoZXItb3RoZXItb3RoZXItb3RoZXItb3RoZXItMTI="

/* What the scripted primary sends: messages of records (NULL-terminated lists), signed with
 * secret (NULL: unsigned), with rcode. */
struct script {
	const char *const *msgs[8];
	const char *secret;
	int rcode;
	bool silent;
	bool unkeyed; /* the client has no key */
	int fd;
	uint16_t qtype; /* what it was asked */
	bool req_signed;
};

static ldns_rr *RR(const char *text)
{
	ldns_rr *rr = NULL;
	cr_assert_eq(ldns_rr_new_frm_str(&rr, text, 60, NULL, NULL), LDNS_STATUS_OK, "%s", text);
	return rr;
}

/* The client may hang up after a bad message: no SIGPIPE, and errors ignored. */
static void send_pkt(int fd, ldns_pkt *p)
{
	uint8_t *w = NULL, l[2];
	size_t n = 0;
	cr_assert_eq(ldns_pkt2wire(&w, p, &n), LDNS_STATUS_OK);
	l[0] = (uint8_t)(n >> 8);
	l[1] = (uint8_t)n;
	if (send(fd, l, 2, MSG_NOSIGNAL) == 2)
		(void)!send(fd, w, n, MSG_NOSIGNAL);
	free(w);
}

static void *primary(void *arg)
{
	struct script *s = arg;
	int c = accept(s->fd, NULL, NULL);
	uint8_t l[2], buf[4096];
	if (c < 0 || read(c, l, 2) != 2)
		return NULL;
	size_t n = (size_t)(l[0] << 8 | l[1]), got = 0;
	while (got < n) {
		ssize_t r = read(c, buf + got, n - got);
		if (r <= 0)
			return NULL;
		got += (size_t)r;
	}
	ldns_pkt *q = NULL;
	ldns_wire2pkt(&q, buf, n);
	s->qtype = ldns_rr_get_type(ldns_rr_list_rr(ldns_pkt_question(q), 0));
	s->req_signed = ldns_pkt_tsig(q) && ldns_pkt_tsig_verify(q, buf, n, KEY, SECRET, NULL);
	ldns_rdf *mac = ldns_pkt_tsig(q) ? ldns_rdf_clone(ldns_rr_rdf(ldns_pkt_tsig(q), 3)) : NULL;
	for (int m = 0; !s->silent && s->msgs[m]; m++) {
		ldns_pkt *r = ldns_pkt_new();
		ldns_pkt_set_id(r, ldns_pkt_id(q));
		ldns_pkt_set_qr(r, true);
		ldns_pkt_set_rcode(r, (uint8_t)s->rcode);
		for (const char *const *t = s->msgs[m]; *t; t++)
			ldns_pkt_push_rr(r, LDNS_SECTION_ANSWER, RR(*t));
		if (s->secret) {
			ldns_pkt_tsig_sign_next(r, KEY, s->secret, 300, "hmac-sha256", mac, m > 0);
			ldns_rdf_deep_free(mac);
			mac = ldns_rdf_clone(ldns_rr_rdf(ldns_pkt_tsig(r), 3));
		}
		send_pkt(c, r);
		ldns_pkt_free(r);
	}
	if (s->silent)
		usleep(600000);
	ldns_rdf_deep_free(mac);
	ldns_pkt_free(q);
	close(c);
	return NULL;
}

static struct config_rpz zone_cfg(int port, bool signed_)
{
	struct config_rpz z = {0};
	snprintf(z.name, sizeof(z.name), "feed");
	name_from_text("rpz.test", 8, z.zone);
	struct sockaddr_in *sin = (struct sockaddr_in *)&z.primary;
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)port);
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (signed_) {
		snprintf(z.tsig_name, sizeof(z.tsig_name), KEY);
		snprintf(z.tsig_alg, sizeof(z.tsig_alg), "hmac-sha256");
		z.tsig_secret = (char *)SECRET;
	}
	return z;
}

/* Run one pull against script s. */
static int pull(struct script *s, const struct rpz_data *cur, struct rpz_xfr_result *res, char *err)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	s->fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_eq(bind(s->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(s->fd, 1), 0);
	getsockname(s->fd, (struct sockaddr *)&a, &al);
	pthread_t t;
	pthread_create(&t, NULL, primary, s);
	struct config_rpz z = zone_cfg(ntohs(a.sin_port), !s->unkeyed);
	/* generous for a loaded machine; the silent primary outlasts a short one */
	int rc = rpz_xfr_pull(&z, RPZ_HIGHRISK, cur, s->silent ? 200 : 5000, res, err, 512);
	pthread_join(t, NULL);
	close(s->fd);
	return rc;
}

#define SOA(n) "rpz.test. 60 IN SOA ns. h. " #n " 1 1 600 60"
static const char *const axfr1[] = {SOA(5), "rpz.test. NS ns.", "a.test.rpz.test. CNAME .", NULL};
static const char *const axfr2[] = {"*.b.test.rpz.test. CNAME *.", SOA(5), NULL};

static bool has(const struct rpz_data *d, const char *name)
{
	uint8_t w[NAME_MAXWIRE];
	name_from_text(name, strlen(name), w);
	return rpz_match(d, w, NULL, NULL);
}

Test(rpz_xfr, axfr_in_two_signed_messages)
{
	struct script s = {.msgs = {axfr1, axfr2}, .secret = SECRET};
	struct rpz_xfr_result r;
	char err[512] = "";
	cr_assert_eq(pull(&s, NULL, &r, err), 0, "%s", err);
	cr_expect_eq(s.qtype, LDNS_RR_TYPE_AXFR);
	cr_expect(s.req_signed, "the request carries a valid TSIG");
	cr_assert_not_null(r.data);
	cr_expect_not(r.ixfr);
	cr_expect_eq(r.serial, 5);
	cr_expect_eq(r.data->serial, 5);
	cr_expect(has(r.data, "a.test"));
	cr_expect(has(r.data, "x.b.test"));
	cr_expect_eq(rpz_count(r.data), 2);
	rpz_data_unref(r.data);
}

static struct rpz_data *zone_ab(void)
{
	uint8_t o[NAME_MAXWIRE];
	char err[512];
	name_from_text("rpz.test", 8, o);
	struct rpz_data *d = rpz_data_new(RPZ_HIGHRISK, o, "rpz:feed");
	const char *rrs[] = {"a.test.rpz.test. CNAME .", "b.test.rpz.test. CNAME ."};
	for (int i = 0; i < 2; i++) {
		ldns_rr *rr = RR(rrs[i]);
		cr_assert_eq(rpz_data_apply(d, rr, true, "rpz:feed", 0, err, sizeof(err)), 0);
		ldns_rr_free(rr);
	}
	d->serial = 1;
	d->loaded = true;
	return d;
}

Test(rpz_xfr, ixfr_two_diffs_patch_a_copy)
{
	static const char *const m[] = {SOA(3),
	                                SOA(1),
	                                "a.test.rpz.test. CNAME .",
	                                SOA(2),
	                                "c.test.rpz.test. CNAME .",
	                                SOA(2),
	                                "b.test.rpz.test. CNAME .",
	                                SOA(3),
	                                "d.test.rpz.test. CNAME *.",
	                                SOA(3),
	                                NULL};
	struct script s = {.msgs = {m}, .secret = SECRET};
	struct rpz_data *cur = zone_ab();
	struct rpz_xfr_result r;
	char err[512] = "";
	cr_assert_eq(pull(&s, cur, &r, err), 0, "%s", err);
	cr_expect_eq(s.qtype, LDNS_RR_TYPE_IXFR);
	cr_assert_not_null(r.data);
	cr_expect(r.ixfr);
	cr_expect_eq(r.changes, 4);
	cr_expect_eq(r.data->serial, 3);
	cr_expect(has(r.data, "c.test") && has(r.data, "d.test"));
	cr_expect_not(has(r.data, "a.test") || has(r.data, "b.test"));
	cr_expect(has(cur, "a.test") && !has(cur, "c.test"), "the running zone is untouched");
	rpz_data_unref(r.data);
	rpz_data_unref(cur);
}

Test(rpz_xfr, ixfr_up_to_date_and_answered_as_axfr)
{
	static const char *const same[] = {SOA(1), NULL};
	struct script s = {.msgs = {same}, .secret = SECRET};
	struct rpz_data *cur = zone_ab();
	struct rpz_xfr_result r;
	char err[512] = "";
	cr_assert_eq(pull(&s, cur, &r, err), 0, "%s", err);
	cr_expect_null(r.data, "up to date: nothing new");
	cr_expect_eq(r.serial, 1);
	struct script s2 = {.msgs = {axfr1, axfr2}, .secret = SECRET};
	cr_assert_eq(pull(&s2, cur, &r, err), 0, "%s", err);
	cr_assert_not_null(r.data);
	cr_expect_not(r.ixfr, "an IXFR answered in AXFR form replaces the zone");
	cr_expect_not(has(r.data, "b.test"));
	rpz_data_unref(r.data);
	rpz_data_unref(cur);
}

Test(rpz_xfr, ixfr_that_does_not_fit)
{
	static const char *const m[] = {SOA(2), SOA(1), "zz.test.rpz.test. CNAME .",
	                                SOA(2), SOA(2), NULL};
	struct script s = {.msgs = {m}, .secret = SECRET};
	struct rpz_data *cur = zone_ab();
	struct rpz_xfr_result r;
	char err[512] = "";
	cr_expect_eq(pull(&s, cur, &r, err), MOAT_ENOENT);
	cr_expect(
	    strstr(err, "rpz:feed: zz.test.rpz.test.: deleted, but the zone does not hold it"),
	    "%s", err);
	rpz_data_unref(cur);
}

Test(rpz_xfr, tsig_bad_missing_refused)
{
	static const char *const one[] = {SOA(5), SOA(5), NULL};
	struct rpz_xfr_result r;
	char err[512] = "";
	struct script bad = {.msgs = {axfr1, axfr2}, .secret = OTHER};
	cr_expect_eq(pull(&bad, NULL, &r, err), MOAT_EINVAL);
	cr_expect(strstr(err, "without a valid TSIG of key k1."), "%s", err);
	struct script bare = {.msgs = {one}};
	cr_expect_eq(pull(&bare, NULL, &r, err), MOAT_EINVAL, "an unsigned answer to a keyed zone");
	cr_expect(strstr(err, "without a valid TSIG of key k1."), "%s", err);
	struct script refused = {.msgs = {one}, .rcode = LDNS_RCODE_NOTAUTH};
	cr_expect_eq(pull(&refused, NULL, &r, err), MOAT_EIO);
	cr_expect(strstr(err, "primary answered NOTAUTH (TSIG key refused)"), "%s", err);
	struct script open_ = {.msgs = {one}, .unkeyed = true};
	cr_expect_eq(pull(&open_, NULL, &r, err), 0, "no key: no TSIG wanted (%s)", err);
	cr_expect_not(open_.req_signed);
	cr_expect_eq(rpz_count(r.data), 0);
	rpz_data_unref(r.data);
}

Test(rpz_xfr, rejected_record_and_silent_primary)
{
	static const char *const m[] = {SOA(5), "1.2.0.192.rpz-ip.rpz.test. CNAME .", SOA(5), NULL};
	struct script s = {.msgs = {m}, .secret = SECRET};
	struct rpz_xfr_result r;
	char err[512] = "";
	cr_expect_eq(pull(&s, NULL, &r, err), MOAT_EINVAL);
	cr_expect(strstr(err, "rpz:feed: 1.2.0.192.rpz-ip.rpz.test.: rpz-ip triggers are not "
	                      "supported"),
	          "%s", err);
	struct script quiet = {.msgs = {axfr1}, .secret = SECRET, .silent = true};
	cr_expect_eq(pull(&quiet, NULL, &r, err), MOAT_EIO);
	cr_expect(strstr(err, "primary: "), "%s", err);
}

/* ---- NOTIFY ---- */

/* A NOTIFY for zone signed with secret (NULL: unsigned) by key name under algorithm alg. */
static size_t notify_signed(const char *zone, const char *key, const char *secret, const char *alg,
                            uint8_t *out)
{
	ldns_rdf *zn = ldns_dname_new_frm_str(zone);
	ldns_pkt *p = ldns_pkt_query_new(zn, LDNS_RR_TYPE_SOA, LDNS_RR_CLASS_IN, LDNS_AA);
	ldns_pkt_set_opcode(p, LDNS_PACKET_NOTIFY);
	ldns_pkt_set_id(p, 4242);
	if (secret)
		cr_assert_eq(ldns_pkt_tsig_sign(p, key, secret, 300, alg, NULL), LDNS_STATUS_OK);
	uint8_t *w = NULL;
	size_t n = 0;
	ldns_pkt2wire(&w, p, &n);
	memcpy(out, w, n);
	free(w);
	ldns_pkt_free(p);
	return n;
}

static size_t notify_wire(const char *zone, const char *secret, uint8_t *out)
{
	return notify_signed(zone, KEY, secret, "hmac-sha256", out);
}

static void refused_at(const struct config *cfg, const uint8_t *pkt, size_t n,
                       const struct sockaddr_in *from, uint64_t now, const char *reason)
{
	uint8_t out[1024];
	char why[300] = "";
	size_t zi;
	struct rpz_notify_sig sig;
	cr_expect_lt(rpz_notify_check(cfg, pkt, n, (const struct sockaddr *)from, now, out,
	                              sizeof(out), &zi, &sig, why, sizeof(why)),
	             0, "accepted, want: %s", reason);
	cr_expect(strstr(why, reason), "want '%s' in '%s'", reason, why);
}

static void refused(const struct config *cfg, const uint8_t *pkt, size_t n,
                    const struct sockaddr_in *from, const char *reason)
{
	refused_at(cfg, pkt, n, from, (uint64_t)time(NULL), reason);
}

/* Where the zone's primary (zone_cfg: loopback) sends from. */
static struct sockaddr_in primary_addr(void)
{
	return (struct sockaddr_in){.sin_family = AF_INET,
	                            .sin_port = htons(40000),
	                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
}

Test(rpz_notify, only_from_the_primary_with_its_key)
{
	struct config_rpz z = zone_cfg(53, true);
	struct config cfg = {.rpz = &z, .nrpz = 1};
	struct sockaddr_in from = primary_addr();
	struct sockaddr_in other = from;
	other.sin_addr.s_addr = htonl(0x7f000002);
	uint8_t pkt[1024], out[1024];
	char why[200];
	size_t zi = 9;
	struct rpz_notify_sig sig;
	size_t n = notify_wire("rpz.test.", SECRET, pkt);
	int rn = rpz_notify_check(&cfg, pkt, n, (struct sockaddr *)&from, (uint64_t)time(NULL), out,
	                          sizeof(out), &zi, &sig, why, sizeof(why));
	cr_assert_gt(rn, 0, "%s", why);
	cr_expect_eq(zi, 0);
	ldns_pkt *r = NULL;
	cr_assert_eq(ldns_wire2pkt(&r, out, (size_t)rn), LDNS_STATUS_OK);
	cr_expect(ldns_pkt_qr(r));
	cr_expect_eq(ldns_pkt_get_opcode(r), LDNS_PACKET_NOTIFY);
	cr_expect_eq(ldns_pkt_id(r), 4242);
	cr_expect_not_null(ldns_pkt_tsig(r), "the response is signed");
	ldns_pkt_free(r);
	refused(&cfg, pkt, n, &other, "not from a configured primary");
	struct config_rpz z2 = zone_cfg(53, true);
	struct config_rpz two[2] = {z, z2};
	snprintf(two[1].name, sizeof(two[1].name), "second");
	name_from_text("other.test", 10, two[1].zone);
	((struct sockaddr_in *)&two[1].primary)->sin_addr.s_addr = htonl(0x7f000002);
	struct config cfg2 = {.rpz = two, .nrpz = 2};
	refused(&cfg2, pkt, n, &other, "NOTIFY for rpz feed not from its primary");
	n = notify_wire("rpz.test.", NULL, pkt);
	refused(&cfg, pkt, n, &from, "without a valid TSIG");
	n = notify_wire("rpz.test.", OTHER, pkt);
	refused(&cfg, pkt, n, &from, "without a valid TSIG");
	n = notify_wire("other.test.", SECRET, pkt);
	refused(&cfg, pkt, n, &from, "does not transfer");
	refused(&cfg, pkt, 5, &from, "malformed");
}

/* The TSIG's own fields are checked, not taken from the packet: the algorithm configured (a
 * NOTIFY signed hmac-md5 with the right secret is refused), the key name configured, and the
 * time signed within its fudge (300 s here) of now; an accepted one hands back its time and
 * MAC for the replay check. */
Test(rpz_notify, tsig_algorithm_key_and_time_pinned)
{
	struct config_rpz z = zone_cfg(53, true);
	struct config cfg = {.rpz = &z, .nrpz = 1};
	struct sockaddr_in from = primary_addr();
	uint8_t pkt[1024], out[1024];
	char why[300] = "";
	size_t zi;
	struct rpz_notify_sig sig;
	size_t n = notify_signed("rpz.test.", KEY, SECRET, "hmac-md5.sig-alg.reg.int", pkt);
	refused(&cfg, pkt, n, &from, "without a valid TSIG");
	n = notify_signed("rpz.test.", "other-key.", SECRET, "hmac-sha256", pkt);
	refused(&cfg, pkt, n, &from, "without a valid TSIG");
	n = notify_wire("rpz.test.", SECRET, pkt);
	uint64_t now = (uint64_t)time(NULL);
	refused_at(&cfg, pkt, n, &from, now + 400, "within its fudge of now");
	refused_at(&cfg, pkt, n, &from, now - 400, "within its fudge of now");
	int rn = rpz_notify_check(&cfg, pkt, n, (struct sockaddr *)&from, now + 200, out,
	                          sizeof(out), &zi, &sig, why, sizeof(why));
	cr_assert_gt(rn, 0, "inside the fudge: %s", why);
	cr_expect(sig.signed_at >= now - 1 && sig.signed_at <= now + 1, "signed at %llu",
	          (unsigned long long)sig.signed_at);
	cr_expect_eq(sig.mac_len, 2 + 32, "the MAC field: length, then HMAC-SHA256");
}
