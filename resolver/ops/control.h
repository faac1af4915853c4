/* control.h: moatd's control socket (control.c; protocol in moat/ctlproto.h). Main thread. */
#ifndef MOAT_CONTROL_H
#define MOAT_CONTROL_H

#include <stddef.h>
#include <uv.h>

struct worker;
struct agentstore;

struct control_ops {
	struct worker *ws; /* every worker; ws[0] runs on the control socket's loop */
	unsigned n;
	/* main.c's reload: 0, or < 0 with "file:line: reason" in err (the policy stays) */
	int (*reload)(char *err, size_t errlen);
	const char *version;
	const char *config_path;  /* NULL in flag mode */
	struct agentstore *store; /* runtime agents' store (moat/agentstore.h); NULL: none */
	const char *(*reload_error)(void); /* the last failed reload's reason, "" if none */
};

/* Bind path (mode 0660, group when not NULL) and serve it on loop. Call before privileges
 * drop. Returns 0 or a negative code with err set. */
int control_start(uv_loop_t *loop, const char *path, const char *group,
                  const struct control_ops *ops, char *err, size_t errlen);
/* Close the socket and every connection (the loop then finishes closing them). */
void control_stop(void);

#endif
