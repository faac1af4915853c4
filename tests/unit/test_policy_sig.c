/* Unit tests for signed policy files (policy_sig.c): a good signature verifies; another key,
 * a file changed after signing, a missing or malformed .sig are refused with their reason; key
 * files are checked; a compiled file opened with a key needs a good signature; a compiled file
 * is signed over its header page, and each kind is refused where the other is needed. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "moat/config.h"
#include "moat/config_load.h"
#include "moat/err.h"
#include "moat/keyfile.h"
#include "moat/policy.h"
#include "moat/policy_file.h"
#include "moat/policy_lint.h"
#include "moat/policy_sig.h"
#include "moat/rpz.h"

static char dir[] = "/tmp/moat-test-psig-XXXXXX";
static char err[1024];
#include "tmpfiles.h"
static uint8_t pk[32], sk[64], pk2[32];

static void setup(void)
{
	tmpdir_make();
	cr_assert_eq(keyfile_keygen(P("k"), err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(keyfile_keygen(P("other"), err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(keyfile_read(P("k"), sk, 64, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(keyfile_read(P("k.pub"), pk, 32, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(keyfile_read(P("other.pub"), pk2, 32, err, sizeof(err)), 0);
	put(P("f"), "example.com\n*.example.org\n");
}

static void teardown(void)
{
	tmpdir_remove();
}

TestSuite(psig, .init = setup, .fini = teardown);

Test(psig, good_signature_verifies)
{
	cr_assert_eq(policy_sig_sign_file(P("f"), sk, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(policy_sig_verify_file(P("f"), pk, err, sizeof(err)), 0, "%s", err);
}

Test(psig, secret_key_is_private)
{
	struct stat st;
	cr_assert_eq(stat(P("k"), &st), 0);
	cr_assert_eq(st.st_mode & 077, 0, "secret key readable by others: %o", st.st_mode);
}

Test(psig, wrong_key_refused)
{
	cr_assert_eq(policy_sig_sign_file(P("f"), sk, err, sizeof(err)), 0);
	cr_assert_eq(policy_sig_verify_file(P("f"), pk2, err, sizeof(err)), MOAT_EINVAL);
	cr_assert(strstr(err, "signed with key"), "%s", err);
}

Test(psig, tampered_file_refused)
{
	cr_assert_eq(policy_sig_sign_file(P("f"), sk, err, sizeof(err)), 0);
	put(P("f"), "example.com\n*.example.org\n*.evil.example\n");
	cr_assert_eq(policy_sig_verify_file(P("f"), pk, err, sizeof(err)), MOAT_EINVAL);
	cr_assert(strstr(err, "bad signature"), "%s", err);
}

Test(psig, tampered_signature_refused)
{
	cr_assert_eq(policy_sig_sign_file(P("f"), sk, err, sizeof(err)), 0);
	FILE *f = fopen(P("f.sig"), "r+");
	char line[256];
	cr_assert_not_null(fgets(line, sizeof(line), f));
	line[40] = line[40] == '0' ? '1' : '0'; /* inside the signature */
	rewind(f);
	fputs(line, f);
	fclose(f);
	cr_assert_eq(policy_sig_verify_file(P("f"), pk, err, sizeof(err)), MOAT_EINVAL);
	cr_assert(strstr(err, "bad signature"), "%s", err);
}

Test(psig, missing_or_malformed_signature_refused)
{
	cr_assert_eq(policy_sig_verify_file(P("f"), pk, err, sizeof(err)), MOAT_EIO);
	cr_assert(strstr(err, "no signature"), "%s", err);
	put(P("f.sig"), "moat-sig 1 00 nothex\n");
	cr_assert_eq(policy_sig_verify_file(P("f"), pk, err, sizeof(err)), MOAT_EFORMAT);
	cr_assert(strstr(err, "malformed"), "%s", err);
	put(P("f.sig"), "");
	cr_assert_eq(policy_sig_verify_file(P("f"), pk, err, sizeof(err)), MOAT_EFORMAT);
}

Test(psig, key_files_checked)
{
	uint8_t k[64];
	cr_assert_eq(keyfile_read(P("k"), k, 32, err, sizeof(err)), MOAT_EFORMAT,
	             "a secret key is not a public key");
	cr_assert_eq(keyfile_read(P("f"), k, 32, err, sizeof(err)), MOAT_EFORMAT);
	cr_assert(strstr(err, "not a moat public key"), "%s", err);
	cr_assert_eq(keyfile_read(P("none"), k, 32, err, sizeof(err)), MOAT_EIO);
}

Test(psig, compiled_file_with_key)
{
	struct policy_set *s = policy_set_new(), *m = NULL;
	cr_assert_eq(policy_set_load_file(s, P("f"), err, sizeof(err)), 0);
	cr_assert_eq(policy_file_write(s, false, P("f.mpol"), err, sizeof(err)), 0, "%s", err);
	policy_set_free(s);
	cr_assert_eq(
	    policy_file_open(P("f.mpol"), false, POLICY_VERIFY_QUICK, pk, &m, err, sizeof(err)),
	    MOAT_EIO, "unsigned");
	cr_assert_eq(policy_sig_sign_file(P("f.mpol"), sk, err, sizeof(err)), 0);
	cr_assert_eq(
	    policy_file_open(P("f.mpol"), false, POLICY_VERIFY_QUICK, pk2, &m, err, sizeof(err)),
	    MOAT_EINVAL, "other key");
	cr_assert_eq(
	    policy_file_open(P("f.mpol"), false, POLICY_VERIFY_QUICK, pk, &m, err, sizeof(err)), 0,
	    "%s", err);
	policy_set_free(m);
}

/* With a key, an RPZ zone file loads only if its signature verifies (policy_rpz.c's hook). */
Test(psig, rpz_file_with_key)
{
	struct rpz_data *d = NULL;
	put(P("z.rpz"), "$ORIGIN rpz.test.\n@ SOA ns. h. 1 60 60 600 60\n"
	                "ok.example CNAME rpz-passthru.\n");
	cr_assert_eq(rpz_load_file_signed(RPZ_ALLOW, P("z.rpz"), NULL, pk, 0, &d, err, sizeof(err)),
	             MOAT_EIO, "unsigned");
	cr_assert_null(d);
	cr_assert_eq(policy_sig_sign_file(P("z.rpz"), sk, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(
	    rpz_load_file_signed(RPZ_ALLOW, P("z.rpz"), NULL, pk2, 0, &d, err, sizeof(err)),
	    MOAT_EINVAL, "other key");
	cr_assert_eq(rpz_load_file_signed(RPZ_ALLOW, P("z.rpz"), NULL, pk, 0, &d, err, sizeof(err)),
	             0, "%s", err);
	cr_assert_eq(rpz_count(d), 1);
	rpz_data_unref(d);
	d = NULL;
	put(P("z.rpz"), "$ORIGIN rpz.test.\n@ SOA ns. h. 1 60 60 600 60\n"
	                "ok.example CNAME rpz-passthru.\nmore.example CNAME rpz-passthru.\n");
	cr_assert_eq(rpz_load_file_signed(RPZ_ALLOW, P("z.rpz"), NULL, pk, 0, &d, err, sizeof(err)),
	             MOAT_EINVAL, "changed after signing");
	cr_assert_null(d);
	/* A change that also breaks the zone: the signature is what the error names (the bytes are
	 * hashed to the end), not the line where parsing stopped. */
	put(P("z.rpz"), "$ORIGIN rpz.test.\n@ SOA ns. h. 1 60 60 600 60\n"
	                "ok.example CNAME rpz-passthru.\nbad.example A 192.0.2.1\n");
	cr_assert_eq(rpz_load_file_signed(RPZ_ALLOW, P("z.rpz"), NULL, pk, 0, &d, err, sizeof(err)),
	             MOAT_EINVAL);
	cr_assert(strstr(err, "bad signature"), "%s", err);
	cr_assert_null(d);
}

/* The same through policy_load: with policy_pubkey set, an unsigned RPZ file fails the load. */
Test(psig, rpz_file_in_policy_load)
{
	char text[2048];
	struct config cfg;
	struct policy *p = NULL;
	put(P("z.rpz"), "$ORIGIN rpz.test.\n@ SOA ns. h. 1 60 60 600 60\n"
	                "ok.example CNAME rpz-passthru.\n");
	snprintf(text, sizeof(text),
	         "upstreams: [192.0.2.53]\nlisten: [127.0.0.1:5300]\npolicy_pubkey: %s\n"
	         "rpz:\n  - {name: z, file: %s}\nagents:\n  - name: a\n    clients: [10.0.0.0/8]\n"
	         "    allow: [\"rpz:z\"]\n",
	         P("k.pub"), P("z.rpz"));
	config_init(&cfg);
	cr_assert_eq(config_load_string(&cfg, text, strlen(text), "t.yaml", err, sizeof(err)), 0,
	             "%s", err);
	cr_assert_lt(policy_load(&cfg, &p, err, sizeof(err)), 0, "unsigned RPZ file loaded");
	cr_assert(strstr(err, "z.rpz"), "%s", err);
	cr_assert_eq(policy_sig_sign_file(P("z.rpz"), sk, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(policy_load(&cfg, &p, err, sizeof(err)), 0, "%s", err);
	policy_unref(p);
	config_free(&cfg);
}

/* A transferred zone is signed only by its TSIG: with policy_pubkey, one without is refused by
 * the config check (so at --check and at start, file:line of the zone); without a key it loads
 * with a lint warning. */
static int rpz_primary_config(bool key, bool tsig, struct policy **p)
{
	char text[2048];
	struct config cfg;
	snprintf(text, sizeof(text),
	         "upstreams: [192.0.2.53]\nlisten: [127.0.0.1:5300]\n%s%s\n"
	         "rpz:\n  - {name: t, primary: 192.0.2.1, zone: rpz.test.%s}\n"
	         "agents:\n  - name: a\n    clients: [10.0.0.0/8]\n    allow: [\"rpz:t\"]\n",
	         key ? "policy_pubkey: " : "", key ? P("k.pub") : "",
	         tsig ? ", tsig: {name: k1, secret: c2VjcmV0}" : "");
	config_init(&cfg);
	int rc = config_load_string(&cfg, text, strlen(text), "t.yaml", err, sizeof(err));
	if (!rc)
		rc = config_validate(&cfg, err, sizeof(err));
	if (!rc)
		rc = policy_load(&cfg, p, err, sizeof(err));
	config_free(&cfg);
	return rc;
}

Test(psig, rpz_primary_without_tsig)
{
	struct policy *p = NULL;
	cr_assert_lt(rpz_primary_config(true, false, &p), 0, "accepted with policy_pubkey");
	cr_assert(strstr(err, "t.yaml:5: rpz 't': policy_pubkey is set"), "%s", err);
	cr_assert(strstr(err, "give it a tsig key"), "%s", err);
	cr_assert_eq(rpz_primary_config(true, true, &p), 0, "%s", err);
	policy_unref(p);
	p = NULL;
	cr_assert_eq(rpz_primary_config(false, false, &p), 0, "%s", err);
	bool warned = false;
	for (size_t i = 0; i < policy_lint_count(p->lint); i++)
		warned |=
		    strstr(policy_lint_get(p->lint, i), "rpz t: transferred without tsig") != NULL;
	cr_assert(warned, "no lint warning for a zone transferred without tsig");
	policy_unref(p);
}

/* ---- header signatures of compiled files (moat/policy_sig.h: two kinds) ---- */

/* f compiled into dir/c.mpol, signed with sk: its .sig line into line. */
static const char *signed_compiled(char *line, size_t cap)
{
	struct policy_set *s = policy_set_new();
	cr_assert_eq(policy_set_load_file(s, P("f"), err, sizeof(err)), 0);
	cr_assert_eq(policy_file_write(s, false, P("c.mpol"), err, sizeof(err)), 0, "%s", err);
	policy_set_free(s);
	cr_assert_eq(policy_sig_sign_file(P("c.mpol"), sk, err, sizeof(err)), 0, "%s", err);
	FILE *f = fopen(P("c.mpol.sig"), "r");
	cr_assert_not_null(fgets(line, (int)cap, f));
	fclose(f);
	static char path[512]; /* not one of P's rotating buffers */
	snprintf(path, sizeof(path), "%s", P("c.mpol"));
	return path;
}

static void flip_at(const char *path, long off)
{
	FILE *f = fopen(path, "r+");
	cr_assert_not_null(f);
	cr_assert_eq(fseek(f, off, SEEK_SET), 0);
	int c = fgetc(f);
	cr_assert_eq(fseek(f, off, SEEK_SET), 0);
	fputc(c ^ 0x20, f);
	fclose(f);
}

static void copy(const char *from, const char *to)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", from, to);
	cr_assert_eq(system(cmd), 0);
}

Test(psig, head_signature_round_trip)
{
	char line[256];
	const char *c = signed_compiled(line, sizeof(line));
	cr_assert_eq(strncmp(line, "moat-sig 2 ", 11), 0, "%s", line);
	cr_assert(strstr(line, " head "), "%s", line);
	cr_assert_eq(policy_sig_verify_file(c, pk, err, sizeof(err)), 0, "%s", err);
	FILE *f = fopen(c, "r");
	cr_assert_eq(policy_sig_verify_head_fd(fileno(f), c, pk, err, sizeof(err)), 0, "%s", err);
	/* the whole-file kind (what an RPZ loader asks for) refuses it */
	cr_assert_eq(policy_sig_verify_fd(fileno(f), c, pk, err, sizeof(err)), MOAT_EINVAL);
	cr_assert(strstr(err, "header signature"), "%s", err);
	fclose(f);
	struct policy_set *m = NULL;
	cr_assert_eq(policy_file_open(c, false, POLICY_VERIFY_LAZY, pk, &m, err, sizeof(err)), 0,
	             "%s", err);
	policy_set_free(m);
}

/* Any byte of the header page counts (the header, and the zeros after it); the table after the
 * page is the loader's to check, against the signed table_sum. */
Test(psig, header_page_byte_changed_refused)
{
	char line[256];
	const char *c = signed_compiled(line, sizeof(line));
	long offs[] = {0, 100, 263, 264, 4095};
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		flip_at(c, offs[i]);
		cr_assert_neq(policy_sig_verify_file(c, pk, err, sizeof(err)), 0, "byte %ld",
		              offs[i]);
		if (offs[i])
			cr_assert(strstr(err, "bad signature"), "byte %ld: %s", offs[i], err);
		flip_at(c, offs[i]);
	}
	cr_assert_eq(policy_sig_verify_file(c, pk, err, sizeof(err)), 0, "%s", err);
	flip_at(c, 4096); /* the first block hash */
	struct policy_set *m = NULL;
	cr_assert_eq(policy_file_open(c, false, POLICY_VERIFY_QUICK, pk, &m, err, sizeof(err)),
	             MOAT_EFORMAT);
	cr_assert(strstr(err, "block table checksum mismatch"), "%s", err);
}

/* A header signature never stands for a file loaded whole: not for an RPZ zone, not for a file
 * named like text with a compiled file's bytes; a non-compiled file named .mpol is not signed. */
Test(psig, head_signature_for_text_or_rpz_refused)
{
	char line[256];
	struct rpz_data *d = NULL;
	const char *c = signed_compiled(line, sizeof(line));
	put(P("z.rpz"), "$ORIGIN rpz.test.\n@ SOA ns. h. 1 60 60 600 60\n"
	                "ok.example CNAME rpz-passthru.\n");
	copy(P("c.mpol.sig"), P("z.rpz.sig"));
	cr_assert_eq(rpz_load_file_signed(RPZ_ALLOW, P("z.rpz"), NULL, pk, 0, &d, err, sizeof(err)),
	             MOAT_EINVAL);
	cr_assert(strstr(err, "header signature"), "%s", err);
	cr_assert_null(d);
	copy(c, P("c.txt"));
	copy(P("c.mpol.sig"), P("c.txt.sig"));
	cr_assert_eq(policy_sig_verify_file(P("c.txt"), pk, err, sizeof(err)), MOAT_EINVAL);
	cr_assert(strstr(err, "header signature"), "%s", err);
	put(P("plain.mpol"), "example.com\n");
	cr_assert_eq(policy_sig_sign_file(P("plain.mpol"), sk, err, sizeof(err)), MOAT_EFORMAT);
	cr_assert(strstr(err, "not a compiled moat policy"), "%s", err);
	struct stat st;
	cr_assert_neq(stat(P("plain.mpol.sig"), &st), 0, "no signature written");
}

/* A .sig file written before header signatures existed (by the version 1 moatctl sign, key and
 * signature kept here) still verifies its text file. */
Test(psig, version1_whole_file_signature_still_verifies)
{
	put(P("old.pub"),
	    "moat-public-key 1 47e125c2ad68a9cb5380b7eea827e12d117c053069bd4550cf05f264d9210b61\n");
	put(P("f.sig"),
	    "moat-sig 1 7c669798f97fcc57 "
	    "7c93e6be736f7b57895d934fd96273422233bcc2844dc9aac30f0d83476c507f6303da4060df"
	    "da98589176e8b4a275eb8f27d77f1f4453c84ab5da1b1e1b9f0c\n");
	uint8_t old[32];
	cr_assert_eq(keyfile_read(P("old.pub"), old, 32, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(policy_sig_verify_file(P("f"), old, err, sizeof(err)), 0, "%s", err);
	put(P("f"), "example.com\n*.example.org\n*.evil.example\n");
	cr_assert_eq(policy_sig_verify_file(P("f"), old, err, sizeof(err)), MOAT_EINVAL);
}

/* Domain separation: a whole-file signature of "X + page" must not pass as the header signature
 * of page, whatever X. With a header context that extended "moat-sig-v1" (X = the extension)
 * it would; the contexts differ inside, so no X exists. Tried with the likely extensions. */
Test(psig, whole_file_signature_not_replayable_as_head)
{
	char line[256], id[17];
	const char *c = signed_compiled(line, sizeof(line));
	const char *exts[] = {"-head", "-head-v2", "-v2-head", ""};
	uint8_t page[POLICY_SIG_HEAD];
	FILE *f = fopen(c, "r");
	cr_assert_eq(fread(page, 1, sizeof(page), f), sizeof(page));
	fclose(f);
	for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
		f = fopen(P("x"), "w");
		fputs(exts[i], f);
		fwrite(page, 1, sizeof(page), f);
		fclose(f);
		cr_assert_eq(policy_sig_sign_file(P("x"), sk, err, sizeof(err)), 0, "%s", err);
		f = fopen(P("x.sig"), "r");
		cr_assert_not_null(fgets(line, sizeof(line), f));
		fclose(f);
		cr_assert_eq(sscanf(line, "moat-sig 1 %16s", id), 1, "%s", line);
		f = fopen(P("c.mpol.sig"), "w");
		fprintf(f, "moat-sig 2 %s head %s", id, line + strlen("moat-sig 1 ") + 17);
		fclose(f);
		cr_assert_eq(policy_sig_verify_file(c, pk, err, sizeof(err)), MOAT_EINVAL,
		             "prefix '%s': %s", exts[i], err);
		cr_assert(strstr(err, "bad signature"), "%s", err);
	}
}

/* Another key: refused by its key id, and a signature of another key under ours by Ed25519. */
Test(psig, head_signature_other_key_refused)
{
	char line[256], id[17];
	const char *c = signed_compiled(line, sizeof(line));
	cr_assert_eq(policy_sig_verify_file(c, pk2, err, sizeof(err)), MOAT_EINVAL);
	cr_assert(strstr(err, "signed with key"), "%s", err);
	uint8_t sk2[64];
	cr_assert_eq(keyfile_read(P("other"), sk2, 64, err, sizeof(err)), 0);
	cr_assert_eq(sscanf(line, "moat-sig 2 %16s", id), 1);
	cr_assert_eq(policy_sig_sign_file(c, sk2, err, sizeof(err)), 0, "%s", err);
	FILE *f = fopen(P("c.mpol.sig"), "r");
	cr_assert_not_null(fgets(line, sizeof(line), f));
	fclose(f);
	memcpy(line + 11, id, 16); /* our key's id, the other key's signature */
	put(P("c.mpol.sig"), line);
	cr_assert_eq(policy_sig_verify_file(c, pk, err, sizeof(err)), MOAT_EINVAL);
	cr_assert(strstr(err, "bad signature"), "%s", err);
}
