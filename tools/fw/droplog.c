/* droplog.c owns moat-fw's drop and connection log (format and reasons in droplog.h): the log
 * prefix the rules carry, the nfnetlink_log group read with libnetfilter_log (the binding,
 * copy mode, sequence numbers and attribute parsing it does), the packet headers, the reason
 * refined with the ledger, the per-reason rate limit, the exact counts and the JSON lines. */
#include "droplog.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libnetfilter_log/libnetfilter_log.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "metrics.h"
#include "moat/isotime.h"
#include "moat/err.h"

#define PREFIX "moat "
#define COPY_BYTES 128    /* IPv6 header + an extension or two + the ports */
#define RCVBUF (8u << 20) /* a burst of drops waits here while a batch runs */
#define CONN_SLOTS 4096

enum reason {
	R_SPOOFED,
	R_ALWAYS,
	R_ICMP,
	R_NEVER,
	R_EXPIRED,
	R_WRONG_PORT,
	R_INBOUND,
	R_HOST,
	R_CONNECT,
	R_GUARD,
	R_N,
};

static const char *const reason_name[R_N] = {
    "spoofed",    "always-deny", "icmp", "never-resolved", "expired",
    "wrong-port", "inbound",     "host", "connect",        "guard",
};

struct conn_slot {
	uint64_t key; /* hash of (src, dst, proto, port); 0: empty */
	time_t at;
};

struct fwdroplog {
	struct nflog_handle *h;
	struct nflog_g_handle *gh;
	int fd;
	FILE *out;
	uv_poll_t poll;
	uv_timer_t tick;
	struct ledger **ledger;
	const struct fwnft_setup *setup;
	const char *label;
	uint64_t packets[R_N], lines[R_N], held[R_N], lost, lost_said, overruns;
	double tokens[R_N];
	uint64_t refilled_ms;
	uint32_t next_seq;
	bool have_seq;
	struct conn_slot conns[CONN_SLOTS];
};

const char *fwdroplog_stmt(uint16_t group, const char *chain, const char *kind, char *buf,
                           size_t cap)
{
	if (!group)
		snprintf(buf, cap, "%s", "");
	else
		snprintf(buf, cap, " log prefix \"" PREFIX "%s %s\" group %u", chain, kind, group);
	return buf;
}

/* --- packets ------------------------------------------------------------------------------- */

int fwdroplog_parse(const uint8_t *p, size_t len, struct fwdroplog_pkt *o)
{
	memset(o, 0, sizeof(*o));
	size_t l4;
	if (len >= 20 && p[0] >> 4 == 4) {
		size_t ihl = (size_t)(p[0] & 15) * 4;
		if (ihl < 20 || ihl > len)
			return MOAT_EINVAL;
		o->family = 4;
		o->proto = p[9];
		memcpy(o->src, p + 12, 4);
		memcpy(o->dst, p + 16, 4);
		/* a later fragment has no transport header */
		l4 = (p[6] & 0x1f) || p[7] ? len : ihl;
	} else if (len >= 40 && p[0] >> 4 == 6) {
		o->family = 6;
		o->proto = p[6];
		memcpy(o->src, p + 8, 16);
		memcpy(o->dst, p + 24, 16);
		l4 = 40;
		/* hop-by-hop, routing, destination options: skip to the transport header */
		for (int i = 0; i < 4 && (o->proto == 0 || o->proto == 43 || o->proto == 60); i++) {
			if (l4 + 8 > len)
				return 0;
			o->proto = p[l4];
			l4 += ((size_t)p[l4 + 1] + 1) * 8;
		}
	} else {
		return MOAT_EINVAL;
	}
	if ((o->proto == 6 || o->proto == 17 || o->proto == 132) && l4 + 4 <= len)
		o->port = (uint16_t)(p[l4 + 2] << 8 | p[l4 + 3]);
	return 0;
}

/* --- the reason, refined with the ledger --------------------------------------------------- */

struct dst_look {
	uint64_t now;
	uint8_t proto;
	uint16_t port;
	bool any, live, live_port;
	char agent[LEDGER_AGENT_MAX + 1];
};

static int on_dst(const struct ledger_entry *e, void *ctx)
{
	struct dst_look *x = ctx;
	x->any = true;
	if (!x->agent[0] || e->expiry > x->now)
		snprintf(x->agent, sizeof(x->agent), "%s", e->agent);
	if (e->expiry <= x->now || e->key.proto == 255)
		return 0;
	x->live = true;
	x->live_port |= e->key.proto == 0 || (e->key.proto == x->proto && e->key.port == x->port);
	return 0;
}

/* An "unresolved" drop: never granted, expired, or granted for other ports. */
static enum reason refine(struct fwdroplog *d, const struct fwdroplog_pkt *k, char *agent)
{
	struct dst_look x = {.now = (uint64_t)time(NULL), .proto = k->proto, .port = k->port};
	bool fwd = d->setup->placement == FWNFT_FORWARD;
	if (!*d->ledger || ledger_each_dst(*d->ledger, k->family, fwd ? k->src : NULL, k->dst,
	                                   x.now, on_dst, &x) < 0)
		return R_NEVER;
	snprintf(agent, LEDGER_AGENT_MAX + 1, "%s", x.agent);
	if (x.live && !x.live_port)
		return R_WRONG_PORT;
	return x.any ? R_EXPIRED : R_NEVER;
}

static enum reason reason_of(const char *kind)
{
	if (!strcmp(kind, "unresolved"))
		return R_NEVER;
	for (int r = 0; r < R_N; r++)
		if (!strcmp(kind, reason_name[r]))
			return (enum reason)r;
	return R_N;
}

/* --- writing ------------------------------------------------------------------------------- */

/* The sandbox a source belongs to: the netns label, or the --sandbox range holding it. */
static void sandbox_of(const struct fwdroplog *d, const struct fwdroplog_pkt *k, char *out,
                       size_t cap)
{
	snprintf(out, cap, "%s", d->label ? d->label : "?");
	for (size_t i = 0; !d->label && i < d->setup->nsandbox; i++) {
		const struct fwnft_range *r = &d->setup->sandbox[i];
		char a[INET6_ADDRSTRLEN];
		if (!fwnft_range_contains(r, k->family, k->src))
			continue;
		inet_ntop(r->family == 4 ? AF_INET : AF_INET6, r->addr, a, sizeof(a));
		snprintf(out, cap, "%s/%u", a, r->bits);
		return;
	}
}

static void write_line(struct fwdroplog *d, const struct fwdroplog_pkt *k, const char *chain,
                       enum reason r, const char *agent)
{
	char ts[40], src[INET6_ADDRSTRLEN], dst[INET6_ADDRSTRLEN], sbx[80], proto[8];
	int af = k->family == 4 ? AF_INET : AF_INET6;
	isotime_now(ts, sizeof(ts));
	inet_ntop(af, k->src, src, sizeof(src));
	inet_ntop(af, k->dst, dst, sizeof(dst));
	sandbox_of(d, k, sbx, sizeof(sbx));
	snprintf(proto, sizeof(proto), "%s",
	         k->proto == 6    ? "tcp"
	         : k->proto == 17 ? "udp"
	         : k->proto == 1  ? "icmp"
	         : k->proto == 58 ? "icmpv6"
	                          : "other");
	/* Every text here is moat-fw's own or an address: nothing needs escaping; the agent
	 * name is one moat-fw checked when it took the grant ([A-Za-z0-9_.-]). */
	fprintf(d->out,
	        "{\"ts\":\"%s\",\"v\":1,\"event\":\"%s\",\"sandbox\":\"%s\",\"src\":\"%s\","
	        "\"dst\":\"%s\",\"proto\":\"%s\",\"proto_num\":%u,\"port\":%u,\"chain\":\"%s\"",
	        ts, r == R_CONNECT ? "connect" : "drop", sbx, src, dst, proto, k->proto, k->port,
	        chain);
	if (r != R_CONNECT)
		fprintf(d->out, ",\"reason\":\"%s\"", reason_name[r]);
	if (agent && *agent)
		fprintf(d->out, ",\"agent\":\"%s\"}\n", agent);
	else
		fprintf(d->out, ",\"agent\":null}\n");
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A token of reason r's bucket: false when its lines are over the rate just now. */
static bool take(struct fwdroplog *d, enum reason r)
{
	uint64_t t = now_ms();
	if (t > d->refilled_ms) {
		double add = (double)(t - d->refilled_ms) * FWDROPLOG_RATE / 1000.0;
		for (int i = 0; i < R_N; i++)
			d->tokens[i] = d->tokens[i] + add > FWDROPLOG_BURST ? FWDROPLOG_BURST
			                                                    : d->tokens[i] + add;
		d->refilled_ms = t;
	}
	if (d->tokens[r] < 1)
		return false;
	d->tokens[r] -= 1;
	return true;
}

/* A connection already written in the last FWDROPLOG_CONN_S seconds (a small table of recent
 * ones, a slot each: a collision writes one more line, never one less). */
static bool conn_seen(struct fwdroplog *d, const struct fwdroplog_pkt *k)
{
	uint64_t h = 1469598103934665603ull;
	const uint8_t *b = (const uint8_t *)k;
	for (size_t i = 0; i < sizeof(*k); i++)
		h = (h ^ b[i]) * 1099511628211ull;
	h |= 1;
	struct conn_slot *s = &d->conns[h % CONN_SLOTS];
	time_t now = time(NULL);
	if (s->key == h && now - s->at < FWDROPLOG_CONN_S)
		return true;
	s->key = h;
	s->at = now;
	return false;
}

static int on_packet(struct nflog_g_handle *gh, struct nfgenmsg *msg, struct nflog_data *nfa,
                     void *ctx)
{
	struct fwdroplog *d = ctx;
	(void)gh;
	(void)msg;
	uint32_t seq;
	if (nflog_get_seq(nfa, &seq) == 0) {
		if (d->have_seq && seq != d->next_seq)
			d->lost += (uint32_t)(seq - d->next_seq);
		d->next_seq = seq + 1;
		d->have_seq = true;
	}
	const char *prefix = nflog_get_prefix(nfa);
	char chain[32], kind[32], agent[LEDGER_AGENT_MAX + 1] = "";
	char *payload;
	int len = nflog_get_payload(nfa, &payload);
	struct fwdroplog_pkt k;
	if (!prefix || strncmp(prefix, PREFIX, strlen(PREFIX)) ||
	    sscanf(prefix + strlen(PREFIX), "%31s %31s", chain, kind) != 2 || len < 0 ||
	    fwdroplog_parse((const uint8_t *)payload, (size_t)len, &k) < 0)
		return 0; /* not one of ours, or no header to read */
	enum reason r = reason_of(kind);
	if (r == R_N)
		return 0;
	if (r == R_CONNECT && conn_seen(d, &k)) {
		d->packets[r]++;
		return 0;
	}
	if (r == R_NEVER)
		r = refine(d, &k, agent);
	d->packets[r]++;
	if (!take(d, r)) {
		d->held[r]++;
		return 0;
	}
	d->lines[r]++;
	write_line(d, &k, chain, r, agent);
	return 0;
}

static void on_readable(uv_poll_t *p, int status, int events)
{
	struct fwdroplog *d = p->data;
	(void)events;
	if (status < 0)
		return;
	static char buf[1 << 16];
	for (int i = 0; i < 256; i++) { /* bounded: the loop has grants to serve too */
		ssize_t n = recv(d->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && errno == ENOBUFS) {
			d->overruns++; /* the lost messages show as a gap in the sequence */
			continue;
		}
		if (n <= 0)
			break;
		nflog_handle_packet(d->h, buf, (int)n);
	}
	fflush(d->out);
}

int fwdroplog_metrics(const struct fwdroplog *d, char *out, size_t cap)
{
	size_t n = (size_t)snprintf(out, cap,
	                            "# HELP moatfw_droplog_packets_total Packets the drop log was "
	                            "told of, by reason (connect: new flows let through).\n"
	                            "# TYPE moatfw_droplog_packets_total counter\n");
	for (int r = 0; r < R_N && n < cap; r++)
		n += (size_t)snprintf(out + n, cap - n,
		                      "moatfw_droplog_packets_total{reason=\"%s\"} %llu\n",
		                      reason_name[r], (unsigned long long)d->packets[r]);
	n += (size_t)snprintf(out + n, n < cap ? cap - n : 0,
	                      "# HELP moatfw_droplog_lines_total Lines written, by reason.\n"
	                      "# TYPE moatfw_droplog_lines_total counter\n");
	for (int r = 0; r < R_N && n < cap; r++)
		n += (size_t)snprintf(out + n, cap - n,
		                      "moatfw_droplog_lines_total{reason=\"%s\"} %llu\n",
		                      reason_name[r], (unsigned long long)d->lines[r]);
	if (n < cap)
		n += (size_t)snprintf(
		    out + n, cap - n,
		    "# HELP moatfw_droplog_lost_total Messages the kernel could not deliver "
		    "(sequence gaps).\n# TYPE moatfw_droplog_lost_total counter\n"
		    "moatfw_droplog_lost_total %llu\n",
		    (unsigned long long)d->lost);
	return n < cap ? (int)n : MOAT_ESPACE;
}

/* Once a second: what the rate held back, the lost messages, the metrics. */
static void on_tick(uv_timer_t *t)
{
	struct fwdroplog *d = t->data;
	char ts[40], m[4096];
	isotime_now(ts, sizeof(ts));
	for (int r = 0; r < R_N; r++) {
		if (!d->held[r])
			continue;
		fprintf(d->out,
		        "{\"ts\":\"%s\",\"v\":1,\"event\":\"suppressed\",\"reason\":\"%s\","
		        "\"count\":%llu}\n",
		        ts, reason_name[r], (unsigned long long)d->held[r]);
		d->held[r] = 0;
	}
	if (d->lost != d->lost_said) {
		fprintf(d->out, "{\"ts\":\"%s\",\"v\":1,\"event\":\"lost\",\"count\":%llu}\n", ts,
		        (unsigned long long)(d->lost - d->lost_said));
		d->lost_said = d->lost;
	}
	fflush(d->out);
	if (fwdroplog_metrics(d, m, sizeof(m)) >= 0)
		fwmetrics_extra(m);
}

static int fail(char *err, size_t errlen, const char *what)
{
	snprintf(err, errlen, "drop log: %s: %s", what, strerror(errno ? errno : EIO));
	return MOAT_EIO;
}

int fwdroplog_start(uv_loop_t *loop, uint16_t group, const char *path, struct ledger **ledger,
                    const struct fwnft_setup *setup, const char *label, struct fwdroplog **out,
                    char *err, size_t errlen)
{
	struct fwdroplog *d = calloc(1, sizeof(*d));
	if (!d)
		return fail(err, errlen, "out of memory");
	d->ledger = ledger;
	d->setup = setup;
	d->label = label;
	for (int r = 0; r < R_N; r++)
		d->tokens[r] = FWDROPLOG_BURST;
	d->refilled_ms = now_ms();
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0 || !(d->out = fdopen(fd, "a"))) {
		int rc = fail(err, errlen, path);
		if (fd >= 0)
			close(fd);
		free(d);
		return rc;
	}
	errno = 0;
	if (!(d->h = nflog_open()))
		goto nflog_fail;
	/* Old kernels route AF_INET/AF_INET6 to nfnetlink_log only after these; new ones ignore
	 * them. */
	nflog_unbind_pf(d->h, AF_INET);
	nflog_bind_pf(d->h, AF_INET);
	nflog_unbind_pf(d->h, AF_INET6);
	nflog_bind_pf(d->h, AF_INET6);
	if (!(d->gh = nflog_bind_group(d->h, group)) ||
	    nflog_set_mode(d->gh, NFULNL_COPY_PACKET, COPY_BYTES) < 0 ||
	    nflog_set_flags(d->gh, NFULNL_CFG_F_SEQ) < 0 ||
	    /* each message at once: the kernel's default holds up to 100 for a second, and
	     * what it holds when moat-fw stops is lost */
	    nflog_set_qthresh(d->gh, 1) < 0 || nflog_callback_register(d->gh, on_packet, d) < 0)
		goto nflog_fail;
	d->fd = nflog_fd(d->h);
	int rcv = RCVBUF;
	/* CAP_NET_ADMIN lets the buffer pass rmem_max: a burst waits here, not lost */
	if (setsockopt(d->fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcv, sizeof(rcv)) < 0)
		setsockopt(d->fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	uv_poll_init(loop, &d->poll, d->fd);
	d->poll.data = d;
	uv_poll_start(&d->poll, UV_READABLE, on_readable);
	uv_timer_init(loop, &d->tick);
	d->tick.data = d;
	uv_timer_start(&d->tick, on_tick, 1000, 1000);
	*out = d;
	return 0;
nflog_fail:
	snprintf(err, errlen,
	         "drop log: cannot bind nfnetlink_log group %u (in use by another program? "
	         "--log-group N): %s",
	         group, strerror(errno ? errno : EIO));
	if (d->gh)
		nflog_unbind_group(d->gh);
	if (d->h)
		nflog_close(d->h);
	fclose(d->out);
	free(d);
	return MOAT_EIO;
}

void fwdroplog_close(struct fwdroplog *d)
{
	if (!d)
		return;
	fflush(d->out);
	fclose(d->out);
	nflog_unbind_group(d->gh);
	nflog_close(d->h);
	free(d);
}
