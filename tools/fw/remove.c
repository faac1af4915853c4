/* remove.c owns `moat-fw --remove`: delete table inet moat and table inet moat_guard (in --netns
 * when given) and say what went with them, unless a running moat-fw holds them (holder.h). The
 * only way moat-fw's rules ever leave: a stop keeps them (closed stays closed). */
#include "remove.h"
#include "holder.h"
#include "hostnet.h"
#include "moat/err.h"
#include "nft.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FWREMOVE_LIST_MAX (8u << 20) /* a table of a million grants lists in well under this */

/* Append the names of the listing's "\tKIND NAME {" lines to out, comma separated. */
static void fwremove_names(const char *list, const char *kind, char *out, size_t cap)
{
	size_t kl = strlen(kind);
	out[0] = '\0';
	for (const char *p = list; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (p[0] != '\t' || strncmp(p + 1, kind, kl) != 0 || p[1 + kl] != ' ')
			continue;
		const char *n = p + 2 + kl;
		size_t len = strcspn(n, " {\n");
		size_t l = strlen(out);
		snprintf(out + l, cap - l, "%s%.*s", l ? ", " : "", (int)len, n);
	}
}

/* Refuse while a live moat-fw holds the table (it would put it back at once). */
static bool fwremove_held(struct fwnft *n, const char *where, bool force)
{
	unsigned long pid;
	char comm[64];
	if (fwhold_check(n, &pid, comm, sizeof(comm)) != FWHOLD_HELD)
		return false;
	if (force) {
		fprintf(stderr,
		        "moat-fw: --force: removing table inet " FWNFT_TABLE
		        " although moat-fw pid %lu holds it (it puts the tables back when it sees "
		        "them gone)\n",
		        pid);
		return false;
	}
	fprintf(stderr,
	        "moat-fw: refusing to remove table inet " FWNFT_TABLE
	        " from %s: moat-fw pid %lu (%s) holds it and would put it back at once; stop it "
	        "first (systemctl stop moat-fw, or kill %lu), then run moat-fw --remove again "
	        "(--force removes it anyway, for use after stopping it)\n",
	        where, pid, comm, pid);
	return true;
}

int fwremove_run(const char *netns, bool force)
{
	char err[512], chains[512], sets[512], gc[256];
	if (netns && fwhost_enter_netns(netns) < 0)
		return 1;
	struct fwnft *n = fwnft_open();
	char *list = malloc(FWREMOVE_LIST_MAX);
	if (!n || !list) {
		fprintf(stderr, "moat-fw: cannot create the libnftables context\n");
		fwnft_close(n);
		free(list);
		return 1;
	}
	const char *where = netns ? netns : "this namespace";
	bool table = fwnft_query(n, "list table inet " FWNFT_TABLE "\n", list, FWREMOVE_LIST_MAX,
	                         err, sizeof(err)) == 0;
	bool guard = fwnft_table_comment(n, FWNFT_GUARD, gc, sizeof(gc)) == 0;
	int rc = 0;
	if (!table && !guard) {
		printf("moat-fw: no table inet " FWNFT_TABLE " in %s; nothing removed\n", where);
	} else if (table && fwremove_held(n, where, force)) {
		rc = MOAT_ELIMIT; /* held: refused */
	} else {
		size_t grants = 0;
		for (const char *p = list; table && (p = strstr(p, " expires ")) != NULL; p++)
			grants++;
		fwremove_names(table ? list : "", "chain", chains, sizeof(chains));
		fwremove_names(table ? list : "", "set", sets, sizeof(sets));
		/* Both in one transaction: never the guard without the table it stands for. */
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "%s%s",
		         table ? "delete table inet " FWNFT_TABLE "\n" : "",
		         guard ? "delete table inet " FWNFT_GUARD "\n" : "");
		rc = fwnft_run(n, cmd, err, sizeof(err));
		if (rc < 0)
			fprintf(stderr, "moat-fw: cannot delete the tables: %s\n", err);
		if (rc == 0 && table)
			printf("moat-fw: removed table inet " FWNFT_TABLE
			       " from %s: chains %s; sets %s; %zu live grants\n",
			       where, chains, sets, grants);
		if (rc == 0 && guard)
			printf("moat-fw: removed table inet " FWNFT_GUARD
			       " from %s: nothing keeps the sandbox interfaces closed now\n",
			       where);
	}
	fwnft_close(n);
	free(list);
	return rc < 0 ? 1 : 0;
}
