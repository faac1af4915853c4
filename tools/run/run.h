/* run.h: `moat run`, one command that puts a process behind moat (tools/run/). What its parts
 * share: the options (main.c), the run's slot and its record for clean-up (slot.c), the links
 * (rtnl.c), its own nftables tables (hostnft.c), the sandbox process (sandbox.c), the daemons
 * it starts (daemons.c) or the system's it talks to (system.c), the firewall's drops as they
 * happen (drops.c) and the summary at exit (summary.c).
 *
 * One run, in the order main.c drives it:
 *   slot       a free slot N under the state directory (flock; a slot whose lock is free but
 *              whose record is there belonged to a run that died: cleaned first), giving the
 *              names of everything the run makes: link moat-N, table inet moatrun-N, agent
 *              moat-run-N, and a /30 of the pool (host end .1, sandbox .2)
 *   sandbox    a child in new network, mount and PID namespaces (its init), waiting
 *   links      a veth pair: moat-N here, eth0 in the sandbox; addresses, routes
 *   egress     table inet moatrun-N here: NAT of the sandbox's address
 *   daemons    private: moat-fw inside the sandbox's namespace and moatd here, in a PID
 *              namespace of their own; system: a runtime sandbox range in moat-fw and a
 *              runtime agent in moatd, over their sockets
 *   command    the sandbox's init mounts a resolv.conf naming only moatd and a fresh /proc,
 *              then runs the command as the invoking user without any capability
 *   clean-up   everything above in reverse, then the summary and the command's status. */
#ifndef MOAT_RUN_H
#define MOAT_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define RUN_STATE_DIR "/run/moat-run"
#define RUN_FW_SOCKET "/run/moat/fw.sock"
#define RUN_CTL_SOCKET "/run/moat/ctl.sock"
#define RUN_MOATD_LOG "/var/log/moat/queries.jsonl"
#define RUN_POOL "10.77.0.0/16"
#define RUN_MAX_LIST 16     /* --upstream */
#define RUN_SLOTS_MAX 16384 /* /30s: a /16 pool */
#define RUN_EXIT_FAIL 125   /* moat run itself failed (as podman and docker say it) */

enum run_mode {
	RUN_AUTO = 0, /* the system's daemons when both sockets answer, else private ones */
	RUN_PRIVATE,
	RUN_SYSTEM,
	RUN_ROOTLESS,
};

struct run_opts {
	enum run_mode mode;
	char **lines; /* allowlist lines (pattern and ports), from every source */
	size_t nlines, caplines;
	const char *deny; /* nxdomain | refused | sinkhole, or NULL: moatd's default */
	uid_t uid;        /* who runs the command */
	gid_t gid;
	const char *user; /* its name, for its groups (NULL: uid only) */
	const char *fw_socket, *ctl_socket, *moatd_log;
	const char *upstream[RUN_MAX_LIST];
	size_t nupstream;
	uint8_t pool[4]; /* IPv4 pool, network order */
	unsigned pool_bits;
	const char *state_dir;
	unsigned min_lifetime; /* private moat-fw's --min-lifetime, 0: its default */
	const char *report;
	bool quiet, gc;
	char **argv; /* the command */
};

/* Everything one run made, as its record in the slot (slot.c) lists it for clean-up. */
struct run_state {
	unsigned slot;
	int lock_fd;
	char dir[256];       /* the slot's directory: its record, logs, private daemons' files */
	char ifname[16];     /* moat-N */
	char table[32];      /* moatrun-N */
	char agent[64];      /* moat-run-N: the system moatd's runtime agent */
	uint8_t host4[4];    /* host end of the veth: the gateway (and private moatd) */
	uint8_t sbx4[4];     /* the sandbox's address */
	unsigned long netns; /* inode of the namespace the run's host side lives in */
	enum run_mode mode;  /* RUN_PRIVATE or RUN_SYSTEM once decided */
	char resolver[64];   /* the nameserver the sandbox's resolv.conf names */
	long log_offset;     /* system moatd's query log: where this run's lines start */
	pid_t sandbox_pid;   /* the sandbox's init (host PID) */
	pid_t daemons_pid;   /* private: the daemons' init */
	int host_ns, sbx_ns; /* namespace descriptors (-1 when closed) */
	int fw_fd;           /* system: the connection to moat-fw */
	bool made_link, made_table, added_sandbox, added_agent;
	bool keep_record; /* a daemon's removal failed: the record stays for the next clean-up */
};

/* --- slot.c ---------------------------------------------------------------------------------- */
/* Clean every stale slot under dir (its run is gone), then take a free one for st. 0, or
 * RUN_EXIT_FAIL after a message. */
int slot_take(const struct run_opts *o, struct run_state *st);
/* Write st's record (what to clean up) into its slot; 0 or -1. */
int slot_record(const struct run_state *st, const struct run_opts *o);
/* Remove st's link and table and the slot's files (from_record: also its runtime agent and
 * range in the system's daemons, for a run that died); the lock stays until slot_release. With
 * st->keep_record (a removal in the daemons failed) the record stays, so that the next run or
 * --gc finishes the job: a runtime agent left in moatd would refuse the slot's next run. */
void slot_clean(struct run_state *st, const struct run_opts *o, bool from_record);
void slot_release(struct run_state *st);
/* --gc: clean every stale slot; the number cleaned (those whose record stays counted in *left
 * when left is not NULL), or -1. */
int slot_gc(const struct run_opts *o, unsigned *left);

/* --- rtnl.c ---------------------------------------------------------------------------------- */
/* The veth pair: st->ifname here, eth0 in st->sbx_ns; addresses and routes on both ends. */
int rtnl_setup(struct run_state *st);
/* Delete link name in the current namespace (gone already: 0). */
int rtnl_link_del(const char *name);
/* Index of link name in the namespace of fd netns (-1: the current one), or -1. */
int rtnl_ifindex(int netns, const char *name);

/* --- hostnft.c ------------------------------------------------------------------------------- */
/* Table inet ST->table in the current namespace: NAT of the sandbox's address out of every
 * other interface, and (trace) the firewall's drops traced for drops.c. */
int hostnft_add(const struct run_state *st, bool trace, char *err, size_t errlen);
/* Table inet moatrun in the sandbox's namespace: its new flows traced (private mode). */
int hostnft_sandbox_trace(const struct run_state *st, char *err, size_t errlen);
/* True when this namespace has moat-fw's table inet moat (a forward placement judges every
 * moat-* link, and drops those it was not told about). */
bool hostnft_moat_here(void);
/* Delete table inet NAME here (gone already: 0). */
int hostnft_del(const char *table);

/* --- sandbox.c ------------------------------------------------------------------------------- */
/* Start the sandbox's init in new namespaces; it waits for sandbox_go. */
int sandbox_start(struct run_state *st, const struct run_opts *o);
/* Let it mount the resolv.conf and run the command. */
int sandbox_go(struct run_state *st);
/* Wait for the command, forwarding the signals read from sigfd and reading drops from dropfd
 * (-1: none); returns its wait status (exec_errno: why exec failed, or 0). */
int sandbox_wait(struct run_state *st, int sigfd, int dropfd, int *exec_errno);
/* Kill the sandbox's init if it still runs (the set-up failed); reap it. */
void sandbox_abort(struct run_state *st);
/* Close, in another child of moat run, the ends of the sandbox's pipes moat run holds. */
void sandbox_close_fds(void);

/* --- daemons.c (private) --------------------------------------------------------------------- */
int daemons_start(struct run_state *st, const struct run_opts *o);
void daemons_stop(struct run_state *st);

/* --- system.c -------------------------------------------------------------------------------- */
/* True when both of the system's sockets accept a connection. */
bool system_present(const struct run_opts *o);
int system_attach(struct run_state *st, const struct run_opts *o);
/* Remove the runtime agent and sandbox range named by st (each step only if made, or from a
 * record: all, ignoring what is already gone). A removal that failed (said) sets
 * st->keep_record. */
void system_detach(struct run_state *st, const struct run_opts *o, bool all);

/* --- drops.c --------------------------------------------------------------------------------- */
/* Listen for traced packets in the namespace of fd netns (-1: here; back: this namespace's fd);
 * ifindex 0: every packet (the sandbox's own namespace), else only those that arrived on it.
 * The socket, or -1. */
int drops_open(int netns, int back, int ifindex);
/* Read what is waiting on fd and count the packets table inet moat dropped. */
void drops_read(int fd);
void drops_close(int fd);

/* --- summary.c ------------------------------------------------------------------------------- */
/* The exit summary (stderr unless quiet) and --report, from the query log and the drops. */
void summary_write(const struct run_state *st, const struct run_opts *o, const char *log,
                   int status, int code);
/* One dropped packet, from drops.c. */
void summary_drop(uint8_t family, const uint8_t *dst, uint8_t proto, uint16_t port);

/* --- rootless.c ------------------------------------------------------------------------------ */
/* --rootless: say why there is none and refuse (RUN_EXIT_FAIL). */
int rootless_refuse(void);

/* --- util ------------------------------------------------------------------------------------ */
void run_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Run fn(arg) with the network namespace of fd netns entered, then return to back. */
int run_in_netns(int netns, int back, int (*fn)(void *), void *arg);

#endif
