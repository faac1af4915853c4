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
bool config_key_is(const char *k, size_t klen, const char *want);
void config_forwards_free(struct config_forward **v, size_t *n);
void config_agents_free(struct config *cfg);
void config_rpz_free(struct config *cfg);

#endif
