/* Unit tests for the address guard: the trie (IPv4, IPv6, overlaps, host routes), every embedded
 * IPv4 form, the ranges file loader and the shipped zones/blocked-ranges.txt, and a randomized
 * comparison against a brute-force scan. */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moat/addrguard.h"
#include "moat/err.h"

static struct addrguard *g;

static void setup(void)
{
	g = addrguard_new();
	cr_assert_not_null(g);
}

static void teardown(void)
{
	addrguard_free(g);
	g = NULL;
}

/* Class of an address given as text (IPv4 or IPv6). */
static enum addr_class check_text(const struct addrguard *guard, const char *text)
{
	uint8_t a[16];
	if (inet_pton(AF_INET, text, a) == 1)
		return addrguard_check(guard, a, 4);
	cr_assert_eq(inet_pton(AF_INET6, text, a), 1, "bad test address %s", text);
	return addrguard_check(guard, a, 16);
}

#define EXPECT(guard, text, cls)                                                                   \
	cr_expect_eq(check_text(guard, text), cls, "%s: got %d, want %d", text,                    \
	             (int)check_text(guard, text), (int)(cls))

static void add(const char *cidr, enum addr_class cls)
{
	cr_assert_eq(addrguard_add(g, cidr, cls), 0, "add %s", cidr);
}

TestSuite(addrguard, .init = setup, .fini = teardown);

TestSuite(embedded, .init = setup, .fini = teardown);

Test(addrguard, empty_guard_allows_everything)
{
	EXPECT(g, "169.254.169.254", ADDR_OK);
	EXPECT(g, "::1", ADDR_OK);
	cr_expect_eq(addrguard_count(g), 0);
}

Test(addrguard, ipv4_prefixes)
{
	add("10.0.0.0/8", ADDR_PRIVATE);
	add("127.0.0.0/8", ADDR_ALWAYS);
	add("172.16.0.0/12", ADDR_PRIVATE);
	EXPECT(g, "10.0.0.0", ADDR_PRIVATE);
	EXPECT(g, "10.255.255.255", ADDR_PRIVATE);
	EXPECT(g, "11.0.0.0", ADDR_OK);
	EXPECT(g, "9.255.255.255", ADDR_OK);
	EXPECT(g, "127.0.0.1", ADDR_ALWAYS);
	EXPECT(g, "172.31.255.255", ADDR_PRIVATE);
	EXPECT(g, "172.32.0.0", ADDR_OK);
	EXPECT(g, "172.15.255.255", ADDR_OK);
	cr_expect_eq(addrguard_count(g), 3);
}

Test(addrguard, ipv6_prefixes)
{
	add("fe80::/10", ADDR_ALWAYS);
	add("fc00::/7", ADDR_PRIVATE);
	EXPECT(g, "fe80::1", ADDR_ALWAYS);
	EXPECT(g, "febf:ffff::1", ADDR_ALWAYS);
	EXPECT(g, "fec0::1", ADDR_OK);
	EXPECT(g, "fd00::1", ADDR_PRIVATE);
	EXPECT(g, "fc00::", ADDR_PRIVATE);
	EXPECT(g, "fe00::", ADDR_OK);
	EXPECT(g, "2001:db8::1", ADDR_OK);
}

Test(addrguard, ipv4_is_keyed_as_mapped)
{
	add("10.0.0.0/8", ADDR_PRIVATE);
	EXPECT(g, "::ffff:10.1.2.3", ADDR_PRIVATE);
	EXPECT(g, "::ffff:11.1.2.3", ADDR_OK);
	/* A range over the mapped block covers IPv4 given as 4 bytes too. */
	add("::ffff:192.0.2.0/120", ADDR_ALWAYS);
	EXPECT(g, "192.0.2.77", ADDR_ALWAYS);
}

/* IPv4 lookups start where the shared ::ffff:0:0/96 path ends: ranges on that path, added
 * before or after the IPv4 ones, still count. */
Test(addrguard, ipv4_sees_ranges_above_the_mapped_block)
{
	add("10.0.0.0/8", ADDR_PRIVATE);
	EXPECT(g, "8.8.8.8", ADDR_OK);
	add("::/3", ADDR_PRIVATE);
	EXPECT(g, "8.8.8.8", ADDR_PRIVATE);
	EXPECT(g, "10.1.1.1", ADDR_PRIVATE);
	add("::ffff:0:0/96", ADDR_ALWAYS);
	EXPECT(g, "8.8.8.8", ADDR_ALWAYS);
	EXPECT(g, "2001:db8::1", ADDR_OK);
}

Test(addrguard, ipv4_without_the_mapped_path)
{
	add("2001:db8::/32", ADDR_ALWAYS);
	EXPECT(g, "192.0.2.1", ADDR_OK);
	add("0.0.0.0/0", ADDR_PRIVATE);
	EXPECT(g, "192.0.2.1", ADDR_PRIVATE);
	EXPECT(g, "2001:db8::1", ADDR_ALWAYS);
}

Test(addrguard, most_severe_beats_longest_prefix)
{
	add("10.0.0.0/8", ADDR_ALWAYS);
	add("10.1.0.0/16", ADDR_PRIVATE);
	EXPECT(g, "10.1.2.3", ADDR_ALWAYS);
	EXPECT(g, "10.2.0.0", ADDR_ALWAYS);
}

Test(addrguard, longer_more_severe_prefix_wins_inside)
{
	add("10.0.0.0/8", ADDR_PRIVATE);
	add("10.1.2.0/24", ADDR_ALWAYS);
	EXPECT(g, "10.1.2.3", ADDR_ALWAYS);
	EXPECT(g, "10.1.3.3", ADDR_PRIVATE);
	EXPECT(g, "10.1.1.255", ADDR_PRIVATE);
}

Test(addrguard, same_range_twice_keeps_worst)
{
	add("192.168.0.0/16", ADDR_ALWAYS);
	add("192.168.0.0/16", ADDR_PRIVATE);
	EXPECT(g, "192.168.1.1", ADDR_ALWAYS);
	cr_expect_eq(addrguard_count(g), 2);
}

Test(addrguard, host_routes)
{
	add("100.100.100.200", ADDR_ALWAYS);
	add("fd00:ec2::254", ADDR_ALWAYS);
	add("100.64.0.0/10", ADDR_PRIVATE);
	add("fc00::/7", ADDR_PRIVATE);
	add("192.0.2.7/32", ADDR_ALWAYS);
	EXPECT(g, "100.100.100.200", ADDR_ALWAYS);
	EXPECT(g, "100.100.100.201", ADDR_PRIVATE);
	EXPECT(g, "100.100.100.199", ADDR_PRIVATE);
	EXPECT(g, "fd00:ec2::254", ADDR_ALWAYS);
	EXPECT(g, "fd00:ec2::255", ADDR_PRIVATE);
	EXPECT(g, "192.0.2.7", ADDR_ALWAYS);
	EXPECT(g, "192.0.2.6", ADDR_OK);
	EXPECT(g, "192.0.2.8", ADDR_OK);
}

Test(addrguard, default_routes)
{
	add("0.0.0.0/0", ADDR_PRIVATE);
	EXPECT(g, "8.8.8.8", ADDR_PRIVATE);
	EXPECT(g, "2606:4700::1111", ADDR_OK);
	add("::/0", ADDR_ALWAYS);
	EXPECT(g, "2606:4700::1111", ADDR_ALWAYS);
	EXPECT(g, "8.8.8.8", ADDR_ALWAYS);
}

Test(addrguard, rejects_bad_ranges)
{
	const char *bad[] = {
	    "",           "foo",         "10.0.0.0/",   "/8",          "10.0.0.0/33",
	    "::/129",     "10.0.0.0/-1", "10.0.0.0/+8", "10.0.0.0/ 8", "10.0.0.1/8",
	    "fe80::1/10", "1.2.3",       "010.0.0.0/8", "0x0a.0.0.0",  "10.0.0.0/8/8",
	    "10.0.0.0 ",  "::1 ",        "1.2.3.4/0x8", "[::1]",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(addrguard_add(g, bad[i], ADDR_ALWAYS), MOAT_EINVAL, "'%s'", bad[i]);
	cr_expect_eq(addrguard_add(g, "10.0.0.0/8", (enum addr_class)7), MOAT_EINVAL);
	cr_expect_eq(addrguard_count(g), 0);
	cr_expect_eq(addrguard_add(g, "10.0.0.0/08", ADDR_ALWAYS), 0);
	cr_expect_eq(addrguard_add(g, "0.0.0.0/0", ADDR_OK), 0);
}

Test(addrguard, bad_length_fails_closed)
{
	uint8_t a[16] = {0};
	cr_expect_eq(addrguard_check(g, a, 0), ADDR_ALWAYS);
	cr_expect_eq(addrguard_check(g, a, 5), ADDR_ALWAYS);
	cr_expect_eq(addrguard_check(g, a, 15), ADDR_ALWAYS);
}

Test(addrguard, format)
{
	char out[64];
	uint8_t v4[4] = {192, 0, 2, 1};
	uint8_t v6[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 1};
	cr_expect_str_eq(addrguard_format(v4, 4, out, sizeof(out)), "192.0.2.1");
	cr_expect_str_eq(addrguard_format(v6, 16, out, sizeof(out)), "2001:db8::1");
	cr_expect_str_eq(addrguard_format(v6, 3, out, sizeof(out)), "?");
}

/* A guard with a few IPv4 ranges (and no IPv6 ones) to see embedded forms decoded. */
static void embedded_ranges(void)
{
	add("0.0.0.0/8", ADDR_ALWAYS);
	add("169.254.0.0/16", ADDR_ALWAYS);
	add("10.0.0.0/8", ADDR_PRIVATE);
}

Test(embedded, ipv4_mapped)
{
	embedded_ranges();
	EXPECT(g, "::ffff:169.254.169.254", ADDR_ALWAYS);
	EXPECT(g, "::ffff:10.9.8.7", ADDR_PRIVATE);
	EXPECT(g, "::ffff:192.0.2.1", ADDR_OK);
}

Test(embedded, ipv4_compatible)
{
	embedded_ranges();
	EXPECT(g, "::169.254.169.254", ADDR_ALWAYS);
	EXPECT(g, "::10.0.0.1", ADDR_PRIVATE);
	EXPECT(g, "::192.0.2.1", ADDR_OK);
	EXPECT(g, "::0.0.0.2", ADDR_ALWAYS);
	/* "::" and "::1" are not 0.0.0.0 and 0.0.0.1: only their own ranges may block them. */
	EXPECT(g, "::", ADDR_OK);
	EXPECT(g, "::1", ADDR_OK);
	add("::1/128", ADDR_ALWAYS);
	EXPECT(g, "::1", ADDR_ALWAYS);
	/* A nonzero bit above the last 32 makes it no IPv4-compatible address. */
	EXPECT(g, "::1:a9fe:a9fe", ADDR_OK);
}

Test(embedded, nat64_well_known_prefix)
{
	embedded_ranges();
	EXPECT(g, "64:ff9b::169.254.169.254", ADDR_ALWAYS);
	EXPECT(g, "64:ff9b::a9fe:a9fe", ADDR_ALWAYS);
	EXPECT(g, "64:ff9b::10.0.0.1", ADDR_PRIVATE);
	EXPECT(g, "64:ff9b::192.0.2.1", ADDR_OK);
	/* Outside the /96 the last 32 bits are not an IPv4 address. */
	EXPECT(g, "64:ff9b:0:0:0:1:a9fe:a9fe", ADDR_OK);
}

/* 64:ff9b:1::/48 with the IPv4 address in bits 48..63 and 72..87 and u-octet u. */
static enum addr_class nat64_local(const uint8_t v4[4], uint8_t u)
{
	uint8_t a[16] = {0x00, 0x64, 0xff, 0x9b, 0x00, 0x01};
	a[6] = v4[0];
	a[7] = v4[1];
	a[8] = u;
	a[9] = v4[2];
	a[10] = v4[3];
	a[11] = 0x42; /* suffix bits: ignored */
	a[15] = 0x99;
	return addrguard_check(g, a, 16);
}

Test(embedded, nat64_local_use_prefix)
{
	embedded_ranges();
	const uint8_t meta[4] = {169, 254, 169, 254};
	const uint8_t priv[4] = {10, 1, 2, 3};
	const uint8_t good[4] = {192, 0, 2, 1};
	cr_expect_eq(nat64_local(meta, 0), ADDR_ALWAYS);
	cr_expect_eq(nat64_local(meta, 0xff), ADDR_ALWAYS);
	cr_expect_eq(nat64_local(priv, 0), ADDR_PRIVATE);
	cr_expect_eq(nat64_local(good, 0), ADDR_OK);
	cr_expect_eq(nat64_local(good, 0xa9), ADDR_OK); /* the u-octet is skipped */
	/* The same layout in text, to pin the bit positions: 169.254 | u | 169.254. */
	EXPECT(g, "64:ff9b:1:a9fe:a9:fe00::", ADDR_ALWAYS);
	EXPECT(g, "64:ff9b:1:c000:2:100::", ADDR_OK);
	/* A host route pins every embedded byte (the suffix byte 0x42 must not leak in). */
	add("198.51.100.7", ADDR_ALWAYS);
	const uint8_t host[4] = {198, 51, 100, 7};
	const uint8_t next[4] = {198, 51, 100, 8};
	const uint8_t swap[4] = {51, 198, 7, 100};
	cr_expect_eq(nat64_local(host, 0x33), ADDR_ALWAYS);
	cr_expect_eq(nat64_local(next, 0x07), ADDR_OK);
	cr_expect_eq(nat64_local(swap, 0x00), ADDR_OK);
	/* 64:ff9b:2::/48 is no NAT64 prefix. */
	EXPECT(g, "64:ff9b:2:a9fe:a9:fe00::", ADDR_OK);
}

Test(embedded, sixtofour)
{
	embedded_ranges();
	EXPECT(g, "2002:a9fe:a9fe::1", ADDR_ALWAYS);
	EXPECT(g, "2002:a00:1::", ADDR_PRIVATE);
	EXPECT(g, "2002:c000:201::1", ADDR_OK);
	EXPECT(g, "2003:a9fe:a9fe::1", ADDR_OK);
}

Test(embedded, teredo_obfuscated_client)
{
	embedded_ranges();
	/* Client 169.254.169.254 is stored inverted: 0x5601 0x5601. */
	EXPECT(g, "2001:0:4136:e378:8000:63bf:5601:5601", ADDR_ALWAYS);
	/* Client 10.0.0.1 -> f5ff:fffe. */
	EXPECT(g, "2001:0:4136:e378:8000:63bf:f5ff:fffe", ADDR_PRIVATE);
	/* Client 192.0.2.1 -> 3fff:fdfe. */
	EXPECT(g, "2001:0:4136:e378:8000:63bf:3fff:fdfe", ADDR_OK);
	/* Not inverted, the bits say 86.1.86.1: fine. */
	EXPECT(g, "2001:0:4136:e378:8000:63bf:a9fe:a9fe", ADDR_OK);
	/* 2001:1::/32 is not Teredo. */
	EXPECT(g, "2001:1:4136:e378:8000:63bf:5601:5601", ADDR_OK);
}

Test(embedded, ipv6_range_and_embedded_take_worst)
{
	embedded_ranges();
	add("2002::/16", ADDR_PRIVATE);
	EXPECT(g, "2002:c000:201::1", ADDR_PRIVATE);
	EXPECT(g, "2002:a9fe:a9fe::1", ADDR_ALWAYS);
}

static void shipped(struct addrguard *guard)
{
	char err[512] = "";
	int rc = addrguard_load_file(guard, MOAT_SOURCE_DIR "/zones/blocked-ranges.txt", err,
	                             sizeof(err));
	cr_assert_eq(rc, 0, "load: %s", err);
	cr_assert_gt(addrguard_count(guard), 20);
}

Test(addrguard, shipped_ranges)
{
	shipped(g);
	EXPECT(g, "169.254.169.254", ADDR_ALWAYS);
	EXPECT(g, "fd00:ec2::254", ADDR_ALWAYS);
	EXPECT(g, "fd20:ce::254", ADDR_ALWAYS);
	EXPECT(g, "169.254.170.2", ADDR_ALWAYS);
	EXPECT(g, "100.100.100.200", ADDR_ALWAYS);
	EXPECT(g, "168.63.129.16", ADDR_ALWAYS);
	EXPECT(g, "192.0.0.192", ADDR_ALWAYS);
	EXPECT(g, "127.0.0.1", ADDR_ALWAYS);
	EXPECT(g, "0.0.0.0", ADDR_ALWAYS);
	EXPECT(g, "224.0.0.251", ADDR_ALWAYS);
	EXPECT(g, "255.255.255.255", ADDR_ALWAYS);
	EXPECT(g, "::", ADDR_ALWAYS);
	EXPECT(g, "::1", ADDR_ALWAYS);
	EXPECT(g, "fe80::1", ADDR_ALWAYS);
	EXPECT(g, "fec0::1", ADDR_ALWAYS);
	EXPECT(g, "ff02::1", ADDR_ALWAYS);
	EXPECT(g, "10.1.2.3", ADDR_PRIVATE);
	EXPECT(g, "172.16.0.1", ADDR_PRIVATE);
	EXPECT(g, "192.168.1.1", ADDR_PRIVATE);
	EXPECT(g, "100.64.0.1", ADDR_PRIVATE);
	EXPECT(g, "192.0.0.8", ADDR_PRIVATE);
	EXPECT(g, "198.18.0.1", ADDR_PRIVATE);
	EXPECT(g, "fd00::1", ADDR_PRIVATE);
	EXPECT(g, "192.0.2.1", ADDR_OK);
	EXPECT(g, "198.51.100.1", ADDR_OK);
	EXPECT(g, "203.0.113.1", ADDR_OK);
	EXPECT(g, "2001:db8::1", ADDR_OK);
	EXPECT(g, "8.8.8.8", ADDR_OK);
	EXPECT(g, "2606:4700:4700::1111", ADDR_OK);
	/* Embedded forms reach the IPv4 ranges. */
	EXPECT(g, "::ffff:169.254.169.254", ADDR_ALWAYS);
	EXPECT(g, "64:ff9b::169.254.169.254", ADDR_ALWAYS);
	EXPECT(g, "64:ff9b::192.0.2.1", ADDR_OK);
	EXPECT(g, "2002:a9fe:a9fe::", ADDR_ALWAYS);
	EXPECT(g, "2001:0:4136:e378:8000:63bf:5601:5601", ADDR_ALWAYS);
	EXPECT(g, "2001:0:4136:e378:8000:63bf:3fff:fdfe", ADDR_OK);
}

/* Write text to a fresh temporary file; path receives its name. */
static void write_tmp(char path[64], const char *text)
{
	snprintf(path, 64, "/tmp/moat-ranges-XXXXXX");
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	size_t n = strlen(text);
	cr_assert_eq(write(fd, text, n), (ssize_t)n);
	close(fd);
}

static void expect_load_error(const char *text, int line, const char *reason)
{
	char path[64], err[512] = "", want[128];
	write_tmp(path, text);
	struct addrguard *guard = addrguard_new();
	int rc = addrguard_load_file(guard, path, err, sizeof(err));
	addrguard_free(guard);
	unlink(path);
	cr_expect_eq(rc, MOAT_EINVAL, "rc %d for %s", rc, text);
	snprintf(want, sizeof(want), "%s:%d: ", path, line);
	cr_expect_eq(strncmp(err, want, strlen(want)), 0, "err '%s' does not start with '%s'", err,
	             want);
	cr_expect_not_null(strstr(err, reason), "err '%s' lacks '%s'", err, reason);
}

Test(addrguard, load_file_errors)
{
	expect_load_error("# c\n\n10.0.0.0/8 private\n10.0.0.0/33 always\n", 4, "bad range");
	expect_load_error("10.0.0.0/8 privat # typo\n", 1, "unknown class");
	expect_load_error("\n\n10.0.0.0/8\n", 3, "missing class");
	expect_load_error("10.0.0.0/8 private always\n", 1, "unexpected");
	expect_load_error("127.0.0.1/8 always\n", 1, "bad range");
}

Test(addrguard, load_file_comments_and_blank_lines)
{
	char path[64], err[256] = "";
	write_tmp(path, "# header\n\n   \n10.0.0.0/8\tprivate\t# tab separated\r\n"
	                "::1 always#no space before comment\n  192.0.2.7  always  ");
	int rc = addrguard_load_file(g, path, err, sizeof(err));
	unlink(path);
	cr_assert_eq(rc, 0, "%s", err);
	cr_expect_eq(addrguard_count(g), 3);
	EXPECT(g, "10.2.3.4", ADDR_PRIVATE);
	EXPECT(g, "::1", ADDR_ALWAYS);
	EXPECT(g, "192.0.2.7", ADDR_ALWAYS);
}

Test(addrguard, load_file_missing)
{
	char err[256] = "";
	int rc = addrguard_load_file(g, "/nonexistent/moat/ranges.txt", err, sizeof(err));
	cr_expect_eq(rc, MOAT_EIO);
	cr_expect_eq(strncmp(err, "/nonexistent/moat/ranges.txt:", 29), 0, "%s", err);
}

Test(addrguard, load_file_long_line)
{
	char text[3000];
	memset(text, ' ', sizeof(text));
	memcpy(text, "10.0.0.0/8 private #", 20);
	text[sizeof(text) - 2] = '\n';
	text[sizeof(text) - 1] = '\0';
	expect_load_error(text, 1, "longer");
}

/* ---- randomized comparison with a brute-force scan ---- */

struct range {
	uint8_t key[16];
	unsigned bits;
	enum addr_class cls;
};

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
	/* xorshift64*: deterministic, so failures reproduce. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static void mask_key(uint8_t key[16], unsigned bits)
{
	for (unsigned i = bits; i < 128; i++)
		key[i / 8] &= (uint8_t) ~(0x80 >> (i % 8));
}

static bool key_in(const uint8_t key[16], const struct range *r)
{
	unsigned full = r->bits / 8, rest = r->bits % 8;
	if (memcmp(key, r->key, full) != 0)
		return false;
	if (!rest)
		return true;
	uint8_t m = (uint8_t)(0xff << (8 - rest));
	return (key[full] & m) == (r->key[full] & m);
}

static enum addr_class brute(const struct range *rs, size_t n, const uint8_t key[16])
{
	enum addr_class worst = ADDR_OK;
	for (size_t i = 0; i < n; i++)
		if (rs[i].cls > worst && key_in(key, &rs[i]))
			worst = rs[i].cls;
	return worst;
}

static bool is_mapped(const uint8_t a[16])
{
	static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	return memcmp(a, prefix, 12) == 0;
}

/* Addresses whose IPv6 form embeds IPv4 get extra checks the brute force does not model. */
static bool embeds_v4(const uint8_t a[16])
{
	return a[0] == 0 || (a[0] == 0x20 && (a[1] == 0x01 || a[1] == 0x02));
}

Test(addrguard, random_ranges_match_brute_force)
{
	enum { NRANGES = 5000, NCHECKS = 12000 };
	struct range *rs = calloc(NRANGES, sizeof(*rs));
	cr_assert_not_null(rs);

	for (size_t i = 0; i < NRANGES; i++) {
		struct range *r = &rs[i];
		char text[INET6_ADDRSTRLEN + 8], addr[INET6_ADDRSTRLEN];
		uint64_t x = rng(), y = rng();
		memcpy(r->key, &x, 8);
		memcpy(r->key + 8, &y, 8);
		r->cls = (rng() & 1) ? ADDR_ALWAYS : ADDR_PRIVATE;
		if (i % 2 == 0) {
			/* IPv4: mostly /8../32, a few very short ones. */
			unsigned b =
			    (i % 499 == 0) ? 4 + (unsigned)(rng() % 4) : 8 + (unsigned)(rng() % 25);
			memset(r->key, 0, 10);
			r->key[10] = r->key[11] = 0xff;
			r->bits = 96 + b;
			mask_key(r->key, r->bits);
			inet_ntop(AF_INET, r->key + 12, addr, sizeof(addr));
			snprintf(text, sizeof(text), "%s/%u", addr, b);
		} else {
			r->bits = 16 + (unsigned)(rng() % 113);
			if (embeds_v4(r->key))
				r->key[0] = 0x30;
			mask_key(r->key, r->bits);
			inet_ntop(AF_INET6, r->key, addr, sizeof(addr));
			snprintf(text, sizeof(text), "%s/%u", addr, r->bits);
		}
		cr_assert_eq(addrguard_add(g, text, r->cls), 0, "add %s", text);
	}
	cr_assert_eq(addrguard_count(g), NRANGES);

	size_t hits = 0;
	for (size_t i = 0; i < NCHECKS; i++) {
		uint8_t key[16];
		uint64_t x = rng(), y = rng();
		memcpy(key, &x, 8);
		memcpy(key + 8, &y, 8);
		/* Two in three checks land inside some range (then random host bits, so a longer
		 * range may or may not match too); the rest are random. */
		if (i % 3 != 2) {
			const struct range *r = &rs[rng() % NRANGES];
			for (unsigned b = 0; b < r->bits; b++) {
				unsigned m = 0x80 >> (b % 8);
				key[b / 8] = (uint8_t)((key[b / 8] & ~m) | (r->key[b / 8] & m));
			}
		} else if (i % 2) {
			memset(key, 0, 10);
			key[10] = key[11] = 0xff;
		}
		bool v4 = is_mapped(key);
		if (!v4 && embeds_v4(key))
			continue;
		enum addr_class want = brute(rs, NRANGES, key);
		enum addr_class got =
		    v4 ? addrguard_check(g, key + 12, 4) : addrguard_check(g, key, 16);
		char text[64];
		cr_assert_eq(got, want, "%s: trie %d, brute force %d",
		             addrguard_format(v4 ? key + 12 : key, v4 ? 4 : 16, text, sizeof(text)),
		             (int)got, (int)want);
		if (want != ADDR_OK)
			hits++;
	}
	cr_expect_gt(hits, NCHECKS / 3, "too few matching checks (%zu) to mean anything", hits);
	free(rs);
}

Test(addrguard, many_lookups_are_fast)
{
	shipped(g);
	/* 5000 more host routes and /24s so the trie is deep and wide. */
	for (unsigned i = 0; i < 5000; i++) {
		char text[64];
		snprintf(text, sizeof(text), "%u.%u.%u.0/24", 20 + i % 180, (i * 7) % 256, i % 256);
		cr_assert_eq(addrguard_add(g, text, ADDR_PRIVATE), 0, "%s", text);
	}
	unsigned blocked = 0;
	for (unsigned i = 0; i < 200000; i++) {
		uint8_t a[4] = {(uint8_t)(i >> 16), (uint8_t)(i >> 8), (uint8_t)i,
		                (uint8_t)(i * 13)};
		blocked += addrguard_check(g, a, 4) != ADDR_OK;
	}
	cr_expect_gt(blocked, 0);
}

/* The IPv4 addresses each IPv6 form delivers to, listed once (the embedded checks above and
 * moat-fw's resolver check use the list). */
Test(embedded, list)
{
	uint8_t a[16], v4[6][4];
	static const struct {
		const char *v6, *v4;
	} forms[] = {
	    {"::ffff:192.0.2.2", "192.0.2.2"},  {"::192.0.2.2", "192.0.2.2"},
	    {"64:ff9b::c000:202", "192.0.2.2"}, {"64:ff9b:1:c000:2:200::", "192.0.2.2"},
	    {"2002:c000:202::1", "192.0.2.2"},  {"2001:0:1:2:0:0:3fff:fdfd", "192.0.2.2"},
	};
	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		cr_assert_eq(inet_pton(AF_INET6, forms[i].v6, a), 1);
		cr_assert_eq(addrguard_embedded_v4(a, v4, 6), 1, "%s", forms[i].v6);
		char t[16];
		inet_ntop(AF_INET, v4[0], t, sizeof(t));
		cr_expect_str_eq(t, forms[i].v4, "%s", forms[i].v6);
	}
	cr_assert_eq(inet_pton(AF_INET6, "2001:db8::1", a), 1);
	cr_expect_eq(addrguard_embedded_v4(a, v4, 6), 0, "a plain IPv6 address embeds nothing");
	cr_assert_eq(inet_pton(AF_INET6, "::1", a), 1);
	cr_expect_eq(addrguard_embedded_v4(a, v4, 6), 0, "::1 is loopback, not 0.0.0.1");
}

/* Labelled host addresses: named, in every embedding form, and apart from the ranges. */
Test(addrguard, labelled_hosts)
{
	uint8_t a4[4] = {192, 0, 2, 2}, a6[16];
	cr_assert_eq(addrguard_add_host(g, a4, 4, "moatd's own listen address"), 0);
	cr_assert_eq(inet_pton(AF_INET6, "2001:db8::53", a6), 1);
	cr_assert_eq(addrguard_add_host(g, a6, 16, "moatd's own upstream"), 0);
	cr_expect_eq(addrguard_add_host(g, a4, 5, "x"), MOAT_EINVAL);
	cr_expect_str_eq(addrguard_label(g, a4, 4), "moatd's own listen address");
	cr_expect_str_eq(addrguard_label(g, a6, 16), "moatd's own upstream");
	const char *forms[] = {"::ffff:192.0.2.2", "64:ff9b::c000:202", "2002:c000:202::"};
	uint8_t f[16];
	for (size_t i = 0; i < 3; i++) {
		cr_assert_eq(inet_pton(AF_INET6, forms[i], f), 1);
		cr_expect_str_eq(addrguard_label(g, f, 16), "moatd's own listen address", "%s",
		                 forms[i]);
	}
	uint8_t other[4] = {192, 0, 2, 3};
	cr_expect_null(addrguard_label(g, other, 4));
	cr_expect_eq(addrguard_check(g, a4, 4), ADDR_OK, "a label is no range");
	cr_expect_eq(addrguard_count(g), 0);
}
