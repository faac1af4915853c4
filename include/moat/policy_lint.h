/* The allowlist lint: lines that load but open far more than their author meant, or do nothing.
 * Each warning reads "file:line: warning: what: the risk", and moatd prints them at start-up,
 * on reload and for --check (--check --strict fails on any). The rules:
 *   - a wildcard on a public suffix ("*.com", "*.co.uk", and the private section of the list:
 *     "*.github.io", "*.herokuapp.com") or over one ("*.amazonaws.com", which covers
 *     "s3.amazonaws.com"): anyone can register a name below it;
 *   - the root ".";
 *   - an IP literal (queries for those are always denied);
 *   - a line shadowed by the high-risk list (it stays denied);
 *   - a duplicate line; a line already covered by a wildcard of the same agent.
 * Public suffixes come from libpsl with the system's list (MOAT_PSL_FILE, Debian's publicsuffix
 * package, which includes the private section). Not on the query path. */
#ifndef MOAT_POLICY_LINT_H
#define MOAT_POLICY_LINT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct policy_lint;
struct policy_set;

/* Ownership: caller frees with policy_lint_free. NULL on allocation failure. */
struct policy_lint *policy_lint_new(void);
void policy_lint_free(struct policy_lint *l);

/* Warnings come out in the order files were named here (then by line): call it before
 * loading each file. */
void policy_lint_file(struct policy_lint *l, const char *file);

/* Record "file:line: warning: " + the formatted text. */
void policy_lint_add(struct policy_lint *l, const char *file, uint32_t line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Record the duplicate lines of set in l (borrowed; NULL stops it) as files are loaded into it. */
void policy_set_lint_to(struct policy_set *set, struct policy_lint *l);

/* Check every line of one agent's allowlists (allow) against the rules above; highrisk may be
 * NULL. Run once per agent after its files are loaded. */
void policy_lint_agent(struct policy_lint *l, const struct policy_set *allow,
                       const struct policy_set *highrisk);

/* Number of warnings, and the i-th in file and line order. */
size_t policy_lint_count(const struct policy_lint *l);
const char *policy_lint_get(struct policy_lint *l, size_t i);

/* Write every warning, one per line, to f (with a prefix such as "moatd: "). */
void policy_lint_print(struct policy_lint *l, FILE *f, const char *prefix);

#endif
