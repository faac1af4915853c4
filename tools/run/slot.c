/* slot.c owns the run's slot and its clean-up record. The state directory (default
 * /run/moat-run, root only) holds for slot N a lock file slot-N.lock and, while a run uses it,
 * a directory slot-N/ with its record (`record`: what the run makes, written before it makes
 * any of it) and the private daemons' files. A run holds the lock (flock) for its whole life,
 * and so do the sandbox's init and the daemons' init it forks (they inherit the descriptor):
 * the lock comes free only when all of them are gone, and with them every process of the run
 * (each init is PID 1 of its namespace, killed when moat run dies). A free lock with a slot
 * directory beside it is a run that died (kill -9): the next run or --gc cleans what its record
 * names (its link, its table, its runtime agent and sandbox range) and removes the directory.
 * Slot N owns the Nth /30 of the pool: .1 the host end, .2 the sandbox. */
#include "run.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static void slot_names(struct run_state *st, const struct run_opts *o, unsigned n)
{
	st->slot = n;
	snprintf(st->dir, sizeof(st->dir), "%s/slot-%u", o->state_dir, n);
	snprintf(st->ifname, sizeof(st->ifname), "moat-%u", n);
	snprintf(st->table, sizeof(st->table), "moatrun-%u", n);
	snprintf(st->agent, sizeof(st->agent), "moat-run-%u", n);
	uint32_t base = (uint32_t)o->pool[0] << 24 | (uint32_t)o->pool[1] << 16 |
	                (uint32_t)o->pool[2] << 8 | o->pool[3];
	uint32_t h = base + 4 * n + 1, s = h + 1;
	for (int i = 0; i < 4; i++) {
		st->host4[i] = (uint8_t)(h >> (24 - 8 * i));
		st->sbx4[i] = (uint8_t)(s >> (24 - 8 * i));
	}
}

static unsigned long slot_netns_ino(void)
{
	struct stat sb;
	return stat("/proc/self/ns/net", &sb) == 0 ? (unsigned long)sb.st_ino : 0;
}

int slot_record(const struct run_state *st, const struct run_opts *o)
{
	char path[300], tmp[300];
	snprintf(path, sizeof(path), "%s/record", st->dir);
	snprintf(tmp, sizeof(tmp), "%s/record.new", st->dir);
	FILE *f = fopen(tmp, "we");
	if (!f)
		return -1;
	fprintf(f,
	        "v=1\nmode=%s\npid=%ld\nnetns=%lu\nlink=%s\ntable=%s\nagent=%s\nfw=%s\nctl=%s\n"
	        "sandbox=%u.%u.%u.%u\n",
	        st->mode == RUN_SYSTEM ? "system" : "private", (long)getpid(), st->netns,
	        st->ifname, st->table, st->agent, o->fw_socket, o->ctl_socket, st->sbx4[0],
	        st->sbx4[1], st->sbx4[2], st->sbx4[3]);
	int bad = ferror(f);
	if (fclose(f) != 0 || bad || rename(tmp, path) != 0)
		return -1;
	return 0;
}

/* Read a record back: the names (from the slot number) and the mode, sockets and namespace. */
static int slot_read(struct run_state *st, struct run_opts *o, char *fw, char *ctl, size_t cap)
{
	char path[300], line[512];
	snprintf(path, sizeof(path), "%s/record", st->dir);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (!strncmp(line, "mode=", 5))
			st->mode = strcmp(line + 5, "system") == 0 ? RUN_SYSTEM : RUN_PRIVATE;
		else if (!strncmp(line, "netns=", 6))
			st->netns = strtoul(line + 6, NULL, 10);
		else if (!strncmp(line, "fw=", 3))
			snprintf(fw, cap, "%s", line + 3);
		else if (!strncmp(line, "ctl=", 4))
			snprintf(ctl, cap, "%s", line + 4);
	}
	fclose(f);
	o->fw_socket = fw;
	o->ctl_socket = ctl;
	return 0;
}

/* Remove the slot's directory and what is in it (files and the private daemons' folders). */
static void slot_rmtree(const char *dir)
{
	DIR *d = opendir(dir);
	if (d) {
		struct dirent *e;
		while ((e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			char p[600];
			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			if (e->d_type == DT_DIR)
				slot_rmtree(p);
			else
				unlink(p);
		}
		closedir(d);
	}
	rmdir(dir);
}

void slot_clean(struct run_state *st, const struct run_opts *o, bool from_record)
{
	bool here = st->netns == slot_netns_ino();
	if (from_record && st->mode == RUN_SYSTEM)
		system_detach(st, o, true);
	/* The link and the table live in the namespace the run started in. */
	if (here) {
		if (rtnl_link_del(st->ifname) < 0)
			run_err("could not delete link %s", st->ifname);
		if (hostnft_del(st->table) < 0)
			run_err("could not delete table inet %s", st->table);
	} else {
		run_err("slot %u was used from another network namespace (inode %lu): its link %s "
		        "and table %s are left to that namespace",
		        st->slot, st->netns, st->ifname, st->table);
	}
	if (st->keep_record) {
		run_err(
		    "slot %u: its record stays in %s: the next moat run or moat run --gc removes "
		    "what is left in the system's daemons",
		    st->slot, st->dir);
		return;
	}
	slot_rmtree(st->dir);
}

/* Lock slot n without waiting: its descriptor, or -1 when another run holds it. */
static int slot_lock(const struct run_opts *o, unsigned n)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/slot-%u.lock", o->state_dir, n);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Slot n is locked by us and has a directory: a dead run's. Clean it; false when its record
 * stays (a daemon could not remove what it names). */
static bool slot_clean_stale(const struct run_opts *o, unsigned n)
{
	struct run_state st = {.lock_fd = -1, .host_ns = -1, .sbx_ns = -1, .fw_fd = -1};
	struct run_opts ro = *o;
	char fw[256] = "", ctl[256] = "";
	slot_names(&st, o, n);
	if (slot_read(&st, &ro, fw, ctl, sizeof(fw)) == 0) {
		st.added_agent = st.added_sandbox = true;
		if (!o->quiet)
			run_err("cleaning up slot %u, left by a run that died", n);
		slot_clean(&st, &ro, true);
		return !st.keep_record;
	}
	slot_rmtree(st.dir);
	return true;
}

/* The state directory: root's, writable by no one else, and searchable (not readable) by
 * others, since the private daemons run as their own users and reach their files in it. */
static int slot_dir_ok(const struct run_opts *o)
{
	if (mkdir(o->state_dir, 0711) != 0 && errno != EEXIST) {
		run_err("%s: %s", o->state_dir, strerror(errno));
		return -1;
	}
	struct stat sb;
	if (lstat(o->state_dir, &sb) != 0 || !S_ISDIR(sb.st_mode) || sb.st_uid != geteuid() ||
	    (sb.st_mode & 0022) || (sb.st_mode & 0011) != 0011) {
		run_err("%s must be a directory of uid %u, mode 0711 (writable by no one else, "
		        "searchable by the daemons' users)",
		        o->state_dir, (unsigned)geteuid());
		return -1;
	}
	return 0;
}

static unsigned slot_count(const struct run_opts *o)
{
	unsigned host_bits = 32 - o->pool_bits;
	unsigned n = host_bits >= 16 ? RUN_SLOTS_MAX : (1u << host_bits) / 4;
	return n > RUN_SLOTS_MAX ? RUN_SLOTS_MAX : n;
}

int slot_gc(const struct run_opts *o, unsigned *left)
{
	if (slot_dir_ok(o) < 0)
		return -1;
	DIR *d = opendir(o->state_dir);
	if (!d)
		return -1;
	int cleaned = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		unsigned n;
		char rest;
		if (sscanf(e->d_name, "slot-%u%c", &n, &rest) != 1 || e->d_type != DT_DIR)
			continue;
		int fd = slot_lock(o, n);
		if (fd < 0)
			continue; /* a live run */
		if (slot_clean_stale(o, n))
			cleaned++;
		else if (left)
			(*left)++;
		close(fd);
	}
	closedir(d);
	return cleaned;
}

int slot_take(const struct run_opts *o, struct run_state *st)
{
	if (slot_gc(o, NULL) < 0)
		return RUN_EXIT_FAIL;
	unsigned max = slot_count(o);
	for (unsigned n = 0; n < max; n++) {
		int fd = slot_lock(o, n);
		if (fd < 0)
			continue;
		slot_names(st, o, n);
		/* Another run may have died there since the sweep above; a record that stays
		 * keeps its slot out of use. */
		if (access(st->dir, F_OK) == 0 && !slot_clean_stale(o, n)) {
			close(fd);
			continue;
		}
		if (mkdir(st->dir, 0711) != 0) {
			run_err("%s: %s", st->dir, strerror(errno));
			close(fd);
			return RUN_EXIT_FAIL;
		}
		st->lock_fd = fd;
		st->netns = slot_netns_ino();
		return 0;
	}
	run_err("all %u slots of the pool are in use", max);
	return RUN_EXIT_FAIL;
}

void slot_release(struct run_state *st)
{
	if (st->lock_fd >= 0)
		close(st->lock_fd);
	st->lock_fd = -1;
}
