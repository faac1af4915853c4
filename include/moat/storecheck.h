/* A store (an LMDB environment: moatd's runtime agents, moat-fw's grant ledger) checked before a
 * daemon trusts it. LMDB has no page checksums: a damaged page can make it read outside its
 * mapping (SIGBUS, SIGSEGV) or abort, and in-process there is no recovering from that. So the
 * check runs in a child process that opens the store read-only and reads every page a walk can
 * reach; the daemon learns only whether the child said the store is sound, crashed, or took too
 * long. A store found damaged is moved aside (renamed, never deleted: the operator may want it)
 * and the daemon starts with an empty one. Used at start-up, before any thread exists. */
#ifndef MOAT_STORECHECK_H
#define MOAT_STORECHECK_H

#include <stddef.h>

/* What the child runs on dir: 0 when the store is sound, else nonzero with why filled (up to
 * whylen bytes, shown to the operator). */
typedef int (*storecheck_fn)(const char *dir, void *arg, char *why, size_t whylen);

/* Run fn(dir, arg) in a child, at most timeout_ms. Returns 0 (sound, or no store yet: fn sees
 * that), MOAT_EFORMAT with why ("the check was killed by SIGBUS", fn's reason, "the check took
 * longer than N ms") when damaged, or MOAT_EIO when no child could be started (why says so).
 * The child exits with _exit: nothing of the parent's stdio is flushed twice. */
int storecheck_run(const char *dir, storecheck_fn fn, void *arg, unsigned timeout_ms, char *why,
                   size_t whylen);

/* Move dir/name (the data file) aside to dir/name.damaged-YYYYMMDDTHHMMSSZ (the name written to
 * moved) and remove dir/lock (NULL: none), so the store opens empty. 0 or MOAT_EIO. */
int storecheck_move_aside(const char *dir, const char *name, const char *lock, char *moved,
                          size_t cap);

#endif
