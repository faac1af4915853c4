/* zonesdir.c owns the answer to "where are the shipped lists?" (see moat/zonesdir.h): the pure
 * choice between the source tree, the executable's own install prefix and the compiled-in
 * prefix, the one look at /proc/self/exe that feeds it, and the paths of the two lists in a
 * directory (config_set_zones_dir points a config at an operator's, `zones_dir:`). */
#include "moat/zonesdir.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moat/err.h"

#if !defined(MOAT_ZONES_DIR) || !defined(MOAT_BUILD_DIR) || !defined(MOAT_DATA_DIR) ||             \
    !defined(MOAT_DATA_REL)
#error "MOAT_ZONES_DIR, MOAT_BUILD_DIR, MOAT_DATA_DIR and MOAT_DATA_REL come from the build"
#endif

#define ZONESDIR_HIGHRISK "highrisk.txt"
#define ZONESDIR_RANGES "blocked-ranges.txt"

static int zonesdir_copy(char *out, size_t outlen, const char *s)
{
	size_t n = strlen(s);
	if (n >= outlen)
		return MOAT_EINVAL;
	memcpy(out, s, n + 1);
	return 0;
}

static bool zonesdir_under(const char *dir, const char *top)
{
	size_t n = strlen(top);
	while (n > 1 && top[n - 1] == '/')
		n--;
	return strncmp(dir, top, n) == 0 && (dir[n] == '\0' || dir[n] == '/');
}

/* dir + "/" + rel with "." and ".." resolved by hand: the result names the place, not a path
 * that only works while the executable's directory exists. */
static int zonesdir_join(char *out, size_t outlen, const char *dir, const char *rel)
{
	size_t len;

	if (rel[0] == '/')
		return zonesdir_copy(out, outlen, rel);
	if (zonesdir_copy(out, outlen, dir) != 0)
		return MOAT_EINVAL;
	len = strlen(out);
	while (len > 1 && out[len - 1] == '/')
		out[--len] = '\0';
	while (*rel) {
		const char *end = strchr(rel, '/');
		size_t n = end ? (size_t)(end - rel) : strlen(rel);

		if (n == 2 && rel[0] == '.' && rel[1] == '.') {
			char *slash = strrchr(out, '/');
			len = slash && slash != out ? (size_t)(slash - out) : 1;
			out[len] = '\0';
		} else if (n > 0 && !(n == 1 && rel[0] == '.')) {
			size_t sep = len > 1 ? 1 : 0;
			if (len + sep + n >= outlen)
				return MOAT_EINVAL;
			if (sep)
				out[len++] = '/';
			memcpy(out + len, rel, n);
			len += n;
			out[len] = '\0';
		}
		rel += n + (end != NULL);
	}
	return 0;
}

int zonesdir_choose(const char *exe_dir, const struct zonesdir_layout *l,
                    bool (*has_lists)(const char *dir), char *out, size_t outlen)
{
	if (exe_dir != NULL && l->build_dir != NULL && l->build_dir[0] == '/' &&
	    zonesdir_under(exe_dir, l->build_dir))
		return zonesdir_copy(out, outlen, l->source_zones);
	if (exe_dir != NULL && exe_dir[0] == '/' && l->rel_data != NULL &&
	    zonesdir_join(out, outlen, exe_dir, l->rel_data) == 0 && has_lists(out))
		return 0;
	return zonesdir_copy(out, outlen, l->install_data);
}

static bool zonesdir_has_lists(const char *dir)
{
	char p[PATH_MAX];

	if (snprintf(p, sizeof(p), "%s/" ZONESDIR_HIGHRISK, dir) >= (int)sizeof(p) ||
	    access(p, R_OK) != 0)
		return false;
	return snprintf(p, sizeof(p), "%s/" ZONESDIR_RANGES, dir) < (int)sizeof(p) &&
	       access(p, R_OK) == 0;
}

static char zonesdir_dir[PATH_MAX];
static pthread_once_t zonesdir_once = PTHREAD_ONCE_INIT;

static void zonesdir_decide(void)
{
	char exe[PATH_MAX];
	const char *exe_dir = NULL;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n > 0) {
		exe[n] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash != NULL && slash != exe) {
			*slash = '\0';
			exe_dir = exe;
		}
	}
	/* The kernel gives the executable's canonical path, and the build resolved its directory
	 * the same way (never at run time: a link planted there must not redirect the lists). */
	const struct zonesdir_layout l = {
	    .build_dir = MOAT_BUILD_DIR,
	    .source_zones = MOAT_ZONES_DIR,
	    .rel_data = MOAT_DATA_REL,
	    .install_data = MOAT_DATA_DIR,
	};
	if (zonesdir_choose(exe_dir, &l, zonesdir_has_lists, zonesdir_dir, sizeof(zonesdir_dir)) !=
	    0)
		zonesdir_copy(zonesdir_dir, sizeof(zonesdir_dir), MOAT_DATA_DIR);
}

const char *zonesdir_default(void)
{
	pthread_once(&zonesdir_once, zonesdir_decide);
	return zonesdir_dir;
}

static int zonesdir_set(char **slot, const char *dir, const char *file)
{
	size_t need = strlen(dir) + 1 + strlen(file) + 1;
	char *p = malloc(need);

	if (p == NULL)
		return MOAT_ENOMEM;
	snprintf(p, need, "%s/%s", dir, file);
	free(*slot);
	*slot = p;
	return 0;
}

int zonesdir_paths(const char *dir, char **highrisk, char **ranges)
{
	if (dir == NULL || dir[0] == '\0')
		return MOAT_EINVAL;
	int rc = zonesdir_set(highrisk, dir, ZONESDIR_HIGHRISK);
	return rc ? rc : zonesdir_set(ranges, dir, ZONESDIR_RANGES);
}
