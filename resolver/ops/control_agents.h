/* control_agents.h: the control socket's agent commands (control_agents.c). Main thread. */
#ifndef MOAT_CONTROL_AGENTS_H
#define MOAT_CONTROL_AGENTS_H

#include <stdbool.h>
#include <stddef.h>

struct worker;
struct agentstore;
struct agent_spec;

/* The workers to hand snapshots to and the store (NULL: no state_dir, agent add is refused). */
void control_agents_init(struct worker *ws, unsigned n, struct agentstore *store);

struct rpz_feed;
/* The RPZ transfer thread edits must go through (main.c, once it started); NULL: none. */
void control_agents_feed(struct rpz_feed *f);

/* Stage an add or a del on top of the running policy and what is already staged. 0 with the
 * reply's members in body, or < 0 with the reason in err (nothing staged). force: an added
 * range may overlap a config agent's. */
int control_agents_add(const struct agent_spec *spec, bool force, char *body, size_t cap, char *err,
                       size_t errlen);
int control_agents_del(const char *name, char *body, size_t cap, char *err, size_t errlen);

/* For the other commands that edit the snapshot (control_ask.c: moatctl allow / deny): the
 * snapshot to edit (the staged one, else the running one; borrowed), the store (NULL: none),
 * and staging an edit of it (np's reference is handed over), committed with the next commit. */
struct policy;
struct policy *control_agents_current(void);
struct agentstore *control_agents_store(void);
void control_agents_stage(struct policy *np);

/* Anything staged? */
bool control_agents_staged(void);

/* Commit what is staged to the store, then hand the new snapshot to every worker (worker 0,
 * this thread, at once). 0, or < 0 with err set: then nothing staged took effect. */
int control_agents_commit(char *err, size_t errlen);

#endif
