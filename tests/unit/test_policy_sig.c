/* Unit tests for signed policy files (policy_sig.c): a good signature verifies; another key,
 * a file changed after signing, a missing or malformed .sig are refused with their reason; key
 * files are checked; a compiled file opened with a key needs a good signature. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "moat/config.h"
#include "moat/err.h"
#include "moat/policy.h"
#include "moat/policy_file.h"
#include "moat/policy_sig.h"
#include "moat/rpz.h"

static char dir[] = "/tmp/moat-test-psig-XXXXXX";
static char err[1024];
#include "tmpfiles.h"
static uint8_t pk[32], sk[64], pk2[32];

static void setup(void)
{
	tmpdir_make();
	cr_assert_eq(policy_sig_keygen(P("k"), err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(policy_sig_keygen(P("other"), err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(policy_sig_read_key(P("k"), sk, 64, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(policy_sig_read_key(P("k.pub"), pk, 32, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(policy_sig_read_key(P("other.pub"), pk2, 32, err, sizeof(err)), 0);
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
	cr_assert_eq(policy_sig_read_key(P("k"), k, 32, err, sizeof(err)), MOAT_EFORMAT,
	             "a secret key is not a public key");
	cr_assert_eq(policy_sig_read_key(P("f"), k, 32, err, sizeof(err)), MOAT_EFORMAT);
	cr_assert(strstr(err, "not a moat public key"), "%s", err);
	cr_assert_eq(policy_sig_read_key(P("none"), k, 32, err, sizeof(err)), MOAT_EIO);
}

Test(psig, compiled_file_with_key)
{
	struct policy_set *s = policy_set_new(), *m = NULL;
	cr_assert_eq(policy_set_load_file(s, P("f"), err, sizeof(err)), 0);
	cr_assert_eq(policy_file_write(s, false, P("f.mpol"), err, sizeof(err)), 0, "%s", err);
	policy_set_free(s);
	cr_assert_eq(policy_file_open(P("f.mpol"), false, POLICY_VERIFY_QUICK, pk, &m, err,
	                              sizeof(err)),
	             MOAT_EIO, "unsigned");
	cr_assert_eq(policy_sig_sign_file(P("f.mpol"), sk, err, sizeof(err)), 0);
	cr_assert_eq(policy_file_open(P("f.mpol"), false, POLICY_VERIFY_QUICK, pk2, &m, err,
	                              sizeof(err)),
	             MOAT_EINVAL, "other key");
	cr_assert_eq(policy_file_open(P("f.mpol"), false, POLICY_VERIFY_QUICK, pk, &m, err,
	                              sizeof(err)),
	             0, "%s", err);
	policy_set_free(m);
}

/* With a key, an RPZ zone file loads only if its signature verifies (policy_rpz.c's hook). */
Test(psig, rpz_file_with_key)
{
	struct rpz_data *d = NULL;
	put(P("z.rpz"), "$ORIGIN rpz.test.\n@ SOA ns. h. 1 60 60 600 60\n"
	                "ok.example CNAME rpz-passthru.\n");
	cr_assert_eq(rpz_load_file_signed(RPZ_ALLOW, P("z.rpz"), NULL, pk, &d, err, sizeof(err)),
	             MOAT_EIO, "unsigned");
	cr_assert_null(d);
	cr_assert_eq(policy_sig_sign_file(P("z.rpz"), sk, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rpz_load_file_signed(RPZ_ALLOW, P("z.rpz"), NULL, pk2, &d, err, sizeof(err)),
	             MOAT_EINVAL, "other key");
	cr_assert_eq(rpz_load_file_signed(RPZ_ALLOW, P("z.rpz"), NULL, pk, &d, err, sizeof(err)), 0,
	             "%s", err);
	cr_assert_eq(rpz_count(d), 1);
	rpz_data_unref(d);
	d = NULL;
	put(P("z.rpz"), "$ORIGIN rpz.test.\n@ SOA ns. h. 1 60 60 600 60\n"
	                "ok.example CNAME rpz-passthru.\nmore.example CNAME rpz-passthru.\n");
	cr_assert_eq(rpz_load_file_signed(RPZ_ALLOW, P("z.rpz"), NULL, pk, &d, err, sizeof(err)),
	             MOAT_EINVAL, "changed after signing");
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
