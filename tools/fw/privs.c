/* privs.c owns moat-fw's least-privilege step (see privs.h). It runs after the namespace is
 * entered (setns needs CAP_SYS_ADMIN), the socket is bound and the table is built. Capabilities
 * are set with the raw capset call, so no extra library is needed for three masks. */
#include "privs.h"

#include "moat/err.h"

#include <errno.h>
#include <linux/capability.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static int drop_caps(char *err, size_t errlen)
{
	/* The bounding set first: nothing but CAP_NET_ADMIN can ever come back. */
	for (int cap = 0; cap <= 63; cap++) {
		if (cap == CAP_NET_ADMIN)
			continue;
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL) {
			snprintf(err, errlen, "cannot drop capability %d from the bounding set: %m",
			         cap);
			return MOAT_EIO;
		}
	}
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct d[2];
	memset(d, 0, sizeof(d));
	d[CAP_TO_INDEX(CAP_NET_ADMIN)].effective = CAP_TO_MASK(CAP_NET_ADMIN);
	d[CAP_TO_INDEX(CAP_NET_ADMIN)].permitted = CAP_TO_MASK(CAP_NET_ADMIN);
	if (syscall(SYS_capset, &h, d) < 0) {
		snprintf(err, errlen, "cannot keep only CAP_NET_ADMIN: %m");
		return MOAT_EIO;
	}
	return 0;
}

static int no_network(char *err, size_t errlen)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx) {
		snprintf(err, errlen, "seccomp: cannot create a filter");
		return MOAT_ENOMEM;
	}
	static const int families[] = {AF_INET, AF_INET6, AF_PACKET};
	int rc = 0;
	for (size_t i = 0; i < sizeof(families) / sizeof(families[0]) && rc == 0; i++) {
		/* Spelled out rather than SCMP_A0(), whose expansion leaves datum_b to clang's
		 * missing-initializer warning. */
		struct scmp_arg_cmp cmp = {.arg = 0,
		                           .op = SCMP_CMP_EQ,
		                           .datum_a = (scmp_datum_t)families[i],
		                           .datum_b = 0};
		rc = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socket), 1, &cmp);
	}
	if (rc == 0)
		rc = seccomp_load(ctx);
	seccomp_release(ctx);
	if (rc < 0) {
		snprintf(err, errlen, "seccomp: %s", strerror(-rc));
		return MOAT_EIO;
	}
	return 0;
}

int fwprivs_drop(char *err, size_t errlen)
{
	int rc = drop_caps(err, errlen);
	if (rc)
		return rc;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		snprintf(err, errlen, "cannot set no_new_privs: %m");
		return MOAT_EIO;
	}
	return no_network(err, errlen);
}
