/* zonesdir: where the shipped lists (highrisk.txt, blocked-ranges.txt) are found.
 *
 * A binary run from its build tree uses the source tree's zones/ (so a fresh build works without
 * installing); any other binary uses the install prefix's share/moat, found relative to the
 * executable (so a DESTDIR or relocated tree works) and otherwise at the path compiled in
 * (CMAKE_INSTALL_FULL_DATADIR/moat). `zones_dir:` and `--zones-dir` override both. */
#ifndef MOAT_ZONESDIR_H
#define MOAT_ZONESDIR_H

#include <stdbool.h>
#include <stddef.h>

/* What the build knows about the places a binary may run from. */
struct zonesdir_layout {
	const char *build_dir;    /* the build tree's top directory (canonical path) or NULL */
	const char *source_zones; /* the source tree's zones/ */
	const char *rel_data;     /* from the install bin/sbin dir to share/moat, "../share/moat" */
	const char *install_data; /* absolute share/moat of the configured prefix */
};

/* The pure decision: the shipped-lists directory for an executable living in exe_dir (a
 * canonical absolute directory, or NULL when unknown). has_lists(dir) says whether dir holds
 * the shipped lists; it is asked only about the executable-relative candidate. Writes the
 * directory (lexically normalised, no "..") to out. Returns 0 or MOAT_EINVAL when out is too
 * small. */
int zonesdir_choose(const char *exe_dir, const struct zonesdir_layout *l,
                    bool (*has_lists)(const char *dir), char *out, size_t outlen);

/* The directory for this process, decided once (from /proc/self/exe) on the first call and
 * remembered, so later calls (a reload under the seccomp filter) give the same answer. The
 * string is static; never NULL. Thread-safe. */
const char *zonesdir_default(void);

/* Replace *highrisk and *ranges (owned strings, freed here) with the paths of the two shipped
 * lists in dir. Returns 0 or MOAT_ENOMEM/MOAT_EINVAL (dir empty or NULL). */
int zonesdir_paths(const char *dir, char **highrisk, char **ranges);

#endif
