/* hostnft.c owns the run's own nftables tables, never moat-fw's: `table inet moatrun-N` in the
 * namespace moat run was started in (the sandbox's address masqueraded out of every other
 * interface; in the system mode also the sandbox's new flows marked for tracing before table
 * inet moat judges them, so drops.c can name what the firewall dropped), and in the private
 * mode `table inet moatrun` inside the sandbox's namespace (the same tracing there, where
 * moat-fw's table is). Through libnftables, the library moat-fw uses for its start-up ruleset:
 * a table is one transaction of a few rules, about a millisecond, where running nft would cost
 * a process each time. */
#include "run.h"

#include <arpa/inet.h>
#include <errno.h>
#include <nftables/libnftables.h>
#include <stdio.h>
#include <string.h>

/* Run cmds in the current namespace; 0 or -1 with nft's complaint in err. */
static int hostnft_run(const char *cmds, char *err, size_t errlen)
{
	struct nft_ctx *ctx = nft_ctx_new(NFT_CTX_DEFAULT);
	if (!ctx) {
		snprintf(err, errlen, "no libnftables context");
		return -1;
	}
	nft_ctx_buffer_output(ctx); /* listings are not for the terminal */
	nft_ctx_buffer_error(ctx);
	int rc = nft_run_cmd_from_buffer(ctx, cmds);
	if (rc != 0) {
		const char *e = nft_ctx_get_error_buffer(ctx);
		snprintf(err, errlen, "%s", e && *e ? e : "nft failed");
		for (char *p = err; *p; p++)
			if (*p == '\n')
				*p = ' ';
	}
	nft_ctx_free(ctx);
	return rc ? -1 : 0;
}

int hostnft_add(const struct run_state *st, bool trace, char *err, size_t errlen)
{
	char cmds[1024], sbx[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, st->sbx4, sbx, sizeof(sbx));
	int n = snprintf(cmds, sizeof(cmds),
	                 "table inet %s {\n"
	                 "\tchain nat {\n"
	                 "\t\ttype nat hook postrouting priority srcnat; policy accept;\n"
	                 "\t\tip saddr %s oifname != \"%s\" masquerade\n"
	                 "\t}\n",
	                 st->table, sbx, st->ifname);
	/* Before table inet moat (priority 0): only new flows, so a long transfer costs
	 * nothing; moat-fw's verdicts on them come back as trace events. */
	if (trace)
		n += snprintf(cmds + n, sizeof(cmds) - (size_t)n,
		              "\tchain trace_fwd {\n"
		              "\t\ttype filter hook forward priority -10; policy accept;\n"
		              "\t\tiifname \"%s\" ct state new meta nftrace set 1\n"
		              "\t}\n"
		              "\tchain trace_in {\n"
		              "\t\ttype filter hook input priority -10; policy accept;\n"
		              "\t\tiifname \"%s\" ct state new meta nftrace set 1\n"
		              "\t}\n",
		              st->ifname, st->ifname);
	snprintf(cmds + n, sizeof(cmds) - (size_t)n, "}\n");
	return hostnft_run(cmds, err, errlen);
}

struct hostnft_job {
	char *err;
	size_t errlen;
};

static int hostnft_sandbox_job(void *arg)
{
	struct hostnft_job *j = arg;
	return hostnft_run("table inet moatrun {\n"
	                   "\tchain trace_out {\n"
	                   "\t\ttype filter hook output priority -10; policy accept;\n"
	                   "\t\toifname != \"lo\" ct state new meta nftrace set 1\n"
	                   "\t}\n"
	                   "}\n",
	                   j->err, j->errlen);
}

int hostnft_sandbox_trace(const struct run_state *st, char *err, size_t errlen)
{
	struct hostnft_job j = {err, errlen};
	return run_in_netns(st->sbx_ns, st->host_ns, hostnft_sandbox_job, &j);
}

bool hostnft_moat_here(void)
{
	char err[256];
	return hostnft_run("list table inet moat\n", err, sizeof(err)) == 0;
}

int hostnft_del(const char *table)
{
	char cmd[128], err[256];
	snprintf(cmd, sizeof(cmd), "delete table inet %s\n", table);
	if (hostnft_run(cmd, err, sizeof(err)) == 0)
		return 0;
	/* Already gone is what clean-up wants. */
	return strstr(err, "No such file") ? 0 : -1;
}
