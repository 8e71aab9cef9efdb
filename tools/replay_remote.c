/* engram-stat replay --remote and --verify. --verify compares every row a gather returned with a store-level
 * read (engram_gather_rows) of the same row from the local shard, or from --verify-shard: the full set beside
 * a metadata-only node's. The check reads the reference store between gathers: a verified run's I/O figures
 * are not an unverified run's. */
#include <string.h>

#include "replay_remote.h"
#include "toolutil.h"

int replay_verify_rows(const engram_store *ref, unsigned layer, const uint64_t *rows, size_t n, enum engram_out out,
		       const void *got, void *buf, size_t row_bytes, struct replay_result *r)
{
	int err;

	if (!n)
		return 0;
	if ((err = engram_gather_rows(ref, layer, rows, n, out, buf, n * row_bytes)) < 0) {
		tool_lib_error(err);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		r->verify_mismatches += memcmp((const char *)got + i * row_bytes, (const char *)buf + i * row_bytes,
					       row_bytes) != 0;
	r->verify_rows += n;
	return 0;
}

int replay_remote_json(json_t *run, const struct replay_result *r)
{
	const struct engram_remote_stats *s = &r->remote;
	json_t *rem = !r->has_remote ? json_null()
				     : json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:o}", "rows",
						 (json_int_t)s->rows, "bytes", (json_int_t)s->bytes, "fallbacks",
						 (json_int_t)s->fallbacks, "errors", (json_int_t)s->errors, "timeouts",
						 (json_int_t)s->timeouts, "absent", (json_int_t)s->absent, "bad",
						 (json_int_t)s->bad, "wire_bytes", (json_int_t)s->wire_bytes, "node_failures",
						 (json_int_t)s->node_failures, "moved", (json_int_t)s->moved, "ask",
						 (json_int_t)s->ask, "max_outage_ms", (json_int_t)s->max_outage_ms,
						 "wire_bytes_per_row",
						 s->rows ? json_real((double)s->wire_bytes / (double)s->rows) : json_null());
	json_t *ver = !r->verified ? json_null()
				   : json_pack("{s:I,s:I}", "rows", (json_int_t)r->verify_rows, "mismatches",
					       (json_int_t)r->verify_mismatches);
	if (!rem || !ver || json_object_set_new(run, "remote", rem) || json_object_set_new(run, "verify", ver))
		return -1;
	return 0;
}

void replay_remote_print(FILE *f, const struct replay_result *r, const char *label)
{
	const struct engram_remote_stats *s = &r->remote;

	if ((r->has_remote || r->verified) && *label)
		fprintf(f, "run           %s\n", label);
	if (r->has_remote)
		fprintf(f, "remote        %llu rows (%llu bytes, %.0f wire bytes a row), %llu fallbacks to the disk "
			   "(%llu errors: %llu absent, %llu bad; %llu timeouts), %llu node failures, longest slot "
			   "outage %llu ms\n",
			(unsigned long long)s->rows, (unsigned long long)s->bytes,
			s->rows ? (double)s->wire_bytes / (double)s->rows : 0.0, (unsigned long long)s->fallbacks,
			(unsigned long long)s->errors, (unsigned long long)s->absent, (unsigned long long)s->bad,
			(unsigned long long)s->timeouts, (unsigned long long)s->node_failures,
			(unsigned long long)s->max_outage_ms);
	if (r->verified)
		fprintf(f, "verify        %llu rows compared with the shard's, %llu mismatches\n",
			(unsigned long long)r->verify_rows, (unsigned long long)r->verify_mismatches);
}
