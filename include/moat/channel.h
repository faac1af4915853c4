/* The narrow channels of an agent besides its label budget (moat/budget.h), issue 26: which
 * query types it may ask (each question's type is a choice the upstream sees: log2 of the
 * allowed set's size in bits a query, 3 for the default eight) and how much an answer may
 * carry back to it (bytes, records, TXT records or not). Pure functions of the agent's
 * config_channel (moat/config.h). */
#ifndef MOAT_CHANNEL_H
#define MOAT_CHANNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moat/config.h"
#include "moat/wire.h"

/* The default qtypes: what client libraries ask (A, AAAA, HTTPS, SVCB, CNAME, TXT, MX, SRV). */
extern const uint16_t channel_default_qtypes[8];

/* Whether a may ask qtype. ANY is always allowed: moatd answers it itself (RFC 8482), so it
 * never reaches an upstream. */
bool channel_qtype_allowed(const struct config_channel *c, uint16_t qtype);

/* The answer built for a client of agent, pkt of len bytes, against c's caps (records: answer
 * and authority, as the header counts them). Returns true and writes why
 * ("answer of 9000 bytes is over agent ci-42's cap of 8192") when it is over one. */
bool channel_answer_over(const struct config_channel *c, const char *agent, const uint8_t *pkt,
                         size_t len, char *why, size_t cap);

/* "A AAAA HTTPS ..." (or "any") into out; returns out. */
const char *channel_qtypes_text(const struct config_channel *c, char *out, size_t cap);

#endif
