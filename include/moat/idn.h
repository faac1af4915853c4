/* Names as users write them: the text of an allowlist line or a config value turned into the
 * ASCII presentation form moat parses (name_from_text). UTF-8 names become A-labels with
 * libidn2 (IDNA 2008 with the UTS #46 mapping, non-transitional: "Bücher.example" ->
 * "xn--bcher-kva.example"); A-labels written directly are checked the same way. Text that is not
 * a host name at all (a URL, a "name:port", control bytes, NUL) is refused with a hint, because
 * such a line would load and then never match anything. Pure and thread-safe. */
#ifndef MOAT_IDN_H
#define MOAT_IDN_H

#include <stddef.h>

/* Room for a converted name: a wire name is at most 255 bytes, its text a little more. */
#define IDN_MAXTEXT 1024

/* Check and convert in[0..len) (a name, optionally "*." in front; a trailing dot is kept).
 * Returns 0 when in can be used as it is (plain ASCII, no A-label), the length of the converted
 * text written to out[cap] (NUL-terminated), or MOAT_EINVAL with why[whylen] saying what is wrong
 * and what to write instead ("a URL; write the host name only: example.com"). */
int idn_from_user(const char *in, size_t len, char *out, size_t cap, char *why, size_t whylen);

/* Copy text into an error message with every byte that is not printable ASCII shown as '?' and
 * at most 64 bytes quoted ("..." marks a cut): errors end up in terminals and logs. */
void idn_quote(const char *in, size_t len, char *out, size_t cap);

#endif
