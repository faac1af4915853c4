/* Unit tests for the compiled policy file (policy_file.c): a round trip keeps every decision,
 * rule and port list; damaged files (truncated, a flipped header or body byte, another version,
 * not a compiled file at all) are refused with a reason; the quick mode survives a garbage body
 * without reading outside the file; a rename replaces a file and is no change of the open one; a
 * file changed in place after open (filter, record, truncation, a copy over it) fails closed and
 * is counted; the loader hook chains compiled sets and refuses text lists when a policy key is
 * set. */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "moat/config.h"
#include "moat/err.h"
#include "moat/keyfile.h"
#include "moat/metrics.h"
#include "moat/name.h"
#include "moat/policy.h"
#include "moat/policy_file.h"
#include "moat/policy_sig.h"

static char dir[] = "/tmp/moat-test-pfile-XXXXXX";
static char err[1024];
#include "tmpfiles.h"
#include "policy/pfile.h"

static void setup(void)
{
	tmpdir_make();
}

static void teardown(void)
{
	tmpdir_remove();
}

TestSuite(pfile, .init = setup, .fini = teardown);

static const uint8_t *W(const char *text)
{
	static uint8_t bufs[4][NAME_MAXWIRE];
	static int next;
	uint8_t *b = bufs[next++ & 3];
	cr_assert_gt(name_from_text(text, strlen(text), b), 0);
	return b;
}

/* Compile text into name.mpol; returns its path. */
static const char *compile(const char *name, const char *text, bool highrisk)
{
	char src[512];
	snprintf(src, sizeof(src), "%s/%s.txt", dir, name);
	put(src, text);
	struct policy_set *s = policy_set_new();
	if (highrisk)
		policy_set_forbid_ports(s);
	cr_assert_eq(policy_set_load_file(s, src, err, sizeof(err)), 0, "%s", err);
	static char out[512];
	snprintf(out, sizeof(out), "%s/%s.mpol", dir, name);
	cr_assert_eq(policy_file_write(s, highrisk, out, err, sizeof(err)), 0, "%s", err);
	policy_set_free(s);
	return out;
}

static int open_mode(const char *path, enum policy_file_verify mode, struct policy_set **s)
{
	err[0] = 0;
	return policy_file_open(path, false, mode, NULL, s, err, sizeof(err));
}

static const char *LIST = "example.com\n"
                          "*.example.org tcp/443,80\n"
                          "a\\.b.example.net\n"
                          "# comment\n"
                          "ntp.example.net udp/123\n"
                          "*.deep.example.com\n";

Test(pfile, round_trip_keeps_decisions_rules_and_ports)
{
	const char *path = compile("rt", LIST, false);
	struct policy_set *s = NULL;
	cr_assert_eq(open_mode(path, POLICY_VERIFY_FULL, &s), 0, "%s", err);
	struct policy_rule r;
	cr_assert(policy_set_match(s, W("example.com"), &r));
	cr_assert_eq(r.line, 1);
	cr_assert_not(r.wildcard);
	cr_assert_null(r.ports);
	cr_assert(strstr(r.file, "rt.txt"), "rule names the source list: %s", r.file);
	cr_assert(policy_set_match(s, W("x.y.example.org"), &r));
	cr_assert(r.wildcard);
	cr_assert_eq(r.line, 2);
	cr_assert_not_null(r.ports);
	cr_assert_eq(r.ports->n, 2);
	cr_assert_eq(r.ports->p[0].port, 80);
	cr_assert(policy_set_match(s, W("a\\.b.example.net"), &r));
	cr_assert_not(policy_set_match(s, W("b.example.net"), NULL));
	cr_assert(policy_set_match(s, W("ntp.example.net"), &r));
	cr_assert_eq(r.ports->p[0].proto, POLICY_PROTO_UDP);
	cr_assert_not(policy_set_match(s, W("example.org"), NULL), "a wildcard is not its apex");
	cr_assert_not(policy_set_match(s, W("www.example.com"), NULL));
	cr_assert(policy_set_match(s, W("a.deep.example.com"), NULL));
	cr_assert(policy_set_match_below(s, W("deep.example.com.x"), NULL) == false);
	cr_assert_eq(policy_set_count(s), 5);
	struct policy_file_info in;
	cr_assert_eq(policy_file_info(s, &in), 0);
	cr_assert_eq(in.version, POLICY_FILE_VERSION);
	cr_assert_eq(in.names, 5);
	cr_assert_eq(in.nports, 2);
	/* read-only: adding to a mapped set is refused, not a write into the mapping */
	cr_assert_eq(policy_set_add(s, "new.example", 11, "x", 1), MOAT_EINVAL);
	policy_set_free(s);
	cr_assert_eq(open_mode(path, POLICY_VERIFY_QUICK, &s), 0, "%s", err);
	cr_assert(policy_set_match(s, W("example.com"), NULL));
	policy_set_free(s);
}

Test(pfile, many_names_round_trip)
{
	char src[512];
	snprintf(src, sizeof(src), "%s/big.txt", dir);
	FILE *f = fopen(src, "w");
	for (int i = 0; i < 50000; i++)
		fprintf(f, "n%d.bench.test\n", i);
	fclose(f);
	struct policy_set *t = policy_set_new();
	cr_assert_eq(policy_set_load_file(t, src, err, sizeof(err)), 0);
	cr_assert_eq(policy_file_write(t, false, P("big.mpol"), err, sizeof(err)), 0);
	struct policy_set *s = NULL;
	cr_assert_eq(open_mode(P("big.mpol"), POLICY_VERIFY_FULL, &s), 0, "%s", err);
	char name[64];
	for (int i = 0; i < 50000; i += 7) {
		snprintf(name, sizeof(name), "n%d.bench.test", i);
		cr_assert(policy_set_match(s, W(name), NULL), "%s", name);
		snprintf(name, sizeof(name), "d%d.bench.test", i);
		cr_assert_eq(policy_set_match(s, W(name), NULL),
		             policy_set_match(t, W(name), NULL));
	}
	policy_set_free(s);
	policy_set_free(t);
}

/* Where the data blocks start in a small file: the header page, then one page of block
 * hashes. */
#define DATA 8192

static void patch(const char *path, long off, const void *bytes, size_t n)
{
	int fd = open(path, O_WRONLY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, bytes, n, off), (ssize_t)n);
	close(fd);
}

static void flip(const char *path, long off)
{
	int fd = open(path, O_RDWR);
	uint8_t b;
	cr_assert_eq(pread(fd, &b, 1, off), 1);
	b ^= 0x40;
	cr_assert_eq(pwrite(fd, &b, 1, off), 1);
	close(fd);
}

static long file_size(const char *path)
{
	struct stat st;
	cr_assert_eq(stat(path, &st), 0);
	return (long)st.st_size;
}

Test(pfile, truncated_refused)
{
	const char *path = compile("tr", LIST, false);
	struct policy_set *s = NULL;
	cr_assert_eq(truncate(path, file_size(path) - 1), 0);
	cr_assert_eq(open_mode(path, POLICY_VERIFY_QUICK, &s), MOAT_EFORMAT);
	cr_assert(strstr(err, "truncated"), "%s", err);
	cr_assert_null(s);
	cr_assert_eq(truncate(path, 100), 0);
	cr_assert_eq(open_mode(path, POLICY_VERIFY_FULL, &s), MOAT_EFORMAT);
	cr_assert(strstr(err, "truncated"), "%s", err);
	cr_assert_eq(truncate(path, 0), 0);
	cr_assert_eq(open_mode(path, POLICY_VERIFY_FULL, &s), MOAT_EFORMAT);
}

Test(pfile, body_byte_flipped_refused_by_checksum)
{
	const char *path = compile("body", LIST, false);
	struct policy_set *s = NULL;
	flip(path, file_size(path) - 3); /* in the file names */
	cr_assert_eq(open_mode(path, POLICY_VERIFY_FULL, &s), MOAT_EFORMAT);
	cr_assert(strstr(err, "body checksum"), "%s", err);
	cr_assert_null(s);
	path = compile("body2", LIST, false);
	flip(path, DATA + 5); /* in the slots */
	cr_assert_eq(open_mode(path, POLICY_VERIFY_FULL, &s), MOAT_EFORMAT);
	cr_assert(strstr(err, "body checksum mismatch: block 0"), "%s", err);
}

Test(pfile, header_byte_flipped_refused)
{
	const char *path = compile("head", LIST, false);
	struct policy_set *s = NULL;
	flip(path, 40); /* in the counts */
	cr_assert_eq(open_mode(path, POLICY_VERIFY_QUICK, &s), MOAT_EFORMAT);
	cr_assert(strstr(err, "header checksum"), "%s", err);
}

/* The header's own checksum sits at byte 232 and covers bytes 0..231. */
static void reseal_header(const char *path)
{
	uint8_t h[232], sum[32];
	int fd = open(path, O_RDWR);
	cr_assert_eq(pread(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	crypto_generichash(sum, sizeof(sum), h, sizeof(h), NULL, 0);
	cr_assert_eq(pwrite(fd, sum, sizeof(sum), 232), (ssize_t)sizeof(sum));
	close(fd);
}

/* Versions 1 (no block table) and 2 (16-byte slots) are refused with what to do, not read. */
Test(pfile, other_version_refused)
{
	const char *path = compile("ver", LIST, false);
	struct policy_set *s = NULL;
	char want[64];
	for (uint32_t v = 1; v <= 2; v++) {
		patch(path, 8, &v, sizeof(v));
		reseal_header(path);
		cr_assert_eq(open_mode(path, POLICY_VERIFY_QUICK, &s), MOAT_EFORMAT);
		snprintf(want, sizeof(want), "version %u;", v);
		cr_assert(strstr(err, want), "%s", err);
		cr_assert(strstr(err, "reads version 3"), "%s", err);
		cr_assert(strstr(err, "recompile"), "%s", err);
	}
}

Test(pfile, section_outside_file_refused)
{
	const char *path = compile("sec", LIST, false);
	struct policy_set *s = NULL;
	uint64_t off = 1u << 30;
	patch(path, 120, &off, sizeof(off)); /* sec[SEC_ARENA].off */
	reseal_header(path);
	cr_assert_eq(open_mode(path, POLICY_VERIFY_QUICK, &s), MOAT_EFORMAT);
	cr_assert(strstr(err, "section"), "%s", err);
}

Test(pfile, text_file_is_not_compiled)
{
	put(P("plain.mpol"), "example.com\n");
	struct policy_set *s = NULL;
	cr_assert_eq(open_mode(P("plain.mpol"), POLICY_VERIFY_QUICK, &s), MOAT_EFORMAT);
	cr_assert(strstr(err, "not a compiled moat policy"), "%s", err);
	cr_assert_eq(open_mode(P("missing.mpol"), POLICY_VERIFY_QUICK, &s), MOAT_EIO);
	cr_assert(strstr(err, "cannot open"), "%s", err);
}

/* Quick mode trusts the body: garbage there gives wrong answers at worst, never a read outside
 * the mapping (run under ASan too). */
Test(pfile, quick_mode_survives_garbage_body)
{
	const char *path = compile("garbage", LIST, false);
	long size = file_size(path);
	uint8_t junk[4096];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 131 + 7) | 1; /* no empty slot, offsets everywhere */
	patch(path, DATA, junk, 1024);                /* the 64 slots */
	cr_assert_lt(DATA + 1024, size);
	struct policy_set *s = NULL;
	cr_assert_eq(open_mode(path, POLICY_VERIFY_FULL, &s), MOAT_EFORMAT);
	cr_assert_eq(open_mode(path, POLICY_VERIFY_QUICK, &s), 0, "%s", err);
	struct policy_rule r;
	const char *names[] = {"example.com", "a.b.c.d.e.f", "x.example.org", "ntp.example.net"};
	for (size_t i = 0; i < 4; i++)
		(void)policy_set_match(s, W(names[i]), &r);
	policy_set_free(s);
}

Test(pfile, rename_replaces_and_leaves_no_temp)
{
	const char *path = compile("swap", "one.example\n", false);
	struct policy_set *old = NULL, *s = NULL;
	cr_assert_eq(open_mode(path, POLICY_VERIFY_FULL, &old), 0);
	path = compile("swap", "two.example\n", false);
	cr_assert_eq(open_mode(path, POLICY_VERIFY_FULL, &s), 0);
	cr_assert(policy_set_match(s, W("two.example"), NULL));
	cr_assert_not(policy_set_match(s, W("one.example"), NULL));
	cr_assert(policy_set_match(old, W("one.example"), NULL), "the old mapping still answers");
	policy_set_free(old);
	policy_set_free(s);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "ls '%s' | grep -q tmp", dir);
	cr_assert_neq(system(cmd), 0, "a temporary file was left behind");
}

Test(pfile, highrisk_role)
{
	const char *path = compile("ports", LIST, false);
	struct policy_set *s = NULL;
	cr_assert_eq(policy_file_open(path, true, POLICY_VERIFY_FULL, NULL, &s, err, sizeof(err)),
	             MOAT_EFORMAT);
	cr_assert(strstr(err, "port rules"), "%s", err);
	path = compile("hr", "*.evil.example\nbad.example\n", true);
	cr_assert_eq(policy_file_open(path, true, POLICY_VERIFY_FULL, NULL, &s, err, sizeof(err)),
	             0, "%s", err);
	/* chained after a text set: both are searched */
	struct policy_set *head = policy_set_new();
	cr_assert_eq(policy_set_add(head, "text.example", 12, "t", 1), 0);
	policy_set_chain(head, s);
	cr_assert(policy_set_match(head, W("text.example"), NULL));
	cr_assert(policy_set_match(head, W("a.evil.example"), NULL));
	cr_assert(policy_set_match(head, W("bad.example"), NULL));
	cr_assert(policy_set_match_below(head, W("a.evil.example"), NULL));
	cr_assert_not(policy_set_match(head, W("good.example"), NULL));
	cr_assert_eq(policy_set_count(head), 3);
	policy_set_free(head);
}

Test(pfile, source_load_by_extension_and_pubkey_rule)
{
	struct config cfg;
	config_init(&cfg);
	const char *path = compile("src", LIST, false);
	char mpol[512];
	snprintf(mpol, sizeof(mpol), "%s", path);
	put(P("text.txt"), "text.example\n");
	struct policy_set *s = policy_set_new();
	cr_assert_eq(policy_source_load(&cfg, s, P("text.txt"), false, err, sizeof(err)), 0);
	cr_assert_eq(policy_source_load(&cfg, s, mpol, false, err, sizeof(err)), 0, "%s", err);
	cr_assert(policy_set_match(s, W("text.example"), NULL));
	cr_assert(policy_set_match(s, W("example.com"), NULL));
	policy_set_free(s);
	/* with a key, a text list is refused (the shipped high-risk list excepted) */
	cfg.has_policy_pubkey = true;
	s = policy_set_new();
	cr_assert_eq(policy_source_load(&cfg, s, P("text.txt"), false, err, sizeof(err)),
	             MOAT_EINVAL);
	cr_assert(strstr(err, "policy_pubkey is set"), "%s", err);
	cr_assert_eq(policy_source_load(&cfg, s, mpol, false, err, sizeof(err)), MOAT_EIO);
	cr_assert(strstr(err, "no signature"), "%s", err);
	cr_assert_eq(policy_source_load(&cfg, s, cfg.highrisk_files[0], true, err, sizeof(err)), 0,
	             "%s", err);
	policy_set_free(s);
	config_free(&cfg);
}

/* The default: blocks are hashed when a lookup first needs them. A round trip answers as the
 * full check does, and the blocks it used are verified on the way. */
Test(pfile, lazy_round_trip)
{
	const char *path = compile("lazy", LIST, false);
	struct policy_set *s = NULL;
	cr_assert_eq(open_mode(path, POLICY_VERIFY_LAZY, &s), 0, "%s", err);
	struct policy_rule r;
	cr_assert(policy_set_match(s, W("example.com"), &r));
	cr_assert_eq(r.line, 1);
	cr_assert(policy_set_match(s, W("x.y.example.org"), &r));
	cr_assert_eq(r.ports->n, 2);
	cr_assert_not(policy_set_match(s, W("www.example.com"), NULL));
	struct policy_file_info in;
	cr_assert_eq(policy_file_info(s, &in), 0);
	cr_assert_eq(in.version, POLICY_FILE_VERSION);
	cr_assert_geq(in.blocks, 3);
	cr_assert_eq(in.bad_blocks, 0);
	policy_set_free(s);
}

/* LAZY reads the filter, the port rules and the file names at open, each straight into its
 * place and hashed there with the rest of its blocks: a byte flipped at either end of each
 * section, or in a block it shares with its neighbour just outside it, is refused at open. */
Test(pfile, lazy_open_checks_the_blocks_of_what_it_keeps)
{
	const char *path = compile("edges", LIST, false);
	struct pfile_header h;
	int fd = open(path, O_RDONLY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pread(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	close(fd);
	const int secs[] = {SEC_FILTER, SEC_PORTS, SEC_FILES};
	long at[4 * 3];
	size_t n = 0;
	for (size_t i = 0; i < 3; i++) {
		uint64_t o = h.sec[secs[i]].off, l = h.sec[secs[i]].len;
		if (!l)
			continue;
		at[n++] = (long)o;           /* its first byte */
		at[n++] = (long)(o + l - 1); /* its last */
		if (o % PF_BLOCK && o - 1 >= h.data_off)
			at[n++] = (long)o - 1; /* its first block's byte before it */
		if ((o + l) % PF_BLOCK && o + l < h.file_len)
			at[n++] = (long)(o + l); /* its last block's byte after it */
	}
	cr_assert_geq(n, 6, "the filter and the file names at least");
	for (size_t i = 0; i < n; i++) {
		char name[32];
		snprintf(name, sizeof(name), "edge%zu", i);
		path = compile(name, LIST, false);
		struct policy_set *s = NULL;
		cr_assert_eq(open_mode(path, POLICY_VERIFY_LAZY, &s), 0, "%s", err);
		cr_assert(policy_set_match(s, W("example.com"), NULL));
		policy_set_free(s);
		s = NULL;
		flip(path, at[i]);
		cr_assert_eq(open_mode(path, POLICY_VERIFY_LAZY, &s), MOAT_EFORMAT,
		             "byte %ld flipped: opened", at[i]);
		cr_assert(strstr(err, "body checksum mismatch"), "%s", err);
		cr_assert_null(s);
	}
}

/* The filter's blocks that hold nothing else are hashed when a lookup first needs them (LAZY),
 * from moatd's private copy: a damaged one opens, then fails closed the lookups whose filter
 * block it holds (an allowlist's names not listed, and in a high-risk list every name asked
 * there listed), is counted, and the allowlist's other names answer as before. FULL refuses it at
 * open. */
Test(pfile, lazy_filter_block_checked_on_use)
{
	enum { N = 20000 };
	for (int hr = 0; hr < 2; hr++) {
		char src[512], out[512], name[64];
		snprintf(src, sizeof(src), "%s/filt%d.txt", dir, hr);
		FILE *f = fopen(src, "w");
		for (int i = 0; i < N; i++)
			fprintf(f, "n%d.bench.test\n", i);
		fclose(f);
		struct policy_set *t = policy_set_new();
		if (hr)
			policy_set_forbid_ports(t);
		cr_assert_eq(policy_set_load_file(t, src, err, sizeof(err)), 0, "%s", err);
		snprintf(out, sizeof(out), "%s/filt%d.mpol", dir, hr);
		cr_assert_eq(policy_file_write(t, hr, out, err, sizeof(err)), 0, "%s", err);
		policy_set_free(t);
		struct pfile_header h;
		int fd = open(out, O_RDONLY);
		cr_assert_geq(fd, 0);
		cr_assert_eq(pread(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
		close(fd);
		cr_assert_gt(h.sec[SEC_FILTER].len, 3 * PF_BLOCK, "a filter of several blocks");
		/* a block wholly inside the filter */
		long at = (long)(pf_align_up(h.sec[SEC_FILTER].off, PF_BLOCK) + PF_BLOCK + 100);
		cr_assert_lt(at + PF_BLOCK, (long)(h.sec[SEC_FILTER].off + h.sec[SEC_FILTER].len));
		flip(out, at);
		struct policy_set *s = NULL;
		cr_assert_eq(
		    policy_file_open(out, hr, POLICY_VERIFY_FULL, NULL, &s, err, sizeof(err)),
		    MOAT_EFORMAT, "FULL opened a damaged filter");
		s = NULL;
		uint64_t metric = policy_file_damaged_total();
		cr_assert_eq(
		    policy_file_open(out, hr, POLICY_VERIFY_LAZY, NULL, &s, err, sizeof(err)), 0,
		    "LAZY checks the filter's inner blocks on use: %s", err);
		int listed = 0, other = 0;
		for (int i = 0; i < N; i++) {
			snprintf(name, sizeof(name), "n%d.bench.test", i);
			listed += policy_set_match(s, W(name), NULL);
			snprintf(name, sizeof(name), "d%d.bench.test", i);
			other += policy_set_match(s, W(name), NULL);
		}
		struct policy_file_info in;
		cr_assert_eq(policy_file_info(s, &in), 0);
		cr_assert_eq(in.bad_blocks, policy_file_damaged_total() - metric,
		             "each failed check counted");
		cr_assert_geq(in.bad_blocks, 1);
		if (hr) {
			/* (all of them when the block decides a parent, bench.test, for its
			 * wildcard: a damaged block fails closed for what it holds) */
			cr_assert_eq(listed, N, "a high-risk list keeps every name listed");
			cr_assert_gt(other, 0, "and lists the names its damaged block decides");
		} else {
			cr_assert_lt(listed, N, "the damaged block's names are not listed");
			cr_assert_gt(listed, N * 3 / 4, "the others are: %d", listed);
			cr_assert_eq(other, 0);
		}
		policy_set_free(s);
	}
}

/* A damaged slot block opens (nothing at open uses it) but fails the lookups that need it
 * closed: an allowlist's names are not listed, a high-risk list's are listed. */
Test(pfile, lazy_damaged_block_fails_closed_on_use)
{
	const char *path = compile("dmg", LIST, false);
	flip(path, DATA + 5); /* the slots */
	struct policy_set *s = NULL;
	uint64_t metric = policy_file_damaged_total();
	cr_assert_eq(open_mode(path, POLICY_VERIFY_LAZY, &s), 0, "%s", err);
	cr_assert_not(policy_set_match(s, W("example.com"), NULL), "allowlist: not listed");
	cr_assert_not(policy_set_match(s, W("a.example.org"), NULL));
	struct policy_file_info in;
	cr_assert_eq(policy_file_info(s, &in), 0);
	cr_assert_geq(in.bad_blocks, 1, "the damaged block was counted");
	cr_assert_eq(policy_file_damaged_total(), metric + in.bad_blocks,
	             "and shown in moat_policy_damaged_blocks_total");
	policy_set_free(s);

	path = compile("dmghr", "bad.example\n", true);
	flip(path, DATA + 5);
	cr_assert_eq(policy_file_open(path, true, POLICY_VERIFY_LAZY, NULL, &s, err, sizeof(err)),
	             0, "%s", err);
	struct policy_rule r;
	cr_assert(policy_set_match(s, W("bad.example"), &r), "high-risk: listed");
	cr_assert(strstr(r.file, "damaged block"), "the rule says why: %s", r.file);
	policy_set_free(s);
}

/* The block table is checked whole at open, whatever the mode: a changed hash or a table
 * that does not fit the file is refused. */
Test(pfile, block_table_changed_or_resized_refused)
{
	const char *path = compile("tab", LIST, false);
	struct policy_set *s = NULL;
	flip(path, 4096 + 3);
	cr_assert_eq(open_mode(path, POLICY_VERIFY_QUICK, &s), MOAT_EFORMAT);
	cr_assert(strstr(err, "block table checksum mismatch"), "%s", err);
	cr_assert_eq(open_mode(path, POLICY_VERIFY_LAZY, &s), MOAT_EFORMAT);
	path = compile("tab2", LIST, false);
	uint64_t nblocks;
	int fd = open(path, O_RDONLY);
	cr_assert_eq(pread(fd, &nblocks, 8, 192), 8); /* after data_off */
	close(fd);
	nblocks--;
	patch(path, 192, &nblocks, 8);
	reseal_header(path);
	cr_assert_eq(open_mode(path, POLICY_VERIFY_LAZY, &s), MOAT_EFORMAT);
	cr_assert(strstr(err, "bad block table"), "%s", err);
	cr_assert_null(s);
}

/* FULL hashes every block at open: a damaged slot block is refused before any lookup. */
Test(pfile, full_refuses_any_damaged_block)
{
	const char *path = compile("full", LIST, false);
	flip(path, file_size(path) - 3);
	struct policy_set *s = NULL;
	cr_assert_eq(open_mode(path, POLICY_VERIFY_LAZY, &s), MOAT_EFORMAT,
	             "the file names' block is checked at open in every mode but quick");
	cr_assert(strstr(err, "body checksum mismatch"), "%s", err);
}

/* A key pair in dir (k, k.pub): the secret key into sk, the public one into pk. */
static void keys(uint8_t sk[64], uint8_t pk[32])
{
	cr_assert_eq(keyfile_keygen(P("k"), err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(keyfile_read(P("k"), sk, 64, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(keyfile_read(P("k.pub"), pk, 32, err, sizeof(err)), 0, "%s", err);
}

static unsigned bad_blocks(const struct policy_set *s)
{
	struct policy_file_info in;
	cr_assert_eq(policy_file_info(s, &in), 0);
	return (unsigned)in.bad_blocks;
}

/* The signature covers the header page; the blocks through the block table, each checked
 * before use: a changed block under a good signature opens (only the header page is checked
 * at start) and fails the lookups that need it closed, also in QUICK (run as LAZY with a key),
 * while FULL refuses it at open. */
Test(pfile, signature_covers_blocks)
{
	uint8_t sk[64], pk[32];
	keys(sk, pk);
	const char *path = compile("sig", LIST, false);
	cr_assert_eq(policy_sig_sign_file(path, sk, err, sizeof(err)), 0, "%s", err);
	struct policy_set *s = NULL;
	cr_assert_eq(policy_file_open(path, false, POLICY_VERIFY_LAZY, pk, &s, err, sizeof(err)), 0,
	             "%s", err);
	cr_assert(policy_set_match(s, W("example.com"), NULL));
	policy_set_free(s);
	flip(path, DATA + 5); /* a slot block, not the header page or the table */
	cr_assert_eq(policy_file_open(path, false, POLICY_VERIFY_QUICK, NULL, &s, err, sizeof(err)),
	             0, "%s", err);
	policy_set_match(s, W("example.com"), NULL);
	cr_assert_eq(bad_blocks(s), 0, "without a key QUICK trusts the body");
	policy_set_free(s);
	cr_assert_eq(policy_file_open(path, false, POLICY_VERIFY_QUICK, pk, &s, err, sizeof(err)),
	             0, "%s", err);
	cr_assert_eq(bad_blocks(s), 0, "the damaged block is not read at open");
	cr_assert_not(policy_set_match(s, W("example.com"), NULL), "fails closed: not listed");
	cr_assert_geq(bad_blocks(s), 1, "with a key QUICK checks the block before use");
	policy_set_free(s);
	cr_assert_eq(policy_file_open(path, false, POLICY_VERIFY_FULL, pk, &s, err, sizeof(err)),
	             MOAT_EFORMAT);
	cr_assert(strstr(err, "body checksum mismatch"), "%s", err);
}

/* path opens without a key in mode (its checksums agree) and is refused with one: only the
 * signature tells. */
static void only_signature_refuses(const char *path, enum policy_file_verify mode,
                                   const uint8_t *pk)
{
	struct policy_set *s = NULL;
	cr_assert_eq(open_mode(path, mode, &s), 0, "self-consistent: %s", err);
	policy_set_free(s);
	s = NULL;
	cr_assert_eq(policy_file_open(path, false, POLICY_VERIFY_LAZY, pk, &s, err, sizeof(err)),
	             MOAT_EINVAL);
	cr_assert(strstr(err, "bad signature"), "%s", err);
	cr_assert_null(s);
}

/* BLAKE2b-256 of len bytes of path at off, written at dst. */
static void rehash(const char *path, long off, size_t len, long dst)
{
	uint8_t buf[8192], sum[32];
	cr_assert_leq(len, sizeof(buf));
	int fd = open(path, O_RDWR);
	cr_assert_eq(pread(fd, buf, len, off), (ssize_t)len);
	crypto_generichash(sum, sizeof(sum), buf, len, NULL, 0);
	cr_assert_eq(pwrite(fd, sum, sizeof(sum), dst), (ssize_t)sizeof(sum));
	close(fd);
}

/* A forger who changes a block and makes every checksum agree (the block's hash in the table,
 * table_sum, head_sum) is stopped by the signature alone, and so is a changed header field. */
Test(pfile, consistent_forgery_refused_by_signature)
{
	uint8_t sk[64], pk[32];
	keys(sk, pk);
	const char *path = compile("forge", LIST, false);
	cr_assert_eq(policy_sig_sign_file(path, sk, err, sizeof(err)), 0, "%s", err);
	long data_len = file_size(path) - DATA;
	cr_assert_lt(data_len, 4 * 4096, "a small file: one table page");
	flip(path, DATA + 5);
	rehash(path, DATA, 4096, 4096); /* block 0's hash in the table */
	rehash(path, 4096, 4096, 200);  /* table_sum: the table page */
	reseal_header(path);
	only_signature_refuses(path, POLICY_VERIFY_FULL, pk);

	path = compile("field", LIST, false);
	cr_assert_eq(policy_sig_sign_file(path, sk, err, sizeof(err)), 0, "%s", err);
	flip(path, 72); /* the tag key */
	reseal_header(path);
	only_signature_refuses(path, POLICY_VERIFY_LAZY, pk);
}

static void count_each(void *ctx, const uint8_t *lname, const struct policy_rule *exact,
                       const struct policy_rule *wild)
{
	(void)lname;
	size_t *n = ctx;
	n[0] += exact != NULL;
	n[1] += wild != NULL;
}

/* Every name of a large file is found where its home slot put it (probe runs wrap at the end of
 * a table of any size), every other name is not, and a walk sees each name once. */
Test(pfile, every_name_found_lazily_and_walked)
{
	char src[512];
	snprintf(src, sizeof(src), "%s/all.txt", dir);
	FILE *f = fopen(src, "w");
	for (int i = 0; i < 30000; i++)
		fprintf(f, i % 3 ? "n%d.bench.test\n" : "*.n%d.bench.test\n", i);
	fclose(f);
	struct policy_set *t = policy_set_new();
	cr_assert_eq(policy_set_load_file(t, src, err, sizeof(err)), 0);
	cr_assert_eq(policy_file_write(t, false, P("all.mpol"), err, sizeof(err)), 0);
	policy_set_free(t);
	struct policy_set *s = NULL;
	cr_assert_eq(open_mode(P("all.mpol"), POLICY_VERIFY_LAZY, &s), 0, "%s", err);
	char name[64];
	struct policy_rule r;
	for (int i = 0; i < 30000; i++) {
		snprintf(name, sizeof(name), i % 3 ? "n%d.bench.test" : "x.n%d.bench.test", i);
		cr_assert(policy_set_match(s, W(name), &r), "%s", name);
		cr_assert_eq(r.line, (unsigned)i + 1, "%s: line %u", name, r.line);
		cr_assert_eq(r.wildcard, i % 3 == 0);
		snprintf(name, sizeof(name), "n%d.bench.tes", i);
		cr_assert_not(policy_set_match(s, W(name), NULL), "%s", name);
	}
	size_t n[2] = {0, 0};
	policy_set_each(s, count_each, n);
	cr_assert_eq(n[0], 20000);
	cr_assert_eq(n[1], 10000);
	struct policy_file_info in;
	cr_assert_eq(policy_file_info(s, &in), 0);
	cr_assert_eq(in.bad_blocks, 0);
	cr_assert_lt(in.file_len, 30000 * 40, "about 35 bytes a name: %llu",
	             (unsigned long long)in.file_len);
	policy_set_free(s);
}

/* A name listed both ways keeps both rules; a rule removed before compiling (an RPZ zone's
 * deletion) leaves nothing in the file. */
Test(pfile, both_rules_kept_removed_rule_gone)
{
	const char *text = "example.com\n*.example.com\ngone.example.net\nkept.example.net\n";
	char src[512];
	snprintf(src, sizeof(src), "%s/both.txt", dir);
	put(src, text);
	struct policy_set *t = policy_set_new();
	cr_assert_eq(policy_set_load_file(t, src, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(policy_set_remove_wire(t, W("gone.example.net"), false), 0);
	cr_assert_eq(policy_file_write(t, false, P("both.mpol"), err, sizeof(err)), 0, "%s", err);
	policy_set_free(t);
	struct policy_set *s = NULL;
	cr_assert_eq(open_mode(P("both.mpol"), POLICY_VERIFY_FULL, &s), 0, "%s", err);
	struct policy_rule r;
	cr_assert(policy_set_match(s, W("example.com"), &r));
	cr_assert_eq(r.line, 1);
	cr_assert_not(r.wildcard);
	cr_assert(policy_set_match(s, W("www.example.com"), &r));
	cr_assert_eq(r.line, 2);
	cr_assert(r.wildcard);
	cr_assert(policy_set_has_wire(s, W("example.com"), true));
	cr_assert(policy_set_has_wire(s, W("example.com"), false));
	cr_assert_not(policy_set_match(s, W("gone.example.net"), NULL));
	cr_assert(policy_set_match(s, W("kept.example.net"), NULL));
	struct policy_file_info in;
	cr_assert_eq(policy_file_info(s, &in), 0);
	cr_assert_eq(in.names, 2, "example.com and kept.example.net: %llu",
	             (unsigned long long)in.names);
	size_t n[2] = {0, 0};
	policy_set_each(s, count_each, n);
	cr_assert_eq(n[0], 2);
	cr_assert_eq(n[1], 1);
	policy_set_free(s);
}

/* A whole-file signature (moat-sig 1) of a compiled file is refused (the decision in
 * moat/policy_sig.h), with what to do; so is the same signature relabelled as a header one. */
Test(pfile, whole_file_signature_of_compiled_refused)
{
	uint8_t sk[64], pk[32];
	keys(sk, pk);
	const char *path = compile("v1", LIST, false);
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", path, P("v1.bin"));
	cr_assert_eq(system(cmd), 0);
	cr_assert_eq(policy_sig_sign_file(P("v1.bin"), sk, err, sizeof(err)), 0, "%s", err);
	snprintf(cmd, sizeof(cmd), "grep -q '^moat-sig 1 ' '%s' && cp '%s' '%s.sig'",
	         P("v1.bin.sig"), P("v1.bin.sig"), path);
	cr_assert_eq(system(cmd), 0, "the copy is signed whole");
	struct policy_set *s = NULL;
	cr_assert_eq(policy_file_open(path, false, POLICY_VERIFY_LAZY, pk, &s, err, sizeof(err)),
	             MOAT_EINVAL);
	cr_assert(strstr(err, "whole-file signature"), "%s", err);
	cr_assert(strstr(err, "moatctl sign"), "%s", err);
	/* the kind word is not signed, but the digests differ: relabelled, it does not verify */
	snprintf(cmd, sizeof(cmd),
	         "sed -i 's/^moat-sig 1 \\([0-9a-f]*\\) /moat-sig 2 \\1 head /' '%s.sig'", path);
	cr_assert_eq(system(cmd), 0);
	cr_assert_eq(policy_file_open(path, false, POLICY_VERIFY_LAZY, pk, &s, err, sizeof(err)),
	             MOAT_EINVAL);
	cr_assert(strstr(err, "bad signature"), "%s", err);
	cr_assert_null(s);
}

/* A walk (what policy lint and moatctl read) checks blocks too: the names of a damaged slot
 * block are skipped and counted, never read from unverified bytes. */
Test(pfile, walk_skips_damaged_block)
{
	char src[512];
	snprintf(src, sizeof(src), "%s/walk.txt", dir);
	FILE *f = fopen(src, "w");
	for (int i = 0; i < 3000; i++) /* ~3500 slots of 6 bytes: the table spans 6 blocks */
		fprintf(f, "n%d.bench.test\n", i);
	fclose(f);
	struct policy_set *t = policy_set_new();
	cr_assert_eq(policy_set_load_file(t, src, err, sizeof(err)), 0);
	cr_assert_eq(policy_file_write(t, false, P("walk.mpol"), err, sizeof(err)), 0);
	policy_set_free(t);
	flip(P("walk.mpol"), DATA + 3 * 4096 + 5); /* a block of the slot table */
	struct policy_set *s = NULL;
	cr_assert_eq(open_mode(P("walk.mpol"), POLICY_VERIFY_LAZY, &s), 0, "%s", err);
	size_t n[2] = {0, 0};
	policy_set_each(s, count_each, n);
	cr_assert_lt(n[0], 3000, "the damaged block's names are not walked: %zu", n[0]);
	cr_assert_gt(n[0], 1500, "the other blocks' names are: %zu", n[0]);
	struct policy_file_info in;
	cr_assert_eq(policy_file_info(s, &in), 0);
	cr_assert_geq(in.bad_blocks, 1);
	policy_set_free(s);
}

/* An hour older than now: a compiled file is older than moatd's open in practice, so a write
 * after the open changes its modification time even where timestamps are coarse. */
static void age(const char *path)
{
	struct timespec t[2] = {{.tv_sec = time(NULL) - 3600}, {.tv_sec = time(NULL) - 3600}};
	cr_assert_eq(utimensat(AT_FDCWD, path, t, 0), 0);
}

/* What `cp other path` does: the same inode, truncated, other bytes written into it. */
static void copy_over(const char *from, const char *path)
{
	char buf[4096];
	int in = open(from, O_RDONLY), out = open(path, O_WRONLY | O_TRUNC);
	cr_assert(in >= 0 && out >= 0);
	for (ssize_t n; (n = read(in, buf, sizeof(buf))) > 0;)
		cr_assert_eq(write(out, buf, (size_t)n), n);
	close(in);
	close(out);
}

/* One way of changing the file in place (the layout of a small list: slots in the first data
 * block, the filter in the second, the records in the third). */
static void change(const char *path, int how)
{
	static const uint8_t zero[64];
	uint8_t b = 0x55;
	switch (how) {
	case 0: /* the filter zeroed */
		patch(path, DATA + 4096, zero, sizeof(zero));
		break;
	case 1: /* a record changed */
		patch(path, DATA + 2 * 4096 + 5, &b, 1);
		break;
	case 2: /* truncated */
		cr_assert_eq(truncate(path, DATA + 100), 0);
		break;
	default: /* another valid file copied over it */
		copy_over(compile("other", "other.example\n", how == 4), path);
		break;
	}
}

/* Changed in place after it was opened, every way: the set is tainted (logged once, counted),
 * a high-risk name stays listed and an allowlist's name is no longer listed (fail closed), and
 * nothing reads through a mapping (a truncation raises no SIGBUS). */
Test(pfile, changed_in_place_fails_closed)
{
	for (int how = 0; how < 4; how++)
		for (int hr = 0; hr < 2; hr++) {
			char name[16];
			snprintf(name, sizeof(name), "chg%d%d", how, hr);
			const char *path =
			    compile(name, hr ? "bad.example\n*.worse.example\n" : LIST, hr);
			char keep[512];
			snprintf(keep, sizeof(keep), "%s", path);
			age(keep);
			struct policy_set *s = NULL;
			cr_assert_eq(policy_file_open(keep, hr, POLICY_VERIFY_LAZY, NULL, &s, err,
			                              sizeof(err)),
			             0, "%s", err);
			const uint8_t *n = W(hr ? "bad.example" : "example.com");
			cr_assert(policy_set_match(s, n, NULL), "listed before the change");
			uint64_t before = policy_file_tainted_total();
			change(keep, how + (how == 3 && hr));
			cr_assert_eq(policy_set_match(s, n, NULL), hr,
			             "way %d, %s: %s after the change", how,
			             hr ? "high-risk" : "allow", hr ? "listed" : "not listed");
			cr_assert_eq(
			    policy_set_match(s, W(hr ? "a.worse.example" : "a.example.org"), NULL),
			    hr);
			struct policy_file_info in;
			cr_assert_eq(policy_file_info(s, &in), 0);
			cr_assert(in.tainted, "way %d: tainted", how);
			cr_assert_eq(policy_file_tainted_total(), before + 1, "counted once");
			/* What the filter rules out was checked at open and still answers. */
			cr_assert_not(policy_set_match(s, W("unlisted.example"), NULL));
			policy_set_free(s);
		}
}

/* moatctl compile's replacement (a new inode renamed over the path) is no change of the open
 * file: the running set keeps answering, and an open of the path loads the new file. */
Test(pfile, rename_replacement_is_no_change)
{
	char keep[512];
	snprintf(keep, sizeof(keep), "%s", compile("ren", LIST, false));
	age(keep);
	struct policy_set *s = NULL, *t = NULL;
	cr_assert_eq(open_mode(keep, POLICY_VERIFY_LAZY, &s), 0, "%s", err);
	struct policy_set *n = policy_set_new();
	cr_assert_eq(policy_set_add(n, "new.example", 11, "new.txt", 1), 0);
	cr_assert_eq(policy_file_write(n, false, keep, err, sizeof(err)), 0, "%s", err);
	policy_set_free(n);
	cr_assert(policy_set_match(s, W("example.com"), NULL), "the open set still answers");
	cr_assert_not(policy_set_match(s, W("new.example"), NULL));
	struct policy_file_info in;
	cr_assert_eq(policy_file_info(s, &in), 0);
	cr_assert_not(in.tainted, "a rename over the path is no change of the open file");
	cr_assert_eq(open_mode(keep, POLICY_VERIFY_LAZY, &t), 0, "%s", err);
	cr_assert(policy_set_match(t, W("new.example"), NULL), "the replacement loads");
	policy_set_free(s);
	policy_set_free(t);
}
