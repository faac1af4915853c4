/* moatd's configuration: the YAML file (parsed with libfyaml) and the quick-use flags both end
 * up in one struct config, validated here with file:line errors. The struct is immutable once
 * loaded; policy_load turns it into a policy snapshot.
 *
 * Config format, version 1 (every key optional unless marked):
 *   listen: ["127.0.0.1:53", "[::1]:53"]      # ADDR:PORT, port defaults to 53
 *   upstreams: ["192.0.2.53:53"]              # required (here or by --upstream)
 *   upstream_source: 192.0.2.10               # source address of upstream queries
 *   upstream_timeout_ms: 1000                 # per attempt; each upstream is tried in turn
 *   upstream_attempts: 3                      # attempts in all before SERVFAIL
 *   tcp_idle_ms: 10000                        # idle TCP client connections are closed
 *   tcp_max_clients: 1024
 *   tcp_max_queued: 65536                     # reply bytes queued per TCP connection; above
 *                                             # it (or tcp_max_inflight) moatd stops reading
 *   tcp_max_inflight: 64                      # queries in flight per TCP connection
 *   inflight_max: 2048                        # questions waiting for an upstream, in all
 *   inflight_per_client: 256                  # of them per client (IPv4, IPv6 /64); over
 *                                             # either: SERVFAIL with EDE 14 (Not Ready)
 *   log: {file: /var/log/moat/queries.jsonl}  # "-" or absent: stdout; /dev/null: none
 *   log_bytes_per_s: 1048576                  # query log budget (moat/log.h's "suppressed"
 *                                             # line counts what is over it); 0: unbounded
 *   highrisk: [extra-highrisk.txt]            # more names always denied (the shipped list stays)
 *   blocked_ranges: [extra-ranges.txt]        # more answer ranges refused (shipped list stays)
 *   zones_dir: /usr/share/moat                # where the shipped lists are (see moat/zonesdir.h)
 *   user: moat                                # drop to this user after binding (default:
 *                                             # moat, the user moat-fw admits by default;
 *                                             # without it: nobody, or with firewall_socket
 *                                             # no start; root: stay)
 *   workers: 1                                # threads, each with its own loop and cache share
 *   seccomp: true                             # system-call filter after start-up
 *   ratelimit_qps: 10000                      # per client (IPv4, IPv6 /64); 0: no limit
 *   ratelimit_burst: 0                        # bucket size; 0: same as ratelimit_qps
 *   ratelimit_action: refuse                  # refuse (REFUSED) or drop
 *   cache_size_mb: 32                         # answer cache; 0 turns it off
 *   cache_min_ttl: 0                          # TTL clamps for cached answers (seconds)
 *   cache_max_ttl: 86400
 *   serve_stale: 0                            # s an expired answer may be served when no
 *                                             # upstream answers (RFC 8767); 0: never
 *   firewall_socket: /run/moat/fw.sock        # grant through moat-fw before answering
 *   firewall_timeout_ms: 3000                 # no ack in time: SERVFAIL (fail closed)
 *   firewall_fail_open: false                 # true: answer anyway when moat-fw is away
 *   control: /run/moat/ctl.sock               # moatctl's socket (mode 0660); absent: none
 *   control_group: moat                       # group of the control socket
 *   metrics: 127.0.0.1:9153                   # Prometheus endpoint; absent: off
 *   dnstap: {file: /var/log/moat/dnstap.fstrm}  # or {socket: PATH}: dnstap messages
 *   agents:                                   # required, at least one
 *     - name: ci-42                           # required, [A-Za-z0-9_.-]{1,63}
 *       clients: [10.0.0.0/24, "2001:db8::/64"]   # required
 *       allow: [zones/allow/example.txt]      # allowlist files
 *       deny: nxdomain                        # nxdomain | refused | sinkhole
 *       sinkhole: [240.0.0.1, "100::1"]       # addresses for deny: sinkhole (the defaults;
 *                                             # one IPv4 and/or one IPv6, the other default)
 *       sinkhole_ttl: 60
 *       strict_chain: false                   # every CNAME/DNAME target must be allowed too
 *       allow_private: false                  # private/shared answers allowed for this agent
 *       mode: enforce                         # enforce | audit (answer and log "would-deny")
 *       on_unknown: deny                      # deny | ask (hold the query; moatctl allow/deny)
 *       ask_timeout_ms: 10000                 # no answer in time: deny
 *       ask_max_pending: 64                   # names waiting per agent; more: denied at once
 *       forward: [...]                        # forward zones of this agent (as below)
 *       budget:                               # the label budget (moat/budget.h)
 *         bytes: 4096                         # new label bytes per wildcard zone and window;
 *                                             # 0: off (unless a zone below sets one)
 *         window_s: 3600                      # the sliding window
 *         zones: {"*.cdn.example": 16384}     # per wildcard rule: its own bytes (0: off)
 *       qtypes: [A, AAAA, HTTPS, SVCB, CNAME, TXT, MX, SRV]   # the default; [any]: every type
 *       answer_max_bytes: 8192                # the largest answer handed out; 0: no cap
 *       answer_max_records: 64                # answer + authority records; 0: no cap
 *       answer_txt: true                      # false: answers holding TXT records refused
 *   forward:                                  # forward zones: the longest matching one wins
 *     - zone: corp.internal                   # required; UTF-8 or A-labels
 *       upstreams: ["10.1.0.53"]              # required
 *       timeout_ms: 1000                      # default: upstream_timeout_ms
 *       attempts: 3                           # default: upstream_attempts
 *       allow_private: true                   # answers may hold private addresses
 *   local_data: ["db.corp.internal A 10.1.2.3"]   # answered by moatd (A, AAAA, CNAME, TXT)
 *   hosts: [/etc/moat/hosts]                  # hosts(5) files answered the same way
 *   rpz:                                      # RPZ zones (moat/rpz.h), by file or transfer
 *     - {name: feed, file: zones/feed.rpz}    # name: [A-Za-z0-9_.-]{1,63}
 *     - name: threats
 *       primary: 192.0.2.1:53                 # AXFR/IXFR from here; NOTIFY only from here
 *       zone: rpz.example.                    # required with primary
 *       tsig: {name: k1, algorithm: hmac-sha256, secret: BASE64}
 *       max_triggers: 1000000                 # more and the zone is refused (file or transfer)
 *   highrisk_rpz: [threats]                   # RPZ zones of high-risk names
 *   (an agent's allow: entry "rpz:NAME" takes the zone's rpz-passthru triggers)
 *   policy_pubkey: /etc/moat/policy.key.pub   # load only compiled and RPZ files signed with it
 *   upstream_dnssec_ok: false                 # the DO bit of moatd's own upstream queries
 *                                             # (never the client's)
 *   policy_verify: lazy                       # lazy | full | quick: when a compiled
 *                                             # file's blocks are checked (moat/policy_file.h)
 * An allow: or highrisk: entry ending in .mpol is a compiled policy (moat/policy_file.h).
 */
#ifndef MOAT_CONFIG_H
#define MOAT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "moat/netaddr.h"

#define CONFIG_NAME_MAX 64
#define CONFIG_WORKERS_MAX 64u
#define CONFIG_TTL_MAX 86400u    /* of a sinkhole answer */
#define CONFIG_BUDGET_ZONES 16   /* budget.zones overrides per agent */
#define CONFIG_QTYPES_MAX 32     /* qtypes per agent */
#define CONFIG_BUDGET_BYTES 4096 /* the default label budget (moat/budget.h) */
#define CONFIG_BUDGET_WINDOW 3600
#define CONFIG_BUDGET_WINDOW_MAX (7u * 86400)
#define CONFIG_ANSWER_BYTES 8192
#define CONFIG_ANSWER_RECORDS 64

enum deny_form {
	DENY_NXDOMAIN = 0,
	DENY_REFUSED,
	DENY_SINKHOLE,
};

/* What an agent does with a name no allowlist allows: enforce denies it; audit answers it as the
 * upstream answers and logs the decision enforce would have made ("would-deny"). Audit never
 * relaxes the always-deny checks (high-risk names, IP literals, blocked addresses). */
enum agent_mode {
	AGENT_ENFORCE = 0,
	AGENT_AUDIT,
};

/* What an enforcing agent does with a name no rule decides: deny it, or hold the query and ask
 * (moatctl watch shows it; moatctl allow / deny answer it; ask_timeout_ms without an answer:
 * deny). At most ask_max_pending names wait per agent; more are denied at once. */
enum agent_unknown {
	UNKNOWN_DENY = 0,
	UNKNOWN_ASK,
};
#define CONFIG_ASK_TIMEOUT_MS 10000
#define CONFIG_ASK_PENDING 64

/* A forward zone: names at or below zone go to its own upstreams (after the policy allowed
 * them: a zone allows nothing by itself), with their own timeouts and failover. */
struct config_forward {
	uint8_t zone[256];                  /* lower-cased wire name */
	struct sockaddr_storage *upstreams; /* owned */
	size_t nupstreams;
	uint32_t timeout_ms, attempts; /* 0: the global upstream_timeout_ms / upstream_attempts */
	bool allow_private;            /* private addresses may come back from this zone */
	int line;
};

/* An RPZ zone: from a file, or transferred from a primary (with TSIG if tsig_name is set). */
struct config_rpz {
	char name[CONFIG_NAME_MAX];
	char *file;                      /* owned; NULL: transferred */
	uint8_t zone[256];               /* lower-cased wire origin; zone[0] == 0: unset */
	struct sockaddr_storage primary; /* ss_family 0: none */
	char tsig_name[256], tsig_alg[64];
	char *tsig_secret;     /* owned; base64 */
	uint32_t max_triggers; /* a zone with more is refused (the last one stays) */
	int line;
};

/* One wildcard rule's own budget (budget.zones): the rule "*.cdn.example" has zone
 * cdn.example (lower-cased wire). */
struct config_budget_zone {
	uint8_t zone[256];
	uint32_t bytes; /* 0: no budget under it */
	int line;
};

/* An agent's label budget (moat/budget.h). zones is owned by the config; a loaded snapshot's
 * agent owns its own copy (policy_load), so snapshots never point into a config. */
struct config_budget {
	uint32_t bytes;                   /* new label bytes per wildcard zone and window; 0: off */
	uint32_t window_s;                /* 1..CONFIG_BUDGET_WINDOW_MAX */
	struct config_budget_zone *zones; /* up to CONFIG_BUDGET_ZONES */
	size_t nzones;
};

/* What an agent may ask and be handed (moat/channel.h). */
struct config_channel {
	uint16_t qtypes[CONFIG_QTYPES_MAX]; /* nqtypes 0: channel_default_qtypes */
	size_t nqtypes;
	bool any_qtype;              /* qtypes: [any] */
	uint32_t answer_max_bytes;   /* 0: no cap */
	uint32_t answer_max_records; /* 0: no cap */
	bool answer_no_txt;          /* answer_txt: false */
};

/* max_triggers when the zone does not say: ~55 bytes a trigger held (twice that while an IXFR
 * patches a copy) and ~7 us a trigger to load here (build/bench-rpz-ixfr), so the default zone
 * holds ~53 MiB and fits the 10 s transfer deadline; see README, RPZ. */
#define CONFIG_RPZ_MAX_TRIGGERS 1000000u

struct config_agent {
	char name[CONFIG_NAME_MAX];
	struct cidr *clients; /* owned */
	size_t nclients;
	char **allow_files; /* owned, each owned */
	size_t nallow;
	enum deny_form deny;
	uint8_t sink4[4];
	uint8_t sink6[16];
	uint32_t sink_ttl;
	bool strict_chain;
	bool allow_private;
	enum agent_mode mode;
	enum agent_unknown on_unknown;
	uint32_t ask_timeout_ms;  /* 100..600000 */
	uint32_t ask_max_pending; /* 1..100000 */
	/* Where it was written (0: not from a file), for errors found after parsing. */
	int line;
	int *client_lines; /* owned: one per clients entry */
	int *allow_lines;  /* owned: one per allow_files entry */
	int sink_line;     /* of an explicit sinkhole: list; 0 when the defaults apply */
	struct config_forward *forwards; /* owned: this agent's forward zones */
	size_t nforwards;
	char **allow_rpz; /* owned: names of RPZ zones in allow: ("rpz:NAME") */
	int *allow_rpz_lines;
	size_t nallow_rpz;
	struct config_budget budget;
	struct config_channel channel;
};

/* Lines of the top-level values checked after parsing (config_check.c). Each array belongs to
 * the cfg array recorded beside it: flags that replace a list leave its lines unused. */
struct config_where {
	char *file;                            /* owned; NULL: no config file */
	int *listen_lines, *upstream_lines;    /* owned */
	const void *listen_for, *upstream_for; /* the arrays they describe */
	int cache_min_ttl, user, log;
};

struct config {
	struct sockaddr_storage *listen; /* owned */
	size_t nlisten;
	struct sockaddr_storage *upstreams; /* owned */
	size_t nupstreams;
	struct sockaddr_storage upstream_source;
	bool has_upstream_source;
	uint32_t upstream_timeout_ms;
	uint32_t upstream_attempts;
	uint32_t tcp_idle_ms;
	uint32_t tcp_max_clients;

	/* Abuse limits (issue 12). */
	uint32_t tcp_max_queued;   /* bytes of answers queued on one TCP connection */
	uint32_t tcp_max_inflight; /* queries in flight on one TCP connection */
	uint32_t inflight_max;     /* questions waiting for an upstream, in all */
	uint32_t inflight_per_client;

	uint32_t workers;          /* 1..CONFIG_WORKERS_MAX */
	char *log_file;            /* owned; NULL means stdout */
	char *user;                /* owned; NULL: keep the starting user */
	bool seccomp;              /* install the system-call filter (default true) */
	uint32_t rl_qps, rl_burst; /* rl_qps 0: no rate limit */
	uint32_t log_budget;       /* query log bytes a second; 0: unbounded */
	bool rl_drop;              /* over the limit: drop (true) or answer REFUSED */
	size_t cache_bytes;        /* 0: no cache */
	uint32_t cache_min_ttl, cache_max_ttl;
	uint32_t serve_stale; /* seconds past expiry (RFC 8767); 0: off */
	char *fw_socket;      /* owned; NULL: no firewall companion */
	uint32_t fw_timeout_ms;
	bool fw_fail_open;
	char **highrisk_files; /* owned */
	size_t nhighrisk;
	char **range_files; /* owned */
	size_t nranges;
	struct config_agent *agents; /* owned */
	size_t nagents;
	struct config_where where;
	struct config_forward *forwards; /* owned: forward zones of every agent */
	size_t nforwards;
	/* Local answers (local.c parses them at policy load): "name TYPE data" lines and
	 * hosts(5) files, each with the config line it came from. */
	char **local_data; /* owned */
	int *local_lines;  /* owned */
	size_t nlocal;
	char **hosts_files; /* owned */
	int *hosts_lines;   /* owned */
	size_t nhosts;
	/* Lint the allowlists at load only up to this many patterns in all (0: always). The lint
	 * costs about a microsecond a pattern; moatd sets a limit so a list of a million names
	 * starts as fast as before, and --check always lints everything. */
	size_t lint_max_patterns;
	/* --check: keep reading past an error of the config or a policy file and report up to
	 * this many, one per line (0 or 1: stop at the first, as a start or reload does). */
	unsigned check_max_errors;
	/* Compiled and signed policy (policy_file.h, policy_sig.h): with a key, only signed
	 * compiled files load; quick checks a compiled file's header and small sections only. */
	bool has_policy_pubkey;
	uint8_t policy_pubkey[32];
	bool policy_verify_quick, policy_verify_full; /* neither: lazy */
	bool upstream_dnssec_ok; /* the DO bit moatd sets upstream, whatever the client set */
	/* operating the daemon (control.c, metrics_http.c, dnstap_out.c) */
	char *control_path;  /* owned; NULL: no control socket */
	char *control_group; /* owned; NULL: the group moatd starts with */
	struct sockaddr_storage metrics_addr;
	bool has_metrics;
	char *dnstap_path;      /* owned; NULL: no dnstap */
	bool dnstap_socket;     /* dnstap_path is a Frame Streams socket, not a file */
	struct config_rpz *rpz; /* owned: RPZ zones */
	size_t nrpz;
	char **highrisk_rpz; /* owned: names of RPZ zones of high-risk names */
	int *highrisk_rpz_lines;
	size_t nhighrisk_rpz;
	char *state_dir; /* owned; NULL: no runtime agents (agentstore.c) */
};

/* A numeric setting (config_limits.c): its YAML key, its flag without "--" (NULL: none), the
 * unit its flag's message names, its range and default, and where it lives in struct config. */
struct config_limit {
	const char *key, *flag, *unit;
	uint32_t min, max, def;
	size_t off; /* offsetof a uint32_t in struct config, or CONFIG_LIMIT_MB */
};
#define CONFIG_LIMIT_MB ((size_t)-1) /* cache_size_mb: cache_bytes, in MB */

/* The setting of a YAML key (len bytes) or of a flag; NULL if it is not a numeric one. */
const struct config_limit *config_limit_key(const char *key, size_t len);
const struct config_limit *config_limit_flag(const char *flag);
/* The i-th numeric setting, NULL past the last. */
const struct config_limit *config_limit_nth(size_t i);

/* Store v (already within the range) as the setting's value. */
void config_limit_set(struct config *cfg, const struct config_limit *l, uint32_t v);

/* Every numeric setting to its default (config_init). */
void config_limits_default(struct config *cfg);

/* Every numeric setting within its range: 0, or MOAT_EINVAL and "KEY must be MIN..MAX". */
int config_limits_check(const struct config *cfg, char *err, size_t errlen);

/* A deny form by name (nxdomain, refused, sinkhole; len bytes): 0 or MOAT_EINVAL. */
int config_deny_parse(const char *s, size_t len, enum deny_form *out);

/* An agent mode by name (enforce, audit; len bytes): 0 or MOAT_EINVAL. */
int config_mode_parse(const char *s, size_t len, enum agent_mode *out);

/* The default sinkhole answers, 240.0.0.1 (reserved, class E) and 100::1 (discard-only, RFC
 * 6666): no kernel delivers them to the local host, where 0.0.0.0 and :: reach the client's own
 * loopback on Linux (its 127.0.0.1 and ::1 services), and both lie in the always-deny ranges, so
 * moat-fw drops a packet sent there and refuses them as grants, in either placement. */
extern const uint8_t config_sink4_default[4];
extern const uint8_t config_sink6_default[16];

/* A new agent's defaults (deny nxdomain, the default sinkhole addresses, TTL 60, the default
 * label budget, qtypes and answer caps). */
void config_agent_init(struct config_agent *a);

/* Fill cfg with defaults (no listeners, no upstreams, no agents, shipped zone files from
 * zonesdir_default()). Call before config_load_file or before filling it from flags. */
void config_init(struct config *cfg);

/* Point the shipped lists of cfg (the first entry of its highrisk and blocked-range lists,
 * placed there by config_init) at dir (moat/zonesdir.h). Returns 0 or MOAT_ENOMEM/MOAT_EINVAL. */
int config_set_zones_dir(struct config *cfg, const char *dir);

/* Check what parsing cannot: at least one agent, upstream and listener, unique agent names,
 * and the sanity checks of config_check.c (with the file:line they come from).
 * Returns 0 or MOAT_EINVAL with err set. */
int config_validate(const struct config *cfg, char *err, size_t errlen);

/* The sanity checks across values (config_check.c): identical agent ranges, a listen address
 * twice, an upstream that is moatd itself, cache_min_ttl above cache_max_ttl, a user that does
 * not exist, a log file in a missing directory. 0 or MOAT_EINVAL with "file:line: reason". */
int config_check_sanity(const struct config *cfg, char *err, size_t errlen);

/* How many errors --check reports in one run (check_max_errors). */
#define CONFIG_CHECK_ERRORS 20

/* Write err (one error a line, as the --check loaders collect them) to f, each line after
 * prefix ("moatd: "). */
void config_print_errors(FILE *f, const char *prefix, const char *err);

/* "file:line" of a value for messages ("--listen" style text when line is 0). */
void config_where_text(const struct config *cfg, int line, const char *flag, char *out, size_t cap);

/* Release everything cfg owns; cfg is left as after config_init without defaults. */
void config_free(struct config *cfg);

/* An agent name: 1 to CONFIG_NAME_MAX - 1 of A-Z a-z 0-9 _ . - */
bool config_name_ok(const char *s, size_t len);

/* Add a string to an owned string array (for flags). Returns 0 or MOAT_ENOMEM. */
int config_strv_push(char ***v, size_t *n, const char *s);

#endif
