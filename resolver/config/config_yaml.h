/* The YAML reader's internal interface, shared by config_yaml.c (nodes, scalars, the document),
 * config_yaml_root.c (the top-level keys) and config_yaml_agent.c (agents, forward zones, local
 * answers, RPZ zones). Not installed: only the config modules include it; the model's own
 * helpers they use are config/config_model.h's. */
#ifndef MOAT_CONFIG_YAML_H
#define MOAT_CONFIG_YAML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config_model.h"
#include "moat/config.h"

struct fy_node; /* libfyaml's; only the config_yaml*.c files include libfyaml.h */

/* --- config_yaml.c: one file being read, its nodes and scalars --- */
struct config_ctx {
	struct config *cfg;
	const char *label;   /* file name (or caller's label) for errors */
	const char *basedir; /* relative policy paths are joined to it; NULL keeps them as given */
	char *err;
	size_t errlen;
	/* --check (cfg->check_max_errors > 1): errors are appended to err, one per line, up to
	 * max_errors, and the walks over mappings and the agent list go on past them. */
	unsigned max_errors, nerrors;
};

int config_fail(struct config_ctx *c, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int config_node_line(struct fy_node *n, int fallback);
bool config_is_alias(struct fy_node *n);
bool config_is_null(struct fy_node *n);
int config_text(struct config_ctx *c, struct fy_node *v, int line, const char *key,
                const char *what, const char **text, size_t *len);
int config_scalar(struct config_ctx *c, struct fy_node *v, int line, const char *key,
                  const char *what, char *buf, size_t buflen);
int config_u32(struct config_ctx *c, struct fy_node *v, int line, const char *key, uint32_t min,
               uint32_t max, uint32_t *out);
int config_u32_as(struct config_ctx *c, struct fy_node *v, int line, const char *key,
                  const char *limit, uint32_t *out);
int config_bool(struct config_ctx *c, struct fy_node *v, int line, const char *key, bool *out);
int config_path(struct config_ctx *c, struct fy_node *v, int line, const char *key,
                bool relative_to_config, char **out);
int config_seq(struct config_ctx *c, struct fy_node *v, int line, const char *key);
int config_paths(struct config_ctx *c, struct fy_node *v, int line, const char *key, char ***outv,
                 size_t *outn, bool append, int **outlines);
int config_addrports(struct config_ctx *c, struct fy_node *v, int line, const char *key,
                     struct sockaddr_storage **outv, size_t *outn, int **outlines);
int config_dup_keys(struct config_ctx *c, struct fy_node *m, int line);
int config_key(struct config_ctx *c, struct fy_node *k, int line, const char **ks, size_t *klen);
int config_unknown(struct config_ctx *c, int line, const char *ks, size_t klen);
/* One pair of a mapping: its key's text (ks, klen; config_key checked it), its value v and the
 * key's line. 0, or an error that stops the walk. */
typedef int config_pair_fn(struct config_ctx *c, const char *ks, size_t klen, struct fy_node *v,
                           int kline, void *arg);
/* Call fn(..., arg) for each pair of mapping m in order (line: the fallback for nodes without a
 * mark); the first error stops the walk and is returned. */
int config_each_pair(struct config_ctx *c, struct fy_node *m, int line, config_pair_fn *fn,
                     void *arg);

/* --- config_yaml_root.c: the top-level mapping --- */
int config_root(struct config_ctx *c, struct fy_node *root);

/* --- config_yaml_agent.c: the lists of agents, forward zones, local answers, RPZ zones --- */
int config_agents(struct config_ctx *c, struct fy_node *v, int line);
int config_forwards(struct config_ctx *c, struct fy_node *v, int line, struct config_forward **outv,
                    size_t *outn);
int config_lines_list(struct config_ctx *c, struct fy_node *v, int line, const char *key,
                      bool paths, char ***outv, int **outlines, size_t *outn);
int config_rpz_list(struct config_ctx *c, struct fy_node *v, int line);
int config_rpz_names(struct config_ctx *c, struct fy_node *v, int line, const char *key,
                     char ***outv, int **lines, size_t *n);

#endif
