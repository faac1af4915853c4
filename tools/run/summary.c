/* summary.c owns what the user is told at exit: the names the command asked for, allowed and
 * denied (with the rule or the reason and how often), and the packets the firewall dropped
 * (destination, protocol and port, from drops.c), on stderr unless --quiet, and as JSON in
 * --report FILE (written as the invoking user). The names come from the moatd query log of the
 * run (the private moatd's, or the system's from where it ended when the run began, lines of
 * the run's agent only), read with a small reader of the log's flat JSON objects
 * (include/moat/log.h), which skips anything it does not need. A rule that names the run's own
 * allowlist ("slot-3/allow.txt:2", "runtime:moat-run-3:2") is shown as the user gave the line
 * ("--allow 'a.test tcp/80'", "list.txt:3"). */
#include "run.h"

#include "moat/bytes.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/wait.h>

const char *allow_origin_of(size_t i);

#define SUM_FIELD 512

struct sum_name {
	char name[SUM_FIELD], type[16], decision[32], reason[SUM_FIELD];
	unsigned long count;
};

struct sum_drop {
	uint8_t family, proto;
	uint16_t port;
	uint8_t dst[16];
	unsigned long packets;
};

static struct {
	struct sum_name *names;
	size_t nnames, capnames;
	struct sum_drop *drops;
	size_t ndrops, capdrops;
	bool lost;
} sum;

void summary_drop(uint8_t family, const uint8_t *dst, uint8_t proto, uint16_t port)
{
	if (!family) {
		sum.lost = true;
		return;
	}
	for (size_t i = 0; i < sum.ndrops; i++) {
		struct sum_drop *d = &sum.drops[i];
		if (d->family == family && d->proto == proto && d->port == port &&
		    memcmp(d->dst, dst, family == 4 ? 4 : 16) == 0) {
			d->packets++;
			return;
		}
	}
	if (grow_one(&sum.drops, &sum.capdrops, sum.ndrops, sizeof(*sum.drops), 16) < 0)
		return;
	struct sum_drop *d = &sum.drops[sum.ndrops++];
	memset(d, 0, sizeof(*d));
	d->family = family;
	d->proto = proto;
	d->port = port;
	memcpy(d->dst, dst, family == 4 ? 4 : 16);
	d->packets = 1;
}

/* --- the query log's lines ------------------------------------------------------------------ */

/* A JSON string at *p (after its opening quote) into out; *p moves past the closing quote. */
static bool sum_string(const char **p, char *out, size_t cap)
{
	size_t n = 0;
	for (const char *s = *p; *s; s++) {
		char c = *s;
		if (c == '"') {
			out[n < cap ? n : cap - 1] = 0;
			*p = s + 1;
			return true;
		}
		if (c == '\\' && s[1]) {
			c = *++s;
			c = c == 'n' ? '\n' : c == 't' ? '\t' : c;
			if (c == 'u') { /* control bytes only, in moat's log: keep them escaped */
				c = '?';
				for (int k = 0; k < 4 && s[1]; k++)
					s++;
			}
		}
		if (n + 1 < cap)
			out[n++] = c;
	}
	return false;
}

/* Skip one value (string, number, literal, array or object) at *p. */
static bool sum_skip(const char **p)
{
	char tmp[8];
	int depth = 0;
	const char *s = *p;
	do {
		while (*s == ' ')
			s++;
		if (*s == '"') {
			s++;
			if (!sum_string(&s, tmp, sizeof(tmp)))
				return false;
		} else if (*s == '[' || *s == '{') {
			depth++;
			s++;
		} else if (*s == ']' || *s == '}') {
			depth--;
			s++;
		} else if (*s == ',' || *s == ':') {
			s++;
		} else if (*s) {
			while (*s && !strchr(",]} ", *s))
				s++;
		} else {
			return false;
		}
	} while (depth > 0);
	*p = s;
	return true;
}

/* The string values of keys[] in one flat object (others skipped); false when unreadable. */
static bool sum_fields(const char *line, const char *const *keys, char (*vals)[SUM_FIELD], size_t n)
{
	const char *p = strchr(line, '{');
	if (!p)
		return false;
	p++;
	for (size_t i = 0; i < n; i++)
		vals[i][0] = 0;
	while (*p && *p != '}') {
		char key[32];
		while (*p == ' ' || *p == ',')
			p++;
		if (*p++ != '"' || !sum_string(&p, key, sizeof(key)) || *p++ != ':')
			return false;
		size_t k = 0;
		while (k < n && strcmp(keys[k], key) != 0)
			k++;
		if (k < n && *p == '"') {
			p++;
			if (!sum_string(&p, vals[k], SUM_FIELD))
				return false;
		} else if (!sum_skip(&p)) {
			return false;
		}
	}
	return true;
}

/* The rule as the user wrote it, when it is a line of the run's own allowlist. */
static void sum_rule(const struct run_state *st, const struct run_opts *o, char *reason)
{
	char own[300];
	if (st->mode == RUN_SYSTEM)
		snprintf(own, sizeof(own), "runtime:%s:", st->agent);
	else
		snprintf(own, sizeof(own), "%s/allow.txt:", st->dir);
	char *at = strstr(reason, own);
	if (!at)
		return;
	unsigned long line = strtoul(at + strlen(own), NULL, 10);
	if (line < 1 || line > o->nlines)
		return;
	char out[SUM_FIELD];
	snprintf(out, sizeof(out), "%.*s%s", (int)(at - reason), reason, allow_origin_of(line - 1));
	snprintf(reason, SUM_FIELD, "%s", out);
}

static bool sum_allowed(const struct sum_name *s);

/* One row per name, type and decision; the allowing decisions (allow, allow-cached, ...) are
 * one row. */
static void sum_add(const char (*v)[SUM_FIELD])
{
	bool allow = strncmp(v[3], "allow", 5) == 0;
	for (size_t i = 0; i < sum.nnames; i++) {
		struct sum_name *s = &sum.names[i];
		if (!strcmp(s->name, v[1]) && !strcmp(s->type, v[2]) &&
		    (allow ? sum_allowed(s) : !strcmp(s->decision, v[3]))) {
			s->count++;
			return;
		}
	}
	if (grow_one(&sum.names, &sum.capnames, sum.nnames, sizeof(*sum.names), 16) < 0)
		return;
	struct sum_name *s = &sum.names[sum.nnames++];
	snprintf(s->name, sizeof(s->name), "%s", v[1]);
	snprintf(s->type, sizeof(s->type), "%s", v[2]);
	snprintf(s->decision, sizeof(s->decision), "%s", v[3]);
	snprintf(s->reason, sizeof(s->reason), "%s", v[4]);
	s->count = 1;
}

static void sum_read_log(const struct run_state *st, const struct run_opts *o, const char *log)
{
	static const char *const keys[] = {"agent", "qname", "qtype", "decision", "reason"};
	char vals[5][SUM_FIELD];
	FILE *f = fopen(log, "re");
	if (!f)
		return;
	if (st->mode == RUN_SYSTEM && st->log_offset > 0)
		fseek(f, st->log_offset, SEEK_SET);
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		if (!sum_fields(line, keys, vals, 5) || !vals[1][0] || !vals[3][0])
			continue;
		if (st->mode == RUN_SYSTEM && strcmp(vals[0], st->agent) != 0)
			continue;
		sum_rule(st, o, vals[4]);
		sum_add((const char(*)[SUM_FIELD])vals);
	}
	free(line);
	fclose(f);
}

/* --- output ----------------------------------------------------------------------------------- */

static bool sum_allowed(const struct sum_name *s)
{
	return strncmp(s->decision, "allow", 5) == 0;
}

static const char *sum_proto(uint8_t p)
{
	return p == 6 ? "tcp" : p == 17 ? "udp" : p == 1 || p == 58 ? "icmp" : "ip";
}

static void sum_text(const struct run_opts *o, int code)
{
	size_t allowed = 0;
	for (size_t i = 0; i < sum.nnames; i++)
		allowed += sum_allowed(&sum.names[i]);
	fprintf(stderr,
	        "moat run: %s exited %d; names: %zu allowed, %zu denied; %zu destination(s) "
	        "dropped by the firewall\n",
	        o->argv[0], code, allowed, sum.nnames - allowed, sum.ndrops);
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < sum.nnames; i++) {
			const struct sum_name *s = &sum.names[i];
			if (sum_allowed(s) != (pass == 0))
				continue;
			fprintf(stderr, "  %-7s %s %s x%lu: %s%s%s\n", pass ? "denied" : "allowed",
			        s->name, s->type, s->count, pass ? s->decision : "",
			        pass ? ": " : "", s->reason);
		}
	char a[INET6_ADDRSTRLEN];
	for (size_t i = 0; i < sum.ndrops; i++) {
		const struct sum_drop *d = &sum.drops[i];
		inet_ntop(d->family == 4 ? AF_INET : AF_INET6, d->dst, a, sizeof(a));
		if (d->port)
			fprintf(stderr, "  dropped %s %s/%u x%lu packet(s)\n", a,
			        sum_proto(d->proto), d->port, d->packets);
		else
			fprintf(stderr, "  dropped %s %s x%lu packet(s)\n", a, sum_proto(d->proto),
			        d->packets);
	}
	if (sum.lost)
		fprintf(stderr, "  (some drops were not counted: the trace socket overflowed)\n");
}

static void sum_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void sum_json(FILE *f, const struct run_state *st, const struct run_opts *o, int status,
                     int code)
{
	fprintf(f, "{\"v\":1,\"mode\":\"%s\",\"command\":[",
	        st->mode == RUN_SYSTEM ? "system" : "private");
	for (char **a = o->argv; *a; a++) {
		fputs(a == o->argv ? "" : ",", f);
		sum_json_str(f, *a);
	}
	fprintf(f, "],\"exit\":%d,\"signal\":%d,\"names\":[", code,
	        WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	for (size_t i = 0; i < sum.nnames; i++) {
		const struct sum_name *s = &sum.names[i];
		fprintf(f, "%s{\"name\":", i ? "," : "");
		sum_json_str(f, s->name);
		fprintf(f, ",\"type\":");
		sum_json_str(f, s->type);
		fprintf(f, ",\"allowed\":%s,\"decision\":", sum_allowed(s) ? "true" : "false");
		sum_json_str(f, s->decision);
		fprintf(f, ",\"reason\":");
		sum_json_str(f, s->reason);
		fprintf(f, ",\"count\":%lu}", s->count);
	}
	fprintf(f, "],\"dropped\":[");
	char a[INET6_ADDRSTRLEN];
	for (size_t i = 0; i < sum.ndrops; i++) {
		const struct sum_drop *d = &sum.drops[i];
		inet_ntop(d->family == 4 ? AF_INET : AF_INET6, d->dst, a, sizeof(a));
		fprintf(f, "%s{\"address\":\"%s\",\"proto\":\"%s\",\"port\":%u,\"packets\":%lu}",
		        i ? "," : "", a, sum_proto(d->proto), d->port, d->packets);
	}
	fprintf(f, "],\"drops_lost\":%s}\n", sum.lost ? "true" : "false");
}

void summary_write(const struct run_state *st, const struct run_opts *o, const char *log,
                   int status, int code)
{
	sum_read_log(st, o, log);
	if (!o->quiet)
		sum_text(o, code);
	if (!o->report)
		return;
	setfsgid(o->gid);
	setfsuid(o->uid);
	FILE *f = fopen(o->report, "we");
	setfsuid(0);
	setfsgid(0);
	if (!f) {
		run_err("--report %s: %m", o->report);
		return;
	}
	sum_json(f, st, o, status, code);
	if (fclose(f) != 0)
		run_err("--report %s: %m", o->report);
}
