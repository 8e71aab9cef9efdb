/* The labels of a process's series: parsed, validated, merged (stats_labels.h). */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"
#include "stats_labels.h"

/* The series' own label names (engram-stat metrics writes them) and Prometheus' target labels. */
static const char *const reserved[] = { "pid", "run", "set", "layer", "tier", "kind", "path", "le", "job",
					"instance", "quantile" };

/* Length of the valid UTF-8 sequence at s (shortest form, no surrogates, at most U+10FFFF), or 0. */
static size_t utf8_char(const unsigned char *s)
{
	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		return (s[1] & 0xc0) == 0x80 ? 2 : 0;
	if (s[0] >= 0xe0 && s[0] <= 0xef) {
		unsigned lo = s[0] == 0xe0 ? 0xa0 : 0x80, hi = s[0] == 0xed ? 0x9f : 0xbf;
		return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 ? 3 : 0;
	}
	if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		unsigned lo = s[0] == 0xf0 ? 0x90 : 0x80, hi = s[0] == 0xf4 ? 0x8f : 0xbf;
		return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 && (s[3] & 0xc0) == 0x80 ? 4 : 0;
	}
	return 0;
}

const char *eg_stats_label_invalid(const struct engram_stats_label *l)
{
	const char *n = l->name;
	size_t nl = strnlen(n, sizeof(l->name)), vl = strnlen(l->value, sizeof(l->value));

	if (nl == 0)
		return "an empty name";
	if (nl == sizeof(l->name))
		return "a name longer than 31 bytes";
	for (size_t i = 0; i < nl; i++)
		if (!(n[i] == '_' || (n[i] >= 'a' && n[i] <= 'z') || (n[i] >= 'A' && n[i] <= 'Z') ||
		      (i && n[i] >= '0' && n[i] <= '9')))
			return "a name not of the form [a-zA-Z_][a-zA-Z0-9_]*";
	if (n[0] == '_' && n[1] == '_')
		return "a name beginning with __ (Prometheus' own)";
	for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
		if (!strcmp(n, reserved[i]))
			return "a name the series have already (pid, run, set, layer, tier, kind, path, le, job, instance, "
			       "quantile)";
	if (vl == 0)
		return "an empty value";
	if (vl == sizeof(l->value))
		return "a value longer than 127 bytes";
	for (size_t i = 0; i < vl;) {
		const unsigned char *c = (const unsigned char *)l->value + i;
		size_t k = utf8_char(c);
		if (!k || i + k > vl)
			return "a value that is not UTF-8";
		if (*c < 0x20 || *c == 0x7f || *c == ',')
			return "a value with a control character or a comma";
		i += k;
	}
	return NULL;
}

int eg_stats_labels_parse(const char *text, const char *what, struct engram_stats_label *out, unsigned *n)
{
	*n = 0;
	for (const char *p = text; p && *p;) {
		const char *end = strchr(p, ','), *eq;
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (*n == ENGRAM_STATS_LABELS_MAX)
			return eg_fail(-EINVAL, "%s: more than %u labels", what, ENGRAM_STATS_LABELS_MAX);
		struct engram_stats_label *l = &out[*n];
		memset(l, 0, sizeof(*l));
		if (!(eq = memchr(p, '=', len)))
			return eg_fail(-EINVAL, "%s: '%.*s' is not NAME=VALUE", what, (int)(len < 64 ? len : 64), p);
		size_t nl = (size_t)(eq - p), vl = len - nl - 1;
		/* one byte too many is kept, so that the check says the part is too long */
		memcpy(l->name, p, nl < sizeof(l->name) ? nl : sizeof(l->name));
		memcpy(l->value, eq + 1, vl < sizeof(l->value) ? vl : sizeof(l->value));
		const char *why = eg_stats_label_invalid(l);
		if (why)
			return eg_fail(-EINVAL, "%s: label '%.*s': %s", what, (int)(nl < 40 ? nl : 40), p, why);
		for (unsigned k = 0; k < *n; k++)
			if (!strcmp(out[k].name, l->name))
				return eg_fail(-EINVAL, "%s: label '%s' given twice", what, l->name);
		(*n)++;
		p = end ? end + 1 : p + len;
		if (end && !*p)
			return eg_fail(-EINVAL, "%s: a comma at the end", what);
	}
	return 0;
}

int eg_stats_labels_merge(struct engram_stats_label *have, unsigned *n_have, const struct engram_stats_label *add,
			  unsigned n_add, const char *what)
{
	unsigned n = *n_have;

	for (unsigned i = 0; i < n_add; i++) {
		unsigned k = 0;
		while (k < *n_have && strcmp(have[k].name, add[i].name))
			k++;
		if (k < *n_have) {
			if (strcmp(have[k].value, add[i].value))
				return eg_fail(-EINVAL, "%s: label %s=%s: this process's %s is '%s' already (a label is the "
							"process's: one value)", what, add[i].name, add[i].value,
					       add[i].name, have[k].value);
			continue;
		}
		n++;
	}
	if (n > ENGRAM_STATS_LABELS_MAX)
		return eg_fail(-EINVAL, "%s: the process would have %u labels, at most %u", what, n,
			       ENGRAM_STATS_LABELS_MAX);
	for (unsigned i = 0; i < n_add; i++) {
		unsigned k = 0;
		while (k < *n_have && strcmp(have[k].name, add[i].name))
			k++;
		if (k == *n_have)
			have[(*n_have)++] = add[i];
	}
	return 0;
}
