/* main.c: moatd's command line, start-up order, signals and shutdown; nothing else.
 * Start-up: flags and config -> validation -> policy snapshot -> log -> workers (listeners
 * bound) -> privileges dropped -> loops. SIGHUP reloads the policy and hands it to every worker
 * (a bad file leaves the running policy in place); SIGUSR1 reopens the query log (logrotate);
 * SIGUSR2 is ignored (reserved); SIGTERM and SIGINT stop cleanly: listeners
 * close, in-flight queries are dropped, the log is flushed. */
#include <grp.h>
#include <pwd.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "moat/agent_edit.h"
#include "moat/agent_restore.h"
#include "moat/agentstore.h"
#include "moat/check.h"
#include "moat/config.h"
#include "moat/config_load.h"
#include "moat/err.h"
#include "moat/log.h"
#include "moat/pathfd.h"
#include "moat/metrics.h"
#include "moat/policy.h"
#include "moat/inflight.h"
#include "moat/policy_lint.h"
#include "moat/ratelimit.h"
#include "moat/sdnotify.h"
#include "moat/version.h"
#include "moat/zonesdir.h"
#include "config/config_flags.h"
#include "ops/control.h"
#include "ops/control_agents.h"
#include "ops/control_ask.h"
#include "serve/dnstap_out.h"
#include "serve/fetch.h"
#include "serve/fwchan.h"
#include "serve/limits.h"
#include "serve/log_sink.h"
#include "ops/logreopen.h"
#include "ops/metrics_endpoint.h"
#include "serve/metrics_workers.h"
#include "sys/privdrop.h"
#include "ops/rpz_feed.h"
#include "serve/worker.h"

static struct worker *workers; /* cfg.workers of them; workers[0] runs on this thread */
static unsigned nworkers;
static struct ratelimit *limiter; /* shared by the workers; NULL: no rate limit */
static struct inflight *inflight; /* caps on questions in flight, shared by the workers */
static struct config cfg;
static struct config_flags opts;
static uv_signal_t sig_term, sig_int, sig_hup;
static struct log_sink *qlog; /* the query log (SIGUSR1 reopens it); NULL: none */
static uv_timer_t stats_timer;
static struct rpz_feed *feed; /* RPZ transfers; NULL until started */
static const char *run_user;  /* privdrop_pick_user's answer (NULL: stay as started) */

/* The feed's way to hand a snapshot to every worker (with its lock held). */
static void publish_policy(void *ctx, struct policy *p)
{
	(void)ctx;
	for (unsigned i = 0; i < nworkers; i++)
		worker_post_policy(&workers[i], p);
}

/* The workers' way to hand a NOTIFY to the feed (serve/worker.h). */
static int notify_feed(void *ctx, const uint8_t *pkt, size_t len, const struct sockaddr *from,
                       uint8_t *out, size_t cap, char *why, size_t whylen)
{
	return rpz_feed_notify(ctx, pkt, len, from, out, cap, why, whylen);
}
static struct agentstore *store; /* runtime agents (state_dir); NULL: none */

/* The lint at start-up and reload: every pattern of lists up to this size (about 0.1 s); larger
 * ones are linted by --check. */
#define LINT_AT_START_MAX 100000

static void lint_report(struct policy *p)
{
	policy_lint_print(p->lint, stderr, "moatd: ");
	if (p->lint_skipped)
		fprintf(stderr,
		        "moatd: more than %d allow patterns: not linted at start-up; "
		        "moatd --check lints them\n",
		        LINT_AT_START_MAX);
}

/* The last failed reload's reason, for moatctl status (main thread; "" after a good one). */
static char reload_error[512];

static const char *last_reload_error(void)
{
	return reload_error;
}

/* The running policy's size, for the metrics. */
static void policy_measured(const struct policy *p, bool ok)
{
	if (ok)
		reload_error[0] = 0;
	metrics_set(&metrics_global.policy_agents, p->nagents);
	metrics_set(&metrics_global.policy_patterns, policy_allow_count(p));
	metrics_set(&metrics_global.last_reload_unix, (uint64_t)time(NULL));
	metrics_set(&metrics_global.last_reload_ok, ok);
}

static void reload_failed(const char *why)
{
	snprintf(reload_error, sizeof(reload_error), "%s", why);
	metrics_inc(&metrics_global.reloads_failed);
	metrics_set(&metrics_global.last_reload_unix, (uint64_t)time(NULL));
	metrics_set(&metrics_global.last_reload_ok, 0);
}

/* Load the policy again (SIGHUP, moatctl reload) and hand it to every worker; a bad file
 * changes nothing. Returns 0, or < 0 with "file:line: reason" in err. */
static int reload(char *err, size_t errlen)
{
	struct config ncfg;
	struct policy *np = NULL;

	config_init(&ncfg);
	if (opts.config_path) {
		if (config_load_file(&ncfg, opts.config_path, err, errlen) < 0 ||
		    (opts.zones_dir && config_set_zones_dir(&ncfg, opts.zones_dir) < 0) ||
		    config_validate(&ncfg, err, errlen) < 0) {
			fprintf(stderr, "moatd: reload failed, running policy kept: %s\n", err);
			config_free(&ncfg);
			reload_failed(err);
			return MOAT_EINVAL;
		}
		for (size_t i = 0; i < ncfg.nagents; i++) {
			ncfg.agents[i].strict_chain |= opts.strict_chain;
			ncfg.agents[i].allow_private |= opts.allow_private;
			if (opts.audit)
				ncfg.agents[i].mode = AGENT_AUDIT;
		}
	}
	ncfg.lint_max_patterns = cfg.lint_max_patterns;
	int rc = policy_load(opts.config_path ? &ncfg : &cfg, &np, err, errlen);
	if (rc == 0 && (workers[0].policy->nagents > workers[0].policy->nconfig ||
	                agent_edit_has_decided(workers[0].policy))) {
		struct policy *loaded = np; /* the runtime agents stay, on top of the new files */
		rc = agent_edit_rebase(loaded, workers[0].policy, &np, err, errlen);
		policy_unref(loaded);
	}
	if (rc < 0) {
		config_free(&ncfg);
		fprintf(stderr, "moatd: reload failed, running policy kept: %s\n", err);
		reload_failed(err);
		return rc;
	}
	lint_report(np);
	/* The feed fills np's transferred zones before anyone sees np, and hands it on itself. */
	if (feed)
		rpz_feed_adopt(feed, opts.config_path ? &ncfg : &cfg, np);
	else if (rpz_feed_wanted(&ncfg))
		fprintf(stderr, "moatd: rpz: transferred zones need a restart (none at start-up, "
		                "so no transfer thread); they stay empty until then\n");
	config_free(&ncfg);
	/* Worker 0 is this thread: it takes the snapshot now, so a control reply that follows
	 * (explain) already sees it. */
	worker_take_policy(&workers[0], policy_ref(np));
	for (unsigned i = 1; i < nworkers; i++)
		worker_post_policy(&workers[i], np);
	fprintf(stderr, "moatd: policy reloaded (%zu agents)\n", np->nagents);
	metrics_inc(&metrics_global.reloads_ok);
	policy_measured(np, true);
	sdnotify_send("STATUS=serving; policy reloaded");
	policy_unref(np);
	return 0;
}

/* ---- logrotate: SIGUSR1 reopens the query log (kept apart from the other signals) ---- */
static uv_signal_t sig_usr1;

static void on_usr1(uv_signal_t *s, int signum)
{
	(void)s;
	(void)signum;
	/* By the helper started with the log (ops/logreopen.c): moatd's filter refuses every open
	 * for writing, and its user may not reach the path. */
	char err[256];
	if (logreopen_now(qlog, err, sizeof(err)) < 0)
		fprintf(stderr, "moatd: %s; still writing to the old file\n", err);
	else
		fprintf(stderr, "moatd: query log reopened\n");
}

static void usr1_start(uv_loop_t *loop)
{
	uv_signal_init(loop, &sig_usr1);
	uv_signal_start(&sig_usr1, on_usr1, SIGUSR1);
}

static void usr1_stop(void)
{
	uv_close((uv_handle_t *)&sig_usr1, NULL);
}

/* Rate-limited queries are not logged one by one; this says how many there were. */
static void on_stats(uv_timer_t *t)
{
	static uint64_t last;
	(void)t;
	uint64_t now = limiter ? ratelimit_limited(limiter) : 0;
	if (now != last) {
		fprintf(stderr, "moatd: rate limit: %llu queries over the limit in the last 10 s\n",
		        (unsigned long long)(now - last));
		last = now;
	}
}

/* Keep a descriptor of every policy file's directory, to read them again after the drop. */
static void keep_policy_dirs(const struct config *c, const char *config_path)
{
	if (config_path)
		pathfd_keep_dir(config_path);
	for (size_t i = 0; i < c->nagents; i++)
		for (size_t k = 0; k < c->agents[i].nallow; k++)
			pathfd_keep_dir(c->agents[i].allow_files[k]);
	for (size_t k = 0; k < c->nhighrisk; k++)
		pathfd_keep_dir(c->highrisk_files[k]);
	for (size_t k = 0; k < c->nranges; k++)
		pathfd_keep_dir(c->range_files[k]);
	for (size_t k = 0; k < c->nrpz; k++)
		if (c->rpz[k].file)
			pathfd_keep_dir(c->rpz[k].file);
}

static void on_signal(uv_signal_t *s, int signum)
{
	(void)s;
	if (signum == SIGHUP) {
		char err[512];
		reload(err, sizeof(err));
		return;
	}
	if (workers[0].stopping)
		return;
	sdnotify_send("STOPPING=1");
	for (unsigned i = 1; i < nworkers; i++)
		worker_post_stop(&workers[i]);
	worker_stop(&workers[0]);
	uv_close((uv_handle_t *)&stats_timer, NULL);
	uv_close((uv_handle_t *)&sig_term, NULL);
	uv_close((uv_handle_t *)&sig_int, NULL);
	uv_close((uv_handle_t *)&sig_hup, NULL);
	usr1_stop();
	control_stop();
}

/* The state store, opened as root before the filter (its files stay open for the writes of
 * agent add/del), and the runtime agents it holds added to the policy. */
static int agents_restore(struct policy **p, char *err, size_t errlen)
{
	size_t n = 0;
	if (!cfg.state_dir)
		return 0;
	if (agentstore_open(cfg.state_dir, &store, err, errlen) < 0 ||
	    agent_restore(store, p, &n, err, errlen) < 0)
		return MOAT_EIO;
	if (n)
		fprintf(stderr, "moatd: %zu runtime agent(s) from %s\n", n, cfg.state_dir);
	return 0;
}

/* The control socket and the metrics endpoint: bound as root, before the filter. */
static int start_ops(uv_loop_t *loop, char *err, size_t errlen)
{
	struct control_ops ops = {workers,          nworkers, reload,           MOAT_VERSION,
	                          opts.config_path, store,    last_reload_error};
	if (cfg.control_path &&
	    control_start(loop, cfg.control_path, cfg.control_group, &ops, err, errlen) < 0)
		return MOAT_EIO;
	if (cfg.has_metrics &&
	    metrics_endpoint_start((const struct sockaddr *)&cfg.metrics_addr, workers, nworkers,
	                           MOAT_VERSION, err, errlen) < 0)
		return MOAT_EIO;
	return 0;
}

/* Build the configuration and load its policy (exit status 2: bad flags or config; 1: bad
 * policy). With --check the report is the whole run: *done is set with its status. */
static int load_start(int argc, char **argv, struct policy **policy, int *done)
{
	char err[8192]; /* --check: up to CONFIG_CHECK_ERRORS lines */

	*done = -1;
	if (config_flags_build(argc, argv, &cfg, &opts) < 0) {
		config_flags_free(&opts); /* nothing left behind, even on a usage error */
		config_free(&cfg);
		return 2;
	}
	config_flags_free(&opts);
	if (!opts.check)
		cfg.lint_max_patterns = LINT_AT_START_MAX;
	if (policy_load(&cfg, policy, err, sizeof(err)) < 0) {
		config_print_errors(stderr, "moatd: ", err);
		return 1;
	}
	if (opts.check) {
		*done = check_report(&cfg, *policy, opts.strict, stdout, stderr);
		policy_unref(*policy);
		config_free(&cfg);
		return 0;
	}
	lint_report(*policy);
	if (agents_restore(policy, err, sizeof(err)) < 0 ||
	    control_ask_restore(store, policy, err, sizeof(err)) < 0) {
		fprintf(stderr, "moatd: %s\n", err);
		return 1;
	}
	return 0;
}

/* What the workers share: the query log, the rate limiter, the descriptor budget, the
 * in-flight caps, the metrics' start and dnstap. 0, or 1 with the reason printed. */
static int start_shared(const struct policy *policy)
{
	char err[512];

	int rc = log_sink_open(cfg.log_file, cfg.workers, &qlog);
	if (rc < 0) {
		if (rc == MOAT_EIO)
			fprintf(stderr, "moatd: cannot open log %s: %m\n", cfg.log_file);
		else
			fprintf(stderr, "moatd: out of memory for the query log\n");
		return 1;
	}
	/* The user moatd becomes, picked once (the pick may warn): the log's reopening helper
	 * runs as it, and the privilege drop below takes it. */
	if (privdrop_pick_user(cfg.user, cfg.fw_socket != NULL, &run_user, err, sizeof(err)) < 0) {
		fprintf(stderr, "moatd: %s\n", err);
		return 1;
	}
	/* The helper forks, so before any thread; the log's writer thread starts after it, and
	 * before the filter (which has no clone). */
	if (qlog && logreopen_init(cfg.log_file, run_user) < 0)
		fprintf(stderr, "moatd: warning: the query log cannot be reopened on SIGUSR1\n");
	if (log_sink_start(qlog) < 0) {
		fprintf(stderr, "moatd: cannot start the query log's writer: %m\n");
		return 1;
	}
	keep_policy_dirs(&cfg, opts.config_path);
	if (cfg.rl_qps && !(limiter = ratelimit_new(cfg.rl_qps, cfg.rl_burst, 65536))) {
		fprintf(stderr, "moatd: out of memory for the rate limiter\n");
		return 1;
	}
	ratelimit_share(limiter, cfg.workers); /* one worker: no lock a query */
	if (limits_fit_nofile(&cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "moatd: %s\n", err);
		return 1;
	}
	if (err[0])
		fprintf(stderr, "moatd: %s\n", err);
	if (!(inflight = inflight_new(cfg.inflight_max, cfg.inflight_per_client, 4096))) {
		fprintf(stderr, "moatd: out of memory for the in-flight caps\n");
		return 1;
	}
	nworkers = cfg.workers;
	metrics_global.start_unix = (uint64_t)time(NULL);
	metrics_global.workers = nworkers;
	policy_measured(policy, true);
	if (dnstap_out_start(&cfg, nworkers, "moatd", "moatd " MOAT_VERSION, err, sizeof(err)) <
	    0) {
		fprintf(stderr, "moatd: %s\n", err);
		return 1;
	}
	return 0;
}

/* The workers (listeners bound) and the RPZ transfer thread. 0, or 1 with the reason printed. */
static int start_workers(struct policy *policy)
{
	char err[512];

	if (!(workers = calloc(nworkers, sizeof(*workers)))) {
		fprintf(stderr, "moatd: out of memory\n");
		return 1;
	}
	for (unsigned i = 0; i < nworkers; i++)
		if (worker_init(&workers[i], i, nworkers, &cfg, policy, qlog, limiter, err,
		                sizeof(err)) < 0) {
			fprintf(stderr, "moatd: %s\n", err);
			return 1;
		}
	for (unsigned i = 0; i < nworkers; i++)
		workers[i].inflight = inflight;
	/* The transfer thread starts before the system-call filter (which has no clone). */
	if (rpz_feed_wanted(&cfg) &&
	    rpz_feed_start(&feed, &cfg, policy, publish_policy, NULL) < 0) {
		fprintf(stderr, "moatd: cannot start the RPZ transfer thread\n");
		return 1;
	}
	for (unsigned i = 0; i < nworkers; i++)
		workers[i].notify = feed ? notify_feed : NULL, workers[i].notify_ctx = feed;
	control_agents_feed(feed);
	return 0;
}

/* The signals, the rate-limit report and the control and metrics sockets, on worker 0's loop. */
static int start_main_loop(uv_loop_t *loop)
{
	char err[512];

	uv_timer_init(loop, &stats_timer);
	uv_timer_start(&stats_timer, on_stats, 10000, 10000);
	uv_unref((uv_handle_t *)&stats_timer);
	uv_signal_init(loop, &sig_term);
	uv_signal_init(loop, &sig_int);
	uv_signal_init(loop, &sig_hup);
	uv_signal_start(&sig_term, on_signal, SIGTERM);
	uv_signal_start(&sig_int, on_signal, SIGINT);
	uv_signal_start(&sig_hup, on_signal, SIGHUP);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGUSR2, SIG_IGN); /* reserved; never fatal */
	usr1_start(loop);
	if (start_ops(loop, err, sizeof(err)) < 0) {
		fprintf(stderr, "moatd: %s\n", err);
		return 1;
	}
	return 0;
}

/* Once privileges are dropped: say which user moatd serves as and, with a firewall channel,
 * check that moat-fw's socket admits that user. A socket that refuses it (mode or group,
 * moat-fw's --moatd-user, another channel format) stops the start: every answer with an address
 * would fail. A moat-fw not listening yet is said, with the flags that admit moatd. 0 or 1. */
static int check_user(void)
{
	char who[128], grp[64], why[512];
	const struct passwd *pw = getpwuid(getuid());
	const struct group *gr = getgrgid(getgid());
	snprintf(who, sizeof(who), "%s (uid %u, gid %u)", pw ? pw->pw_name : "?",
	         (unsigned)getuid(), (unsigned)getgid());
	snprintf(grp, sizeof(grp), "%s", gr ? gr->gr_name : "?");
	fprintf(stderr, "moatd: running as user %s\n", who);
	if (!cfg.fw_socket)
		return 0;
	/* The flags that make a moat-fw admit this user (the defaults, for moat). */
	char flags[256];
	snprintf(flags, sizeof(flags), "--moatd-user %s --socket-group %s%s",
	         pw ? pw->pw_name : "UID", grp,
	         pw && !strcmp(pw->pw_name, PRIVDROP_USER) ? " (its defaults)" : "");
	switch (fwchan_probe(cfg.fw_socket, cfg.fw_timeout_ms, why, sizeof(why))) {
	case FWCHAN_ADMITTED:
		fprintf(stderr, "moatd: firewall channel %s: moat-fw admits user %s\n",
		        cfg.fw_socket, who);
		return 0;
	case FWCHAN_REFUSED:
		fprintf(stderr,
		        "moatd: refusing to start: firewall channel %s: %s; moatd runs as user %s: "
		        "start moat-fw with %s\n",
		        cfg.fw_socket, why, who, flags);
		return 1;
	default: /* not there yet, or silent: grants wait for it (SERVFAIL meanwhile) */
		fprintf(
		    stderr,
		    "moatd: firewall channel %s: %s; answers with addresses fail (SERVFAIL) until "
		    "moat-fw admits user %s: %s\n",
		    cfg.fw_socket, why, who, flags);
		return 0;
	}
}

/* Start serving: the worker threads, the drop of privileges, then READY. */
static int go_live(uint64_t t0)
{
	char err[512];

	/* The other workers' threads wait at a barrier until the whole process has dropped its
	 * privileges and every thread carries the system-call filter. */
	if (worker_spawn(workers, nworkers) < 0) {
		fprintf(stderr, "moatd: cannot start worker threads\n");
		return 1;
	}
	/* The service manager's socket is opened while socket() and connect() of any kind are
	 * still allowed; READY=1 goes out on it once every worker serves. */
	if (sdnotify_open() < 0)
		fprintf(stderr, "moatd: NOTIFY_SOCKET: cannot reach the service manager\n");
	/* Everything privileged is done: sockets bound, files open. */
	struct privdrop_opts drop = {.user = run_user ? run_user : cfg.user,
	                             .firewall = cfg.fw_socket != NULL,
	                             .filter = cfg.seccomp};
	if (privdrop_apply(&drop, err, sizeof(err)) < 0) {
		fprintf(stderr, "moatd: %s\n", err);
		_exit(1); /* the waiting threads go with the process */
	}
	if (check_user() != 0)
		_exit(1);
	worker_release(nworkers);
	fprintf(stderr,
	        "moatd %s: serving %zu agent(s) on %zu address(es), %zu upstream(s), %u "
	        "worker(s); ready in %.1f ms\n",
	        MOAT_VERSION, workers[0].policy->nagents, cfg.nlisten, cfg.nupstreams, nworkers,
	        (double)(uv_hrtime() - t0) / 1e6);
	sdnotify_send("READY=1\nSTATUS=serving");
	return 0;
}

/* The totals of every worker, printed at the end. */
static void print_totals(void)
{
	struct worker_stats t = {0};
	for (unsigned i = 0; i < nworkers; i++) {
		const struct worker_stats *s = &workers[i].stats;
		t.queries += s->queries;
		t.answered += s->answered;
		t.denied += s->denied;
		t.forwarded += s->forwarded;
		t.servfail += s->servfail;
		t.formerr += s->formerr;
		t.dropped += s->dropped;
		t.refused_clients += s->refused_clients;
		t.upstream_mismatch += s->upstream_mismatch;
		t.ratelimited += s->ratelimited;
		t.inflight_refused += s->inflight_refused;
	}
	fprintf(stderr,
	        "moatd: stopped: %llu queries, %llu answered, %llu denied, %llu forwarded, "
	        "%llu servfail, %llu formerr, %llu dropped, %llu refused clients, %llu upstream "
	        "mismatches, %llu rate-limited, %llu over the in-flight caps\n",
	        (unsigned long long)t.queries, (unsigned long long)t.answered,
	        (unsigned long long)t.denied, (unsigned long long)t.forwarded,
	        (unsigned long long)t.servfail, (unsigned long long)t.formerr,
	        (unsigned long long)t.dropped, (unsigned long long)t.refused_clients,
	        (unsigned long long)t.upstream_mismatch, (unsigned long long)t.ratelimited,
	        (unsigned long long)t.inflight_refused);
	if (nworkers > 1)
		for (unsigned i = 0; i < nworkers; i++)
			fprintf(stderr, "moatd: worker %u: %llu queries\n", i,
			        (unsigned long long)workers[i].stats.queries);
}

int main(int argc, char **argv)
{
	uint64_t t0 = uv_hrtime();
	struct policy *policy = NULL;
	int done, rc;

	if (sodium_init() < 0) {
		fprintf(stderr, "moatd: libsodium failed to start\n");
		return 1;
	}
	if ((rc = load_start(argc, argv, &policy, &done)) != 0 || done >= 0)
		return rc != 0 ? rc : done;
	if (start_shared(policy) != 0 || start_workers(policy) != 0)
		return 1;
	policy_unref(policy); /* the workers hold theirs */
	uv_loop_t *loop = workers[0].loop;
	if (start_main_loop(loop) != 0 || go_live(t0) != 0)
		return 1;
	uv_run(loop, UV_RUN_DEFAULT);
	worker_join(workers, nworkers);
	metrics_endpoint_stop();
	dnstap_out_stop();
	rpz_feed_stop(feed);
	print_totals();
	for (unsigned i = 0; i < nworkers; i++)
		worker_deinit(&workers[i]);
	sdnotify_close();
	free(workers);
	ratelimit_free(limiter);
	inflight_free(inflight);
	agentstore_close(store);
	log_sink_close(qlog); /* after worker_deinit wrote the workers' last counts */
	logreopen_release();
	pathfd_release();
	config_free(&cfg);
	return 0;
}
