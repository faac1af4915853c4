/* Name policy: which names an agent may resolve, and why a name was denied.
 *
 * A policy_set is a set of patterns from allowlist (or high-risk) files, never changed once a
 * snapshot holds it (an RPZ transfer edits a clone, policy_set_clone):
 *   example.com      that name only
 *   *.example.com    every name below example.com, at any depth, not example.com itself
 * An allowlist line may name ports after the pattern (`api.example.com tcp/443`,
 * `*.pypi.org tcp/80,443`, `ntp.example.net udp/123`): the grant for its answers then opens only
 * those. A line without ports means any port. A pattern listed on several lines gets the union
 * of their ports (any port if one of them names none).
 * Patterns are stored as lower-cased wire names in a SipHash-keyed open-addressing table, so a
 * match costs one hash probe for the exact name plus one per ancestor: O(labels), independent of
 * the number of patterns.
 *
 * A policy is the snapshot moatd runs with: its agents (each with its allowlists and deny form),
 * the high-risk names and the address guard. It is reference-counted and never changed once
 * built: a reload, a runtime agent edit (agent_edit.c) or an RPZ transfer builds a new snapshot
 * and swaps it, so a bad file leaves the running policy in place. Decisions (policy_decide.c)
 * are pure functions of (policy, agent, name). */
#ifndef MOAT_POLICY_H
#define MOAT_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "moat/config.h"
#include "moat/forward.h"

struct policy_set;
struct budget_share;
struct rpz_data;
struct addrguard;
struct local_data;

#define POLICY_PORTS_MAX 16 /* (protocol, port) pairs per pattern */
#define POLICY_PROTO_TCP 6
#define POLICY_PROTO_UDP 17

struct policy_port {
	uint8_t proto; /* POLICY_PROTO_TCP or POLICY_PROTO_UDP */
	uint16_t port; /* 1..65535 */
};

/* The ports of a rule: sorted by (proto, port), no duplicates, 1..POLICY_PORTS_MAX of them. */
struct policy_ports {
	uint8_t n;
	struct policy_port p[POLICY_PORTS_MAX];
};

/* Where a pattern came from, to explain a decision ("allow/example.txt:12"), and what it opens. */
struct policy_rule {
	const char *file; /* borrowed from the set; NULL if no rule matched */
	uint32_t line;
	bool wildcard;
	const struct policy_ports *ports; /* borrowed from the set; NULL: any port */
	const uint8_t *at; /* the suffix of the matched name the pattern names (borrowed from the
	                    * caller's name): a longer one is a nearer match */
};

/* Parse the port part of a line (the text after the pattern: tokens `tcp/N[,N...]` or
 * `udp/N[,N...]` separated by blanks) into *out. Returns 0, or MOAT_EINVAL/MOAT_ELIMIT with a
 * reason (without file:line) in why. Pure. */
int policy_ports_parse(const char *text, size_t len, struct policy_ports *out, char *why,
                       size_t whylen);

/* Add add's pairs to into (kept sorted and unique). 0 or MOAT_ELIMIT (into is then partial). */
int policy_ports_union(struct policy_ports *into, const struct policy_ports *add);

/* "tcp/80,443 udp/123", or "any" for NULL. Returns the length or MOAT_ESPACE. */
int policy_ports_format(const struct policy_ports *l, char *out, size_t cap);

/* A new empty set. Ownership: caller frees with policy_set_free. NULL on allocation failure.
 * Sets are reference-counted: policy_set_ref takes one more reference (snapshots that share an
 * agent's set), policy_set_free drops one and frees the set with the last. */
struct policy_set *policy_set_new(void);
struct policy_set *policy_set_ref(struct policy_set *set);
void policy_set_free(struct policy_set *set);

/* Add one pattern (text, with or without "*." and trailing dot). file/line are recorded for
 * explanations; file is copied. Returns 0, MOAT_EINVAL (bad pattern) or MOAT_ENOMEM. */
int policy_set_add(struct policy_set *set, const char *pattern, size_t len, const char *file,
                   uint32_t line);

/* Add every pattern of a file: one per line, optionally followed by ports, '#' starts a comment,
 * blank lines skipped. On the first bad line returns MOAT_EINVAL (MOAT_ELIMIT for too many ports)
 * with err = "path:line: reason". */
int policy_set_load_file(struct policy_set *set, const char *path, char *err, size_t errlen);

/* Add or remove one pattern given as a lower-cased wire name (wild: "*.name"), for sources
 * that are not text files (RPZ zones). Adding a pattern already listed keeps the first rule.
 * add: 0, MOAT_EINVAL (a '*' inside a label), MOAT_ENOMEM or MOAT_ELIMIT. remove: 0 or
 * MOAT_ENOENT (not listed); the name's bytes stay in the arena until the set is copied. */
int policy_set_add_wire(struct policy_set *set, const uint8_t *lname, bool wild, const char *file,
                        uint32_t line);
int policy_set_remove_wire(struct policy_set *set, const uint8_t *lname, bool wild);
bool policy_set_has_wire(const struct policy_set *set, const uint8_t *lname, bool wild);

/* A copy of set that can be patched while the original is being read by other threads (an
 * IXFR patches a copy of its zone's set). Ownership: caller frees with policy_set_free.
 * NULL on allocation failure. Not linted. */
struct policy_set *policy_set_clone(const struct policy_set *set);
/* The same, from n lines in memory (a runtime agent's patterns, moat/agentstore.h): label
 * stands for the file name in rules and errors ("label:line: reason"). */
int policy_set_load_lines(struct policy_set *set, const char *const *lines, size_t n,
                          const char *label, char *err, size_t errlen);

/* Refuse ports in the files loaded into this set from now on (the high-risk list: a port there
 * would read as "high-risk only on this port"). */
void policy_set_forbid_ports(struct policy_set *set);

/* Match a lower-cased wire name. On a match fills *rule (if not NULL) and returns true.
 * An exact pattern wins over a wildcard; the nearest wildcard wins over farther ones. */
bool policy_set_match(const struct policy_set *set, const uint8_t *lname, struct policy_rule *rule);
/* A match of lname in set comes next: hash it now and start loading its slot (a set of 100k
 * names is larger than the caches), so the checks done meanwhile hide the memory's latency.
 * The match reuses the hash. Only a set built in memory; nothing else changes. */
void policy_set_prefetch(const struct policy_set *set, const uint8_t *lname);

/* A lower-cased wire name with its wire length and label count, measured once for the several
 * sets one decision asks (each would walk the name twice). policy_name_of: false if lname is
 * not a readable wire name (it then matches nothing). */
struct policy_name {
	const uint8_t *lname;
	size_t len;     /* root byte included */
	unsigned depth; /* labels */
};
bool policy_name_of(const uint8_t *lname, struct policy_name *n);
bool policy_set_match_name(const struct policy_set *set, const struct policy_name *n,
                           struct policy_rule *rule);
void policy_set_prefetch_name(const struct policy_set *set, const struct policy_name *n);

/* The nearest wildcard on a proper ancestor of lname ("*.b.c" for "a.b.c" or for "*.a.b.c"),
 * ignoring an exact pattern for lname itself. */
bool policy_set_match_below(const struct policy_set *set, const uint8_t *lname,
                            struct policy_rule *rule);

/* Match more after set: policy_set_match and policy_set_match_below try set, then more (and
 * what was chained to it before). set takes ownership of more. For the high-risk names, where
 * the shipped text list and compiled files (moat/policy_file.h) are searched together. */
void policy_set_chain(struct policy_set *set, struct policy_set *more);

/* Number of patterns (of the set and what is chained to it). */
size_t policy_set_count(const struct policy_set *set);

/* Every distinct name of the set, in no particular order, with its exact and wildcard rules
 * (NULL where that form is not listed). For the lint; not for the query path. */
typedef void (*policy_set_each_cb)(void *ctx, const uint8_t *lname, const struct policy_rule *exact,
                                   const struct policy_rule *wild);
void policy_set_each(const struct policy_set *set, policy_set_each_cb cb, void *ctx);

/* Report lines listed twice as they are added: fn(ctx, file, line, what) with the text of the
 * warning (fn NULL stops it). The lint's way in (policy_set_lint_to, moat/policy_lint.h). */
typedef void (*policy_set_dup_fn)(void *ctx, const char *file, uint32_t line, const char *what);
void policy_set_on_duplicate(struct policy_set *set, policy_set_dup_fn fn, void *ctx);

/* Keep loading past bad lines: each one's "file:line: reason" goes to fn(ctx, msg) and the load
 * goes on with the next line (fn NULL: the first bad line stops it, the default). What --check
 * uses to report every error of a file in one run; allocation failures still stop a load. */
typedef void (*policy_set_err_fn)(void *ctx, const char *msg);
void policy_set_on_error(struct policy_set *set, policy_set_err_fn fn, void *ctx);

struct policy_agent {
	struct config_agent cfg; /* copied scalars; pointer members borrowed from nothing (NULL) */
	struct cidr *clients;    /* owned copy */
	size_t nclients;
	struct policy_set *allow; /* owned */
	struct forward_table fwd; /* owned: this agent's forward zones */
	size_t *allow_rpz;        /* owned: indices into policy.rpz of its RPZ allow zones */
	size_t nallow_rpz;
	bool runtime; /* added by `moatctl agent add` (agent_edit.c), not the config */
	/* Decided at runtime (moatctl allow / deny, agent_edit_decided): one reference each in
	 * every snapshot that points at them; NULL: none. A deny here wins over the allowlists,
	 * an allow here adds to them. */
	struct policy_set *decided_allow, *decided_deny;
};

struct policy {
	int refs;                    /* atomic: workers share snapshots */
	struct policy_agent *agents; /* owned */
	size_t nagents;
	struct policy_set *highrisk; /* owned */
	struct addrguard *guard;     /* owned */
	struct policy_lint *lint;    /* owned: the warnings of this load (policy_lint.h) */
	bool lint_skipped;           /* more patterns than cfg->lint_max_patterns: not linted */
	struct forward_table fwd;    /* owned: the global forward zones */
	struct local_data *local;    /* owned: local answers (moat/local.h); NULL: none */
	/* RPZ zones (policy_rpz.c), in cfg->rpz order: each holds a reference (every snapshot has
	 * its own array). highrisk_rpz is owned by the loaded snapshot, borrowed by edited ones. */
	struct rpz_data **rpz;
	size_t nrpz;
	size_t *highrisk_rpz;
	size_t nhighrisk_rpz;
	struct policy_clients *byclient; /* owned: agent by client address (policy_clients.h) */
	/* A snapshot edited at runtime (agent_edit.c) borrows, through a reference to base (the
	 * snapshot policy_load built), everything but the runtime agents: highrisk, guard, lint,
	 * fwd, local, highrisk_rpz and agents[0..nconfig), shallow copies of base's; rpz[] is
	 * its own array of references (policy_with_rpz swaps one entry). */
	struct policy *base; /* one reference; NULL: this is a loaded snapshot */
	size_t nconfig;      /* agents from the config; the runtime ones follow */
	/* The agents' label budgets (moat/budget_share.h), by agent index: one reference each,
	 * taken by every constructor (budget_share_attach). NULL in snapshots built by hand. */
	struct budget_share **budgets;
};

/* The RPZ part of policy_load: reads the file zones, makes empty zones for the transferred ones
 * (filled by rpz_xfr.c), resolves the agents' "rpz:NAME" and highrisk_rpz references. */
int policy_rpz_load(const struct config *cfg, struct policy *p, char *err, size_t errlen);

/* A new snapshot that is cur (with its runtime agents) with RPZ zone idx replaced by d (a
 * reference is taken): the other zones are shared, the rest is borrowed from cur's base. Cheap
 * (no file read). Ownership: one reference, released with policy_unref. NULL on allocation
 * failure. */
struct policy *policy_with_rpz(struct policy *cur, size_t idx, struct rpz_data *d);

/* For --check: each RPZ zone, its kind and (files) its triggers, one line each, to out. */
void policy_rpz_report(const struct config *cfg, const struct policy *p, FILE *out);

/* Release what the snapshot owns of its RPZ part (policy_unref calls it). */
void policy_rpz_release(struct policy *p);

/* The agent's RPZ allow zones / the high-risk zones matched on lname (*nodata: the trigger's
 * action is NODATA, not NXDOMAIN). Pure. */
bool policy_rpz_allows(const struct policy *p, const struct policy_agent *agent,
                       const uint8_t *lname, struct policy_rule *rule);
bool policy_rpz_highrisk(const struct policy *p, const uint8_t *lname, struct policy_rule *rule,
                         bool *nodata);

/* Build a snapshot from a validated config: reads every allowlist, high-risk and range file.
 * Ownership: *out has one reference; release with policy_unref. On error nothing is returned,
 * err holds "file:line: reason". */
int policy_load(const struct config *cfg, struct policy **out, char *err, size_t errlen);

/* Allow patterns over every agent (for status lines and metrics). */
size_t policy_allow_count(const struct policy *p);

struct policy *policy_ref(struct policy *p);
void policy_unref(struct policy *p);

/* The agent whose client range is the most specific one containing the address, or NULL
 * (then the client is REFUSED: moat is never an open resolver). */
const struct policy_agent *policy_agent_for(const struct policy *p, const struct sockaddr *client);

enum policy_verdict {
	POLICY_ALLOW = 0,
	POLICY_DENY_NOT_ALLOWED, /* default deny: on no allowlist */
	POLICY_DENY_HIGHRISK,  /* on the high-risk list: denied even if allowed, logged as alert */
	POLICY_DENY_IPLITERAL, /* the name is an IP address in some form */
	POLICY_DENY_EMBEDDED,  /* the name embeds a blocked address (nip.io kind) */
	POLICY_DENY_CLASS,     /* class other than IN: answered locally, never forwarded */
	/* Set after policy_decide allowed the name, by the query path (serve/exfil.c): */
	POLICY_DENY_QTYPE,      /* a query type the agent may not ask (moat/channel.h) */
	POLICY_DENY_BUDGET,     /* a new name past the zone's label budget (moat/budget.h) */
	POLICY_DENY_ANSWER_CAP, /* the answer is over the agent's caps (moat/channel.h) */
};

struct policy_decision {
	enum policy_verdict verdict;
	struct policy_rule rule; /* the rule that allowed or denied, if any */
	bool alert;              /* worth an operator's attention (high-risk, internal address) */
	bool nodata;             /* deny as NOERROR without records (an RPZ "CNAME *." trigger) */
	bool audit;   /* allowed only by audit mode: enforce would deny it (moat/policy_audit.h) */
	bool decided; /* denied by a runtime decision (moatctl deny): never asked about again */
	/* For the EDE text and the log: "moat: not on allowlist of agent ci-42". Empty for an
	 * allow by a listed rule: that reason is the rule's, "allowed by FILE:LINE", and only the
	 * log and moatctl explain show it (policy_reason writes it; the log from the rule). */
	char reason[160];
};

/* d's reason as text: d->reason, or the rule's ("allowed by FILE:LINE") written into buf
 * where policy_decide left it to the rule. Returns d->reason or buf. */
const char *policy_reason(const struct policy_decision *d, char *buf, size_t cap);

/* Decide one question for an agent. lname is the lower-cased wire name. Pure. */
void policy_decide(const struct policy *p, const struct policy_agent *agent, const uint8_t *lname,
                   uint16_t qclass, struct policy_decision *out);

/* Decide a name met in the CNAME/DNAME chain of an upstream answer for an agent (moatd never
 * chases a chain itself: the recursive upstream returns it whole, and each name after the
 * question is checked here before the answer passes): high-risk names and names embedding
 * blocked addresses are denied; with strict_chain the name must also be on an allowlist.
 * Returns POLICY_ALLOW or the deny verdict, with *out filled. */
enum policy_verdict policy_check_chain(const struct policy *p, const struct policy_agent *agent,
                                       const uint8_t *lname, struct policy_decision *out);

/* Whether one address of an answer (len 4 or 16: A, AAAA, SVCB hints) may stand. Refused
 * anywhere in the answer: what the guard's ranges block (private ones unless allow_private).
 * Refused where the client gets it (passed: an answer record on the chain, what is granted):
 * moatd's own addresses (listen, upstream, metrics: labelled hosts of the guard; elsewhere they
 * are an authoritative upstream's own glue) and in every mode an IPv4-mapped IPv6 address
 * (::ffff:a.b.c.d is never a valid AAAA answer: a client connecting to it reaches the IPv4
 * address). False with "moat: answer contained ..." in why. Pure. */
bool policy_answer_addr_ok(const struct policy *p, bool allow_private, bool passed,
                           const uint8_t *addr, size_t len, char *why, size_t cap);

/* The same, telling the two refusals apart (why filled for both): refused anywhere in the
 * answer, or only because the client gets it (passed). One walk over an answer checks each
 * address once: a refusal anywhere outranks one where the client gets it, whatever the order. */
enum policy_addr_verdict {
	POLICY_ADDR_OK = 0,
	POLICY_ADDR_REFUSED,        /* a blocked range: wherever it stands */
	POLICY_ADDR_REFUSED_PASSED, /* moatd's own or IPv4-mapped, where the client gets it */
};
enum policy_addr_verdict policy_answer_addr_check(const struct policy *p, bool allow_private,
                                                  bool passed, const uint8_t *addr, size_t len,
                                                  char *why, size_t cap);

/* Each verdict's token, written once: X(suffix, token) for POLICY_<suffix>. policy_verdict_str
 * and metrics.c's decision label (MD_<suffix>, which must equal the log's token) both expand it. */
#define POLICY_VERDICT_TOKENS(X)                                                                   \
	X(ALLOW, "allow")                                                                          \
	X(DENY_NOT_ALLOWED, "deny-not-allowed")                                                    \
	X(DENY_HIGHRISK, "deny-high-risk")                                                         \
	X(DENY_IPLITERAL, "deny-ip-literal")                                                       \
	X(DENY_EMBEDDED, "deny-embedded-address")                                                  \
	X(DENY_CLASS, "deny-class")                                                                \
	X(DENY_QTYPE, "deny-qtype")                                                                \
	X(DENY_BUDGET, "deny-budget")                                                              \
	X(DENY_ANSWER_CAP, "deny-answer-cap")

/* Short stable token for logs: "allow", "deny-not-allowed", ... */
const char *policy_verdict_str(enum policy_verdict v);

#endif
