/* Reading policy files again after the privilege drop. moatd re-reads its config, allowlists,
 * high-risk names and blocked ranges on SIGHUP as its unprivileged user; the directories
 * above them (a checkout under a 0700 home, /root/...) may not be searchable by that user.
 * So while still privileged moatd keeps a descriptor (O_PATH) of the directory of each file
 * it read, and later opens the file by its name relative to that descriptor: the file itself
 * and its own directory must be readable and searchable by moatd's user, the directories
 * above need not be (as an operator expects: editing the file in place or replacing it both
 * work, moving it elsewhere needs a restart). Main thread only (start-up and reload). */
#ifndef MOAT_PATHFD_H
#define MOAT_PATHFD_H

#include <stdio.h>

/* Remember the directory of path (once per directory; at most PATHFD_MAX of them). Returns 0
 * or a negative MOAT_* code (the file is then opened by path later, as before). */
#define PATHFD_MAX 64
int pathfd_keep_dir(const char *path);

/* Open path for reading ("r", close-on-exec): through the kept directory when there is one,
 * else by path. NULL with errno set on failure. Ownership: fclose. */
FILE *pathfd_fopen(const char *path);

/* Split path into its directory (written to dir as given: "." for none, "/" for the root) and
 * its last component (returned, pointing into path). */
const char *pathfd_split(const char *path, char *dir, size_t cap);

/* Close every kept directory (at exit). */
void pathfd_release(void);

#endif
