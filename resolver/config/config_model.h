/* The model's helpers (config.c) that the YAML reader (config_yaml*.c) uses too: quoting a
 * value for a message, freeing lists, comparing a key. Not installed. */
#ifndef MOAT_CONFIG_MODEL_H
#define MOAT_CONFIG_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "moat/config.h"

/* How much of an offending value an error message quotes. */
#define CONFIG_QUOTE_MAX 64

void config_quote(char *out, size_t outlen, const char *s, size_t len);
void config_strv_free(char ***v, size_t *n);
/* True when the key (klen bytes) is want. Every want asked since the last
 * config_key_tried_reset is remembered (per thread) as a key the reader knows at that place,
 * so an unknown key can be answered with the nearest known one from the reader's own
 * comparisons: the if-chains stay the one list of keys. */
bool config_key_is(const char *k, size_t klen, const char *want);
void config_key_tried_reset(void);
/* The known key nearest to k among those tried (a small edit distance, or one key a prefix of
 * the other: "allowlist" -> "allow"), or NULL when none is near. */
const char *config_key_nearest(const char *k, size_t klen);
void config_forwards_free(struct config_forward **v, size_t *n);
void config_agents_free(struct config *cfg);
void config_rpz_free(struct config *cfg);

#endif
