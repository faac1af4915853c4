/* Unit tests for signed policy files (policy_sig.c): a good signature verifies; another key,
 * a file changed after signing, a missing or malformed .sig are refused with their reason; key
 * files are checked; a compiled file opened with a key needs a good signature. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "moat/err.h"
#include "moat/policy.h"
#include "moat/policy_file.h"
#include "moat/policy_sig.h"

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
