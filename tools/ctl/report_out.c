/* report_out.c owns `moatctl report`'s command line and its three outputs: text for a person,
 * JSON (written with jansson) for a program, and the recommended allowlist itself, a file
 * moatd loads as it is (comments say where each line came from and what the lint said). */
#include <arpa/inet.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "moat/err.h"
#include "moat/zonesdir.h"
#include "report.h"

static const char *addr_text(const struct rep_addr *a, char *out, size_t cap)
{
	if (!inet_ntop(a->family == 4 ? AF_INET : AF_INET6, a->a, out, (socklen_t)cap))
		snprintf(out, cap, "?");
	return out;
}

static void ports_text(const struct rep_name *n, char *out, size_t cap)
{
	if (n->any_port)
		snprintf(out, cap, "any");
	else if (!n->ports.n)
		snprintf(out, cap, "-");
	else
		policy_ports_format(&n->ports, out, cap);
}

static void decisions_text(const struct rep_name *n, char *out, size_t cap)
{
	out[0] = 0;
	for (unsigned k = 0; k < n->ndec; k++)
		snprintf(out + strlen(out), cap - strlen(out), "%s%s", k ? "," : "", n->dec[k]);
}

/* The comment after a recommended line. */
static const char *rule_note(const struct recommend_rule *r)
{
	return r->no_conn    ? "no connection seen: every port"
	       : r->any_port ? "more ports than a line holds: every port"
	                     : NULL;
}

int report_print_text(const struct report *r)
{
	char t[NAME_MAXTEXT + 200], p[160], d[120], a[64];
	printf("moatctl report: %llu log lines (%llu unreadable), %s to %s\n",
	       (unsigned long long)r->lines, (unsigned long long)r->bad_lines,
	       *r->first ? r->first : "-", *r->last ? r->last : "-");
	for (size_t ag = 0; ag < r->nagents; ag++) {
		const struct rep_agent *A = &r->agents[ag];
		printf("\nagent %s: %llu queries\n  names (decision, count, first, last, ports):\n",
		       A->name, (unsigned long long)A->queries);
		for (size_t i = 0; i < r->nnames; i++) {
			const struct rep_name *n = &r->names[i];
			if (n->agent != ag)
				continue;
			decisions_text(n, d, sizeof(d));
			ports_text(n, p, sizeof(p));
			printf("    %-18s %6llu  %s  %s  %-16s %s\n", d,
			       (unsigned long long)n->count, n->first, n->last, p, n->name);
		}
		printf("  connections (outcome, count, destination, names):\n");
		for (size_t c = 0; c < r->nconns; c++) {
			const struct rep_conn *x = &r->conns[c];
			if (x->agent != ag)
				continue;
			printf("    %-16s %6llu  %s %s/%u  %zu name(s)%s\n", x->outcome,
			       (unsigned long long)x->count, addr_text(&x->dst, a, sizeof(a)),
			       report_proto(x->proto, p, sizeof(p)), x->port, x->nnames,
			       x->nnames ? "" : ": by address, never resolved");
		}
		printf("  recommended allowlist (%zu line(s)):\n", A->rec.n);
		for (size_t i = 0; i < A->rec.n; i++) {
			recommend_line(&A->rec.rules[i], t, sizeof(t));
			const char *note = rule_note(&A->rec.rules[i]);
			printf("    %s%s%s\n", t, note ? "   # " : "", note ? note : "");
		}
		for (size_t i = 0; i < A->rec.nlint; i++)
			printf("    lint: %s\n", A->rec.lint[i]);
	}
	for (size_t c = 0; c < r->nconns; c++)
		if (r->conns[c].agent == SIZE_MAX)
			printf("\nfrom %s (no agent seen): %s %s/%u %s x%llu\n", r->conns[c].src,
			       addr_text(&r->conns[c].dst, a, sizeof(a)),
			       report_proto(r->conns[c].proto, p, sizeof(p)), r->conns[c].port,
			       r->conns[c].outcome, (unsigned long long)r->conns[c].count);
	if (r->suppressed)
		printf("\nmoat-fw dropped %llu more packet(s) it did not log one by one\n",
		       (unsigned long long)r->suppressed);
	return 0;
}

static json_t *name_json(const struct rep_name *n)
{
	char p[160], a[64];
	json_t *o = json_object(), *dec = json_array(), *addrs = json_array();
	for (unsigned k = 0; k < n->ndec; k++)
		json_array_append_new(dec, json_string(n->dec[k]));
	for (unsigned k = 0; k < n->naddr; k++)
		json_array_append_new(addrs, json_string(addr_text(&n->addr[k], a, sizeof(a))));
	ports_text(n, p, sizeof(p));
	json_object_set_new(o, "name", json_string(n->name));
	json_object_set_new(o, "decisions", dec);
	json_object_set_new(o, "count", json_integer((json_int_t)n->count));
	json_object_set_new(o, "first", json_string(n->first));
	json_object_set_new(o, "last", json_string(n->last));
	json_object_set_new(o, "addresses", addrs);
	json_object_set_new(o, "ports", n->ports.n || n->any_port ? json_string(p) : json_null());
	return o;
}

static json_t *conn_json(const struct rep_conn *x)
{
	char p[16], a[64];
	json_t *o = json_object();
	json_object_set_new(o, "src", json_string(x->src));
	json_object_set_new(o, "dst", json_string(addr_text(&x->dst, a, sizeof(a))));
	json_object_set_new(o, "proto", json_string(report_proto(x->proto, p, sizeof(p))));
	json_object_set_new(o, "port", json_integer(x->port));
	json_object_set_new(o, "outcome", json_string(x->outcome));
	json_object_set_new(o, "count", json_integer((json_int_t)x->count));
	json_object_set_new(o, "first", json_string(x->first));
	json_object_set_new(o, "last", json_string(x->last));
	json_object_set_new(o, "names", json_integer((json_int_t)x->nnames));
	return o;
}

static json_t *agent_json(const struct report *r, size_t ag)
{
	const struct rep_agent *A = &r->agents[ag];
	json_t *o = json_object(), *names = json_array(), *conns = json_array(),
	       *rec = json_array(), *lint = json_array();
	char t[NAME_MAXTEXT + 200];
	for (size_t i = 0; i < r->nnames; i++)
		if (r->names[i].agent == ag)
			json_array_append_new(names, name_json(&r->names[i]));
	for (size_t c = 0; c < r->nconns; c++)
		if (r->conns[c].agent == ag)
			json_array_append_new(conns, conn_json(&r->conns[c]));
	for (size_t i = 0; i < A->rec.n; i++) {
		recommend_line(&A->rec.rules[i], t, sizeof(t));
		json_array_append_new(rec, json_string(t));
	}
	for (size_t i = 0; i < A->rec.nlint; i++)
		json_array_append_new(lint, json_string(A->rec.lint[i]));
	json_object_set_new(o, "agent", json_string(A->name));
	json_object_set_new(o, "queries", json_integer((json_int_t)A->queries));
	json_object_set_new(o, "names", names);
	json_object_set_new(o, "connections", conns);
	json_object_set_new(o, "recommended", rec);
	json_object_set_new(o, "lint", lint);
	json_object_set_new(o, "left_out", json_integer((json_int_t)A->rec.skipped));
	return o;
}

int report_print_json(const struct report *r)
{
	json_t *o = json_object(), *agents = json_array(), *stray = json_array();
	for (size_t ag = 0; ag < r->nagents; ag++)
		json_array_append_new(agents, agent_json(r, ag));
	for (size_t c = 0; c < r->nconns; c++)
		if (r->conns[c].agent == SIZE_MAX)
			json_array_append_new(stray, conn_json(&r->conns[c]));
	json_object_set_new(o, "v", json_integer(1));
	json_object_set_new(o, "ok", json_true());
	json_object_set_new(o, "cmd", json_string("report"));
	json_object_set_new(o, "lines", json_integer((json_int_t)r->lines));
	json_object_set_new(o, "first", *r->first ? json_string(r->first) : json_null());
	json_object_set_new(o, "last", *r->last ? json_string(r->last) : json_null());
	json_object_set_new(o, "agents", agents);
	json_object_set_new(o, "unknown_sources", stray);
	json_object_set_new(o, "suppressed_drops", json_integer((json_int_t)r->suppressed));
	char *text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!text)
		return 1;
	puts(text);
	free(text);
	return 0;
}

int report_print_allowlist(const struct report *r)
{
	if (r->nagents != 1) {
		fprintf(stderr, "moatctl: report --format allowlist: %s; name one AGENT\n",
		        r->nagents ? "the logs hold several agents" : "no agent in the logs");
		return 1;
	}
	const struct rep_agent *A = &r->agents[0];
	char t[NAME_MAXTEXT + 200], a[64], p[16];
	printf("# moat: recommended allowlist for agent %s (moatctl report), from %llu "
	       "queries seen %s to %s\n# review it before use; see moatctl(8)\n",
	       A->name, (unsigned long long)A->queries, r->first, r->last);
	for (size_t i = 0; i < A->rec.n; i++) {
		recommend_line(&A->rec.rules[i], t, sizeof(t));
		const char *note = rule_note(&A->rec.rules[i]);
		printf("%s%s%s\n", t, note ? "   # " : "", note ? note : "");
	}
	for (size_t c = 0; c < r->nconns; c++)
		if (r->conns[c].agent == 0 && !r->conns[c].nnames)
			printf(
			    "# not allowed by any name: %s %s/%u (%s, %llu time(s)): connected by "
			    "address; moat allows names, not addresses\n",
			    addr_text(&r->conns[c].dst, a, sizeof(a)),
			    report_proto(r->conns[c].proto, p, sizeof(p)), r->conns[c].port,
			    r->conns[c].outcome, (unsigned long long)r->conns[c].count);
	if (A->rec.skipped)
		printf(
		    "# %zu name(s) left out: high-risk names and IP literals are never allowed\n",
		    A->rec.skipped);
	for (size_t i = 0; i < A->rec.nlint; i++)
		printf("# lint: %s\n", A->rec.lint[i]);
	return 0;
}

/* The high-risk list the recommendation avoids: the shipped one, plus --highrisk files. */
static struct policy_set *highrisk_load(char **files, size_t n)
{
	char shipped[PATH_MAX], err[512];
	struct policy_set *hr = policy_set_new();
	snprintf(shipped, sizeof(shipped), "%s/highrisk.txt", zonesdir_default());
	for (size_t i = 0; hr && i <= n; i++)
		if (policy_set_load_file(hr, i ? files[i - 1] : shipped, err, sizeof(err)) < 0) {
			fprintf(stderr, "moatctl: report: %s\n", err);
			policy_set_free(hr);
			return NULL;
		}
	return hr;
}

int ctl_report_main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"log", required_argument, 0, 'l'},
	    {"fw-log", required_argument, 0, 'f'},
	    {"since", required_argument, 0, 's'},
	    {"format", required_argument, 0, 'F'},
	    {"highrisk", required_argument, 0, 'H'},
	    {"wildcard-min", required_argument, 0, 'w'},
	    {0, 0, 0, 0},
	};
	char *logs[16], *fw[16], *hrf[16];
	size_t nlog = 0, nfw = 0, nhr = 0;
	const char *format = "text";
	unsigned wmin = 0;
	struct report r = {0};
	int ch;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (ch == 'l' && nlog < 16)
			logs[nlog++] = optarg;
		else if (ch == 'f' && nfw < 16)
			fw[nfw++] = optarg;
		else if (ch == 'H' && nhr < 16)
			hrf[nhr++] = optarg;
		else if (ch == 's' && report_since(optarg, r.since) == 0)
			continue;
		else if (ch == 'F' && (!strcmp(optarg, "text") || !strcmp(optarg, "json") ||
		                       !strcmp(optarg, "allowlist")))
			format = optarg;
		else if (ch == 'w' && atoi(optarg) > 0)
			wmin = (unsigned)atoi(optarg);
		else {
			fprintf(stderr,
			        "usage: moatctl report [AGENT] [--since TIME] "
			        "[--format text|json|allowlist] [--log FILE]... "
			        "[--fw-log FILE]... [--highrisk FILE]... [--wildcard-min N]\n");
			return 2;
		}
	}
	if (optind + 1 < argc) {
		fprintf(stderr, "moatctl: report: one AGENT at most\n");
		return 2;
	}
	r.only = optind < argc ? argv[optind] : NULL;
	if (!nlog)
		logs[nlog++] = "/var/log/moat/queries.jsonl";
	struct policy_set *hr = highrisk_load(hrf, nhr);
	int rc = hr ? 0 : 1;
	/* The query logs first: they say which sandbox address is which agent. */
	for (size_t i = 0; !rc && i < nlog; i++)
		rc = report_read_queries(&r, logs[i]) ? 1 : 0;
	for (size_t i = 0; !rc && i < nfw; i++)
		rc = report_read_fw(&r, fw[i]) ? 1 : 0;
	if (!rc && report_finish(&r, hr, wmin) < 0) {
		fprintf(stderr, "moatctl: report: out of memory\n");
		rc = 1;
	}
	if (!rc)
		rc = !strcmp(format, "json")   ? report_print_json(&r)
		     : !strcmp(format, "text") ? report_print_text(&r)
		                               : report_print_allowlist(&r);
	report_free(&r);
	policy_set_free(hr);
	return rc;
}
