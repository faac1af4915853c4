/* control_ask.h: the control socket's ask-mode decisions, moatctl allow / deny (control_ask.c).
 * Main thread (worker 0's loop). */
#ifndef MOAT_CONTROL_ASK_H
#define MOAT_CONTROL_ASK_H

#include <stddef.h>
#include <uv.h>

struct ctl_request;
struct agentstore;
struct policy;

/* The expiry timer of temporary rules, on the control socket's loop. */
void control_ask_init(uv_loop_t *loop);
void control_ask_stop(void);

/* allow / deny: the rule in force when this returns (committed: in the store unless for=),
 * the asks it answers answered. 0 with the reply's members in body, or < 0 with err set (then
 * nothing changed). */
int control_ask_decide(const struct ctl_request *r, char *body, size_t cap, char *err,
                       size_t errlen);

/* At start, after the runtime agents: the kept rules of the store onto *p (replaced by the
 * snapshot that holds them). 0, or < 0 with err set. */
int control_ask_restore(struct agentstore *st, struct policy **p, char *err, size_t errlen);

#endif
