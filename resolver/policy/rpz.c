/* rpz.c owns RPZ zones as policy data: which records of a zone moat takes (QNAME triggers with
 * the passthru, NXDOMAIN and NODATA actions; see moat/rpz.h), the per-action trigger sets, their
 * patching by IXFR, reading zone files with ldns, and the RPZ precedence of a match. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moat/err.h"
#include "moat/pathfd.h"
#include "moat/policy_sig.h"
#include "moat/refcount.h"
#include "moat/rpz.h"

struct rpz_data *rpz_data_new(enum rpz_kind kind, const uint8_t *origin, const char *label)
{
	struct rpz_data *d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->refs = 1;
	d->kind = kind;
	if (origin)
		memcpy(d->origin, origin, (size_t)name_wire_len(origin, NAME_MAXWIRE));
	d->label = strdup(label ? label : "rpz");
	bool ok = d->label != NULL;
	for (int a = 0; a < RPZ_NACTIONS && ok; a++)
		ok = (d->set[a] = policy_set_new()) != NULL;
	if (!ok) {
		rpz_data_unref(d);
		return NULL;
	}
	return d;
}

/* The last hold went: the action sets, the label, the data. */
static void rpz_destroy(struct rpz_data *d)
{
	for (int a = 0; a < RPZ_NACTIONS; a++)
		policy_set_free(d->set[a]);
	free(d->label);
	free(d);
}

REF_PAIR(rpz_data_ref, rpz_data_unref, struct rpz_data, rpz_destroy)

struct rpz_data *rpz_data_copy(const struct rpz_data *o)
{
	struct rpz_data *d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	*d = *o;
	d->refs = 1;
	d->label = strdup(o->label);
	bool ok = d->label != NULL;
	for (int a = 0; a < RPZ_NACTIONS; a++) {
		d->set[a] = ok ? policy_set_clone(o->set[a]) : NULL;
		ok = ok && d->set[a];
	}
	if (!ok) {
		rpz_data_unref(d);
		return NULL;
	}
	return d;
}

size_t rpz_count(const struct rpz_data *d)
{
	size_t n = 0;
	for (int a = 0; a < RPZ_NACTIONS; a++)
		n += policy_set_count(d->set[a]);
	return n;
}

static bool label_is(const uint8_t *label, const char *text)
{
	size_t n = strlen(text);
	if (label[0] != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((label[1 + i] | 0x20) != text[i] && label[1 + i] != text[i])
			return false;
	return true;
}

/* The trigger type named by the label just above the origin ("rpz-ip" ...), or NULL for a
 * QNAME trigger. */
static const char *trigger_kind(const uint8_t *rel)
{
	static const char *const kinds[] = {"rpz-ip", "rpz-nsdname", "rpz-nsip", "rpz-client-ip"};
	const uint8_t *last = rel;
	if (!*rel)
		return NULL;
	while (*name_parent(last))
		last = name_parent(last);
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (label_is(last, kinds[i]))
			return kinds[i];
	if (last[0] >= 4 && !memcmp(last + 1, "rpz-", 4))
		return "unknown rpz-";
	return NULL;
}

/* The action of a CNAME target, or an error text in why. */
static int action_of(const ldns_rdf *target, enum rpz_action *act, char *why, size_t whylen)
{
	const uint8_t *t = ldns_rdf_data(target);
	char txt[NAME_MAXTEXT];
	if (ldns_rdf_size(target) == 1 && !t[0]) {
		*act = RPZ_NXDOMAIN;
		return 0;
	}
	if (t[0] == 1 && t[1] == '*' && !t[2]) {
		*act = RPZ_NODATA;
		return 0;
	}
	if (label_is(t, "rpz-passthru") && !t[t[0] + 1]) {
		*act = RPZ_PASSTHRU;
		return 0;
	}
	name_to_text(t, txt, sizeof(txt));
	if (label_is(t, "rpz-drop") || label_is(t, "rpz-tcp-only"))
		snprintf(why, whylen, "action %.*s is not supported (only rpz-passthru., . and *.)",
		         (int)t[0], (const char *)t + 1);
	else if (t[0] >= 4 && !memcmp(t + 1, "rpz-", 4))
		snprintf(why, whylen, "unknown action %.80s", txt);
	else
		snprintf(why, whylen,
		         "CNAME %.80s is local data, not supported (only rpz-passthru., . and *.)",
		         txt);
	return MOAT_EINVAL;
}

/* What moat takes from a record: its trigger (relative to the origin, lower-cased) and action.
 * Returns 0, 1 for an apex record to ignore, or MOAT_EINVAL with why. */
static int rr_trigger(const struct rpz_data *d, const ldns_rr *rr, uint8_t *trig, bool *wild,
                      enum rpz_action *act, char *why, size_t whylen)
{
	static const char *const act_txt[] = {"rpz-passthru.", ". (NXDOMAIN)", "*. (NODATA)"};
	const ldns_rdf *own = ldns_rr_owner(rr);
	uint8_t lo[NAME_MAXWIRE];
	ldns_rr_type type = ldns_rr_get_type(rr);
	if (ldns_rdf_size(own) > NAME_MAXWIRE)
		return snprintf(why, whylen, "owner name too long"), MOAT_EINVAL;
	memcpy(lo, ldns_rdf_data(own), ldns_rdf_size(own));
	name_lower(lo);
	if (ldns_rr_get_class(rr) != LDNS_RR_CLASS_IN)
		return snprintf(why, whylen, "class is not IN"), MOAT_EINVAL;
	if (!name_is_under(lo, d->origin))
		return snprintf(why, whylen, "outside the zone"), MOAT_EINVAL;
	if (name_equal(lo, d->origin)) {
		if (type == LDNS_RR_TYPE_SOA || type == LDNS_RR_TYPE_NS)
			return 1;
		return snprintf(why, whylen, "only SOA and NS at the zone apex"), MOAT_EINVAL;
	}
	size_t rl =
	    (size_t)(name_wire_len(lo, sizeof(lo)) - name_wire_len(d->origin, NAME_MAXWIRE));
	memcpy(trig, lo, rl);
	trig[rl] = 0;
	const char *tk = trigger_kind(trig);
	if (tk)
		return snprintf(why, whylen, "%s triggers are not supported (QNAME triggers only)",
		                tk),
		       MOAT_EINVAL;
	*wild = trig[0] == 1 && trig[1] == '*';
	if (*wild)
		memmove(trig, trig + 2, rl - 1);
	if (*wild && !trig[0])
		return snprintf(why, whylen, "a wildcard of the whole zone would match every name"),
		       MOAT_EINVAL;
	if (type != LDNS_RR_TYPE_CNAME) {
		const ldns_rr_descriptor *desc = ldns_rr_descript(type);
		const char *t = desc && desc->_name ? desc->_name : "this";
		return snprintf(
		           why, whylen,
		           "%s record: local data is not supported (QNAME triggers take a CNAME "
		           "action only)",
		           t),
		       MOAT_EINVAL;
	}
	if (ldns_rr_rd_count(rr) != 1 || action_of(ldns_rr_rdf(rr, 0), act, why, whylen) < 0)
		return MOAT_EINVAL;
	bool fits = d->kind == RPZ_ALLOW ? *act == RPZ_PASSTHRU : *act != RPZ_PASSTHRU;
	if (!fits)
		return snprintf(why, whylen, "action %s does not belong in %s zone", act_txt[*act],
		                d->kind == RPZ_ALLOW ? "an allow" : "a high-risk"),
		       MOAT_EINVAL;
	return 0;
}

static int fail(const ldns_rr *rr, const char *where, uint32_t line, const char *why, char *err,
                size_t errlen)
{
	char own[NAME_MAXTEXT];
	const ldns_rdf *o = ldns_rr_owner(rr);
	uint8_t w[NAME_MAXWIRE] = {0};
	if (ldns_rdf_size(o) <= NAME_MAXWIRE)
		memcpy(w, ldns_rdf_data(o), ldns_rdf_size(o));
	name_to_text(w, own, sizeof(own));
	if (line)
		snprintf(err, errlen, "%s:%u: %.300s: %s", where, line, own, why);
	else
		snprintf(err, errlen, "%s: %.300s: %s", where, own, why);
	return MOAT_EINVAL;
}

int rpz_data_apply(struct rpz_data *d, const ldns_rr *rr, bool add, const char *where,
                   uint32_t line, char *err, size_t errlen)
{
	uint8_t trig[NAME_MAXWIRE];
	bool wild = false;
	enum rpz_action act = RPZ_PASSTHRU;
	char why[200];
	int rc = rr_trigger(d, rr, trig, &wild, &act, why, sizeof(why));
	if (rc == 1)
		return 0;
	if (rc < 0)
		return fail(rr, where, line, why, err, errlen);
	if (!add) {
		rc = policy_set_remove_wire(d->set[act], trig, wild);
		if (rc == MOAT_ENOENT)
			fail(rr, where, line, "deleted, but the zone does not hold it", err,
			     errlen);
		else if (rc < 0)
			snprintf(err, errlen, "%s: %s", where, moat_strerror(rc));
		return rc;
	}
	for (int a = 0; a < RPZ_NACTIONS; a++)
		if (a != (int)act && policy_set_has_wire(d->set[a], trig, wild))
			return fail(rr, where, line, "trigger listed with two actions", err,
			            errlen);
	if (d->max_triggers && rpz_count(d) >= d->max_triggers) {
		snprintf(
		    err, errlen,
		    "%s: more than %zu triggers (the zone's max_triggers): the zone is refused",
		    where, d->max_triggers);
		return MOAT_ELIMIT;
	}
	rc = policy_set_add_wire(d->set[act], trig, wild, d->label, line);
	if (rc == MOAT_EINVAL)
		return fail(rr, where, line, "'*' inside a label (only *.name)", err, errlen);
	if (rc < 0)
		snprintf(err, errlen, "%s: %s", where, moat_strerror(rc));
	return rc;
}

/* The first record of a file: the SOA, whose owner is the origin. */
static int take_soa(struct rpz_data *d, const ldns_rr *rr, const char *path, int line, char *err,
                    size_t errlen)
{
	const ldns_rdf *o = ldns_rr_owner(rr);
	if (ldns_rr_get_type(rr) != LDNS_RR_TYPE_SOA) {
		snprintf(err, errlen, "%s:%d: the zone must start with its SOA record", path, line);
		return MOAT_EINVAL;
	}
	if (ldns_rdf_size(o) > NAME_MAXWIRE) { /* ldns joins $ORIGIN without checking the length */
		snprintf(err, errlen, "%s:%d: the SOA's owner is longer than 255 bytes", path,
		         line);
		return MOAT_EINVAL;
	}
	memcpy(d->origin, ldns_rdf_data(o), ldns_rdf_size(o));
	name_lower(d->origin);
	d->serial = ldns_rdf2native_int32(ldns_rr_rdf(rr, 2));
	return 0;
}

static int load_records(struct rpz_data *d, FILE *f, const char *path, const uint8_t *origin,
                        char *err, size_t errlen)
{
	uint32_t ttl = 3600;
	ldns_rdf *orig =
	    origin ? ldns_dname_new_frm_data((uint16_t)name_wire_len(origin, 255), origin) : NULL;
	ldns_rdf *prev = NULL;
	int line = 0, rc = 0;
	bool first = true;
	while (!rc && !feof(f)) {
		ldns_rr *rr = NULL;
		ldns_status st = ldns_rr_new_frm_fp_l(&rr, f, &ttl, &orig, &prev, &line);
		if (st == LDNS_STATUS_SYNTAX_EMPTY || st == LDNS_STATUS_SYNTAX_TTL ||
		    st == LDNS_STATUS_SYNTAX_ORIGIN || st == LDNS_STATUS_SYNTAX_INCLUDE) {
			if (st == LDNS_STATUS_SYNTAX_INCLUDE) {
				snprintf(err, errlen, "%s:%d: $INCLUDE is not supported", path,
				         line);
				rc = MOAT_EINVAL;
			}
			continue;
		}
		if (st != LDNS_STATUS_OK) {
			snprintf(err, errlen, "%s:%d: %s", path, line, ldns_get_errorstr_by_id(st));
			rc = MOAT_EINVAL;
			break;
		}
		if (first)
			rc = take_soa(d, rr, path, line, err, errlen);
		first = false;
		if (!rc)
			rc = rpz_data_apply(d, rr, true, path, (uint32_t)line, err, errlen);
		ldns_rr_free(rr);
	}
	if (!rc && first) {
		snprintf(err, errlen, "%s: no records (an RPZ zone starts with its SOA)", path);
		rc = MOAT_EINVAL;
	}
	ldns_rdf_deep_free(orig);
	ldns_rdf_deep_free(prev);
	return rc;
}

int rpz_load_file(enum rpz_kind kind, const char *path, const uint8_t *origin,
                  struct rpz_data **out, char *err, size_t errlen)
{
	return rpz_load_file_signed(kind, path, origin, NULL, 0, out, err, errlen);
}

/* A signed file read through a stream that hashes every byte the parser is handed. */
struct sig_reader {
	int fd;
	struct policy_sig_stream st;
};

static ssize_t sig_read(void *c, char *buf, size_t n)
{
	struct sig_reader *r = c;
	ssize_t got;
	do
		got = read(r->fd, buf, n);
	while (got < 0 && errno == EINTR);
	if (got > 0)
		policy_sig_stream_add(&r->st, buf, (size_t)got);
	return got;
}

/* The zone of a file opened as fd, and with pk its signature over exactly the bytes parsed (read
 * once: a change in between cannot split what is checked from what is loaded). A file that does
 * not parse is still hashed to its end, so a changed file says so rather than where it broke. */
static int load_signed(struct rpz_data *d, int fd, const char *path, const uint8_t *origin,
                       const uint8_t *pk, char *err, size_t errlen)
{
	struct sig_reader r = {.fd = fd};
	int rc = policy_sig_stream_begin(&r.st, path, pk, err, errlen);
	if (rc)
		return rc;
	FILE *f = fopencookie(&r, "r", (cookie_io_functions_t){.read = sig_read});
	if (!f) {
		sodium_memzero(&r.st, sizeof(r.st));
		return MOAT_ENOMEM;
	}
	rc = load_records(d, f, path, origin, err, errlen);
	char tail[4096], why[512];
	while (fread(tail, 1, sizeof(tail), f) > 0)
		;
	bool rerr = ferror(f);
	fclose(f);
	int src = policy_sig_stream_end(&r.st, path, why, sizeof(why));
	if (src || rerr) {
		snprintf(err, errlen, "%s", rerr ? "read error" : why);
		return src ? src : MOAT_EIO;
	}
	return rc;
}

int rpz_load_file_signed(enum rpz_kind kind, const char *path, const uint8_t *origin,
                         const uint8_t *pk, size_t max_triggers, struct rpz_data **out, char *err,
                         size_t errlen)
{
	FILE *f = pathfd_fopen(path); /* also after the privilege drop */
	if (!f) {
		snprintf(err, errlen, "%s: cannot open: %m", path);
		return MOAT_EIO;
	}
	struct rpz_data *d = rpz_data_new(kind, origin, path);
	int rc = MOAT_ENOMEM;
	if (d) {
		d->max_triggers = max_triggers;
		rc = pk ? load_signed(d, fileno(f), path, origin, pk, err, errlen)
		        : load_records(d, f, path, origin, err, errlen);
	}
	fclose(f);
	if (rc == MOAT_ENOMEM)
		snprintf(err, errlen, "%s: %s", path, moat_strerror(rc));
	if (rc) {
		rpz_data_unref(d);
		return rc;
	}
	d->loaded = true;
	d->file = true;
	*out = d;
	return 0;
}

/* a beats b: the exact name before a wildcard, then the nearer (longer) wildcard. */
static bool rule_better(const struct policy_rule *a, const struct policy_rule *b)
{
	if (a->wildcard != b->wildcard)
		return !a->wildcard;
	return name_wire_len(a->at, NAME_MAXWIRE) > name_wire_len(b->at, NAME_MAXWIRE);
}

bool rpz_match(const struct rpz_data *d, const uint8_t *lname, enum rpz_action *act,
               struct policy_rule *rule)
{
	struct policy_rule best = {0}, r;
	int besta = -1;
	if (!d->loaded)
		return false;
	for (int a = 0; a < RPZ_NACTIONS; a++)
		if (policy_set_count(d->set[a]) && policy_set_match(d->set[a], lname, &r) &&
		    (besta < 0 || rule_better(&r, &best))) {
			best = r;
			besta = a;
		}
	if (besta < 0)
		return false;
	if (act)
		*act = (enum rpz_action)besta;
	if (rule) {
		*rule = best;
		if (!d->file)
			rule->line = 0; /* the set numbers every rule; a transfer has no lines */
	}
	return true;
}
