/* Unit tests for where the shipped lists are found (moat/zonesdir.h): the build tree's binaries
 * use the source tree, installed ones their own prefix's share/moat (also under a DESTDIR), and
 * the compiled-in prefix otherwise; zones_dir:/--zones-dir replace the shipped entries only. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "moat/config.h"
#include "moat/config_load.h"
#include "moat/err.h"
#include "moat/zonesdir.h"

static const char *probed;
static bool probe_yes(const char *dir)
{
	probed = dir;
	return true;
}
static bool probe_no(const char *dir)
{
	probed = dir;
	return false;
}

static const struct zonesdir_layout layout = {
    .build_dir = "/src/moat/build",
    .source_zones = "/src/moat/zones",
    .rel_data = "../share/moat",
    .install_data = "/usr/share/moat",
};

Test(zonesdir, build_tree_binary_uses_the_source_tree)
{
	char out[256];
	probed = NULL;
	cr_assert_eq(zonesdir_choose("/src/moat/build", &layout, probe_yes, out, sizeof(out)), 0);
	cr_expect_str_eq(out, "/src/moat/zones");
	cr_assert_eq(zonesdir_choose("/src/moat/build/sub", &layout, probe_yes, out, sizeof(out)),
	             0);
	cr_expect_str_eq(out, "/src/moat/zones");
	cr_expect_null(probed, "the source tree is used without asking");
}

Test(zonesdir, a_sibling_of_the_build_dir_is_not_the_build_tree)
{
	char out[256];
	cr_assert_eq(zonesdir_choose("/src/moat/build2", &layout, probe_no, out, sizeof(out)), 0);
	cr_expect_str_eq(out, "/usr/share/moat");
}

Test(zonesdir, installed_binary_uses_its_own_prefix)
{
	char out[256];
	cr_assert_eq(zonesdir_choose("/tmp/dest/usr/sbin", &layout, probe_yes, out, sizeof(out)),
	             0);
	cr_expect_str_eq(out, "/tmp/dest/usr/share/moat");
	cr_expect_str_eq(probed, "/tmp/dest/usr/share/moat");
	cr_assert_eq(zonesdir_choose("/usr/sbin", &layout, probe_yes, out, sizeof(out)), 0);
	cr_expect_str_eq(out, "/usr/share/moat");
}

Test(zonesdir, without_lists_beside_it_the_compiled_prefix)
{
	char out[256];
	cr_assert_eq(zonesdir_choose("/opt/copy", &layout, probe_no, out, sizeof(out)), 0);
	cr_expect_str_eq(out, "/usr/share/moat");
	cr_assert_eq(zonesdir_choose(NULL, &layout, probe_yes, out, sizeof(out)), 0);
	cr_expect_str_eq(out, "/usr/share/moat");
}

Test(zonesdir, build_dir_gone_or_unknown)
{
	struct zonesdir_layout l = layout;
	char out[256];
	l.build_dir = NULL;
	cr_assert_eq(zonesdir_choose("/src/moat/build", &l, probe_no, out, sizeof(out)), 0);
	cr_expect_str_eq(out, "/usr/share/moat");
}

Test(zonesdir, dot_dot_stops_at_the_root)
{
	struct zonesdir_layout l = layout;
	char out[256];
	l.rel_data = "../../../share/./moat";
	cr_assert_eq(zonesdir_choose("/sbin", &l, probe_yes, out, sizeof(out)), 0);
	cr_expect_str_eq(out, "/share/moat");
}

Test(zonesdir, too_small_a_buffer_is_an_error)
{
	char out[8];
	cr_expect_eq(zonesdir_choose("/src/moat/build", &layout, probe_yes, out, sizeof(out)),
	             MOAT_EINVAL);
}

Test(zonesdir, this_test_runs_from_the_build_tree)
{
	cr_expect_str_eq(zonesdir_default(), MOAT_ZONES_DIR);
	cr_expect_eq(zonesdir_default(), zonesdir_default(), "decided once");
}

Test(zonesdir, zones_dir_key_replaces_only_the_shipped_entries)
{
	static const char yaml[] = "listen: [127.0.0.1]\n"
	                           "upstreams: [192.0.2.53]\n"
	                           "highrisk: [extra.txt]\n"
	                           "zones_dir: lists\n"
	                           "agents: [{name: a, clients: [127.0.0.1]}]\n";
	struct config cfg;
	char err[256] = "";
	config_init(&cfg);
	cr_expect_str_eq(cfg.highrisk_files[0], MOAT_ZONES_DIR "/highrisk.txt");
	cr_assert_eq(config_load_string(&cfg, yaml, sizeof(yaml) - 1, "t.yaml", err, sizeof(err)),
	             0, "%s", err);
	cr_assert_eq(cfg.nhighrisk, 2);
	cr_expect_str_eq(cfg.highrisk_files[0], "lists/highrisk.txt");
	cr_expect_str_eq(cfg.highrisk_files[1], "extra.txt");
	cr_assert_eq(cfg.nranges, 1);
	cr_expect_str_eq(cfg.range_files[0], "lists/blocked-ranges.txt");
	cr_assert_eq(config_set_zones_dir(&cfg, "/override"), 0);
	cr_expect_str_eq(cfg.highrisk_files[0], "/override/highrisk.txt");
	cr_expect_str_eq(cfg.range_files[0], "/override/blocked-ranges.txt");
	cr_expect_str_eq(cfg.highrisk_files[1], "extra.txt");
	cr_expect_eq(config_set_zones_dir(&cfg, ""), MOAT_EINVAL);
	config_free(&cfg);
}
