/* Reading moatd's YAML config file (format in moat/config.h) into the model: the entry points of
 * the reader (resolver/config/config_yaml*.c, the only libfyaml user). */
#ifndef MOAT_CONFIG_LOAD_H
#define MOAT_CONFIG_LOAD_H

#include <stddef.h>

#include "moat/config.h"

/* Parse a YAML config file into cfg (which config_init prepared). Values given in the file
 * replace the defaults. On error returns MOAT_EINVAL (or MOAT_EIO/MOAT_ENOMEM) and err holds
 * "path:line: reason"; cfg then holds partial data that config_free releases. */
int config_load_file(struct config *cfg, const char *path, char *err, size_t errlen);

/* The same from a buffer; label names it in errors. For tests and fuzzing. */
int config_load_string(struct config *cfg, const char *text, size_t len, const char *label,
                       char *err, size_t errlen);

#endif
