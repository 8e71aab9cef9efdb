/* Copying a table set's rows into a Redis Cluster (engram_remote_load; the layout is remote.h's).
 *
 * Order of writes, so that no reader ever takes a partial copy for a whole one: the completion key is deleted
 * first (a set reloaded over an old copy is incomplete from then on), then the rows, a batch of BATCH_GROUPS
 * keys at a time pipelined to each key's master, every reply checked, then the progress key ("<layer index>
 * <group>": everything before is loaded) after each batch, and the completion key last. A load stopped at any
 * point (killed, a node lost, -ECANCELED) resumes from the progress key. A restart deletes the completion and
 * progress keys before anything else. The loader's connections are its own (remote_sync.c), one command at a
 * time or a pipelined batch, every reply checked as it arrives (remote_reply.c) and owed within timeout_ms of when
 * the loader starts waiting for it (opening the cluster is one deadline of timeout_ms): loading is a tool's job,
 * not the serving path. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "remote.h"
#include "store.h"

#define BATCH_GROUPS 256u
#define MAX_RETRIES 5
#define INFO_BYTES (64u << 10)  /* the longest INFO memory reply taken */
#define PROGRESS_BYTES 64u      /* the longest progress key ("<layer> <group>") */

struct loader {
	const engram_store *st;
	struct eg_remote *map;          /* for the slot map only */
	unsigned timeout_ms;
	struct eg_remote_conn *ctx;     /* per node of the map, connected on demand */
	int n_ctx;
	unsigned *pending;              /* per node: replies owed in this batch */
	const uint8_t *set_id;
};

static const char *node_name(struct loader *ld, int ni, char *buf, size_t len)
{
	int port;
	const char *host = eg_remote_node(ld->map, ni, &port);

	snprintf(buf, len, "%s:%d", host, port);
	return buf;
}

/* Node ni's connection, made by the timeout when needed: NULL with the error set and in *err. */
static redisContext *node_ctx(struct loader *ld, int ni, int *err)
{
	int port;
	const char *host = eg_remote_node(ld->map, ni, &port);

	if (ni >= ld->n_ctx) {
		int n = eg_remote_n_nodes(ld->map);
		struct eg_remote_conn *v = realloc(ld->ctx, (size_t)n * sizeof(*v));
		unsigned *p = v ? realloc(ld->pending, (size_t)n * sizeof(*p)) : NULL;
		if (v)
			ld->ctx = v;
		if (!p) {
			*err = eg_fail(-ENOMEM, "out of memory");
			return NULL;
		}
		ld->pending = p;
		for (int i = ld->n_ctx; i < n; i++) {
			ld->ctx[i].c = NULL;
			ld->pending[i] = 0;
		}
		ld->n_ctx = n;
	}
	if (ld->ctx[ni].c)
		return ld->ctx[ni].c;
	if ((*err = eg_remote_conn_open(&ld->ctx[ni], host, port, eg_remote_now_ms() + ld->timeout_ms)) < 0) {
		eg_fail(*err, "remote %s:%d: %s", host, port, engram_strerror(*err));
		return NULL;
	}
	return ld->ctx[ni].c;
}

static void drop_ctx(struct loader *ld, int ni)
{
	if (ni < ld->n_ctx)
		eg_remote_conn_close(&ld->ctx[ni]);
}

/* The next reply of node ni, owing kind (max: the longest bulk string), within the timeout: NULL with the error
 * set (naming the node; its connection dropped) and in *err. */
static redisReply *node_reply(struct loader *ld, int ni, enum eg_reply_kind kind, uint64_t max, int *err)
{
	const char *why;
	char name[80];
	redisReply *rep = eg_remote_conn_reply(&ld->ctx[ni], kind, max, eg_remote_now_ms() + ld->timeout_ms, err, &why);

	if (!rep) {
		*err = eg_fail(*err, "remote %s: %s", node_name(ld, ni, name, sizeof(name)), why ? why : engram_strerror(*err));
		drop_ctx(ld, ni);
	}
	return rep;
}

/* One command on the master of key's slot, its reply owing kind (max: the longest bulk string): the reply, or
 * NULL (the error set). */
static redisReply *key_command(struct loader *ld, const char *key, size_t klen, enum eg_reply_kind kind, uint64_t max,
			       int *err, const char *fmt, const void *val, size_t vlen)
{
	int ni = eg_remote_slot_node(ld->map, eg_remote_slot(key, klen));
	char name[80];
	redisContext *c;
	redisReply *rep;

	if (ni < 0) {
		*err = eg_fail(-EPROTO, "remote: no node serves the slot of '%s'", key);
		return NULL;
	}
	if (!(c = node_ctx(ld, ni, err)))
		return NULL;
	if ((val ? redisAppendCommand(c, fmt, key, klen, val, vlen) : redisAppendCommand(c, fmt, key, klen)) != REDIS_OK) {
		*err = eg_fail(-ENOMEM, "out of memory");
		return NULL;
	}
	if (!(rep = node_reply(ld, ni, kind, max, err)))
		return NULL;
	if (rep->type == REDIS_REPLY_ERROR) {
		*err = eg_fail(-EPROTO, "remote %s: %s", node_name(ld, ni, name, sizeof(name)), rep->str);
		freeReplyObject(rep);
		return NULL;
	}
	return rep;
}

/* INFO memory used_memory summed over the nodes that serve slots; *masters counts them. */
static uint64_t used_memory(struct loader *ld, unsigned *masters)
{
	uint64_t sum = 0;
	int err;
	int n = eg_remote_n_nodes(ld->map);

	*masters = 0;
	for (int ni = 0; ni < n; ni++) {
		int serves = 0;
		for (unsigned s = 0; s < EG_REMOTE_SLOTS && !serves; s++)
			serves = eg_remote_slot_node(ld->map, s) == ni;
		redisContext *c = serves ? node_ctx(ld, ni, &err) : NULL;
		redisReply *rep = c && redisAppendCommand(c, "INFO memory") == REDIS_OK
					  ? node_reply(ld, ni, EG_REPLY_BULK, INFO_BYTES, &err)
					  : NULL;
		if (rep && rep->type == REDIS_REPLY_STRING) {
			const char *p = strstr(rep->str, "used_memory:");
			if (p)
				sum += strtoull(p + 12, NULL, 10);
			++*masters;
		}
		if (rep)
			freeReplyObject(rep);
	}
	return sum;
}

struct batch {
	unsigned layer;
	uint64_t group0;
	unsigned n;                     /* groups */
	uint8_t *vals;                  /* BATCH_GROUPS values of EG_REMOTE_GROUP records */
	size_t *len;
	uint64_t rows, row_bytes, value_bytes;
};

/* Encode groups [b->group0, +n) of a layer into the batch. */
static int encode(struct loader *ld, struct batch *b, size_t vmax)
{
	const engram_config *cfg = ld->st->cfg;
	const struct eg_disk_table *t = eg_store_layer_table(ld->st, b->layer);
	uint32_t rec = t->record_size;
	int err;

	b->rows = b->row_bytes = b->value_bytes = 0;
	for (unsigned g = 0; g < b->n; g++) {
		uint64_t first = (b->group0 + g) * EG_REMOTE_GROUP, rows = cfg->layers[b->layer].rows;
		uint8_t *v = b->vals + (size_t)g * vmax;
		size_t k = 0;
		for (uint64_t row = first; row < first + EG_REMOTE_GROUP && row < rows; row++, k++) {
			uint8_t *recp = v + k * (EG_REMOTE_HDR + rec);
			if ((err = engram_read_row(ld->st, b->layer, row, recp + EG_REMOTE_HDR, rec)) < 0)
				return err;
			/* encode in place: the row is already where the record wants it */
			eg_remote_encode(recp, ld->set_id, cfg->layers[b->layer].id, row, recp + EG_REMOTE_HDR, rec);
		}
		b->len[g] = k * (EG_REMOTE_HDR + rec);
		b->rows += k;
		b->row_bytes += k * rec;
		b->value_bytes += b->len[g];
	}
	return 0;
}

/* Write a batch: 0, 1 when a redirection says the slot map changed (write it again), or an error. */
static int write_batch(struct loader *ld, const struct batch *b, size_t vmax)
{
	const engram_config *cfg = ld->st->cfg;
	char key[EG_REMOTE_KEY_MAX], name[80];
	int moved = 0, err = 0;

	for (unsigned g = 0; g < b->n; g++) {
		size_t klen = eg_remote_key(key, ld->set_id, cfg->layers[b->layer].id, b->group0 + g);
		int ni = eg_remote_slot_node(ld->map, eg_remote_slot(key, klen));
		redisContext *c = ni < 0 ? NULL : node_ctx(ld, ni, &err);
		if (!c)
			return ni < 0 ? eg_fail(-EPROTO, "remote: no node serves the slot of '%s'", key) : err;
		if (redisAppendCommand(c, "SET %b %b", key, klen, b->vals + (size_t)g * vmax, b->len[g]) != REDIS_OK)
			return eg_fail(-ENOMEM, "out of memory");
		ld->pending[ni]++;
	}
	for (int ni = 0; ni < ld->n_ctx; ni++) {
		for (; ld->pending[ni]; ld->pending[ni]--) {
			redisReply *rep;
			if (err || !ld->ctx[ni].c || !(rep = node_reply(ld, ni, EG_REPLY_STATUS, 0, &err)))
				continue;
			if (rep->type == REDIS_REPLY_ERROR) {
				if (!strncmp(rep->str, "MOVED ", 6) || !strncmp(rep->str, "ASK ", 4) ||
				    !strncmp(rep->str, "TRYAGAIN", 8))
					moved = 1;
				else
					err = eg_fail(-EPROTO, "remote %s: %s", node_name(ld, ni, name, sizeof(name)),
						      rep->str);
			}
			freeReplyObject(rep);
		}
		if (err)
			drop_ctx(ld, ni);
	}
	return err < 0 ? err : moved;
}

static void loader_free(struct loader *ld)
{
	for (int i = 0; i < ld->n_ctx; i++)
		drop_ctx(ld, i);
	free(ld->ctx);
	free(ld->pending);
	eg_remote_close(ld->map);
}

/* key_command on the set's meta key "what" (load, done): the reply, or NULL (the error set, and in *err). */
static redisReply *meta_command(struct loader *ld, const char *what, enum eg_reply_kind kind, uint64_t max, int *err,
				const char *fmt, const char *val, size_t vlen)
{
	char key[EG_REMOTE_KEY_MAX];
	size_t klen = eg_remote_meta_key(key, ld->set_id, what);

	return key_command(ld, key, klen, kind, max, err, fmt, val, vlen);
}

/* SET of the set's meta key "what" to text: 0 or the error. */
static int meta_set(struct loader *ld, const char *what, const char *text, int len)
{
	int err = 0;
	redisReply *rep = meta_command(ld, what, EG_REPLY_STATUS, 0, &err, "SET %b %b", text, (size_t)len);

	if (rep)
		freeReplyObject(rep);
	return err;
}

/* A store whose rows can be loaded: -EINVAL naming a shard that holds no table data. */
static int check_loadable(const engram_store *st)
{
	for (unsigned i = 0; i < st->n_shards; i++)
		if (st->shards[i].hdr->flags & EG_HDR_NO_DATA)
			return eg_fail(-EINVAL, "'%s' holds no table data (a metadata-only shard): load from the full set",
				       st->shards[i].path);
	return 0;
}

/* The set's rows in all, and the bytes of its largest value (a group of records of the widest table). */
static size_t largest_value(const engram_store *st, uint64_t *rows_total)
{
	size_t vmax = 0;

	for (unsigned l = 0; l < st->cfg->n_layers; l++) {
		const struct eg_disk_table *t = eg_store_layer_table(st, l);
		*rows_total += st->cfg->layers[l].rows;
		if (t && EG_REMOTE_GROUP * ((size_t)EG_REMOTE_HDR + t->record_size) > vmax)
			vmax = EG_REMOTE_GROUP * ((size_t)EG_REMOTE_HDR + t->record_size);
	}
	return vmax;
}

/* restart: the completion and progress keys deleted, so that the set is incomplete from now until every row is
 * written again. 0 or the error. */
static int forget_load(struct loader *ld)
{
	int err = 0;

	for (const char *const *what = (const char *const[]){ "done", "load", NULL }; *what; what++) {
		redisReply *rep = meta_command(ld, *what, EG_REPLY_INTEGER, 0, &err, "DEL %b", NULL, 0);
		if (!rep)
			return err;
		freeReplyObject(rep);
	}
	return 0;
}

/* Is the set complete already (its completion key present)? 1, 0, or the error. */
static int load_complete(struct loader *ld)
{
	int err = 0;
	redisReply *rep = meta_command(ld, "done", EG_REPLY_INTEGER, 0, &err, "EXISTS %b", NULL, 0);

	if (!rep)
		return err;
	err = rep->type == REDIS_REPLY_INTEGER && rep->integer == 1;
	freeReplyObject(rep);
	return err;
}

/* Where an earlier run stopped (its progress key: everything before layer *layer0, group *group0 is loaded; 0 0
 * when there is none), and the rows it loaded into res->rows_resumed. 0 or the error. */
static int resume_point(struct loader *ld, unsigned *layer0, uint64_t *group0, struct engram_remote_load_result *res)
{
	const engram_config *cfg = ld->st->cfg;
	int err = 0;
	redisReply *rep = meta_command(ld, "load", EG_REPLY_BULK, PROGRESS_BYTES, &err, "GET %b", NULL, 0);

	if (!rep)
		return err;
	if (rep->type == REDIS_REPLY_STRING && sscanf(rep->str, "%u %llu", layer0, (unsigned long long *)group0) == 2 &&
	    *layer0 <= cfg->n_layers) {
		for (unsigned l = 0; l < *layer0; l++)
			res->rows_resumed += cfg->layers[l].rows;
		if (*layer0 < cfg->n_layers) {
			uint64_t r = *group0 * EG_REMOTE_GROUP;
			res->rows_resumed += r < cfg->layers[*layer0].rows ? r : cfg->layers[*layer0].rows;
		}
	} else {
		*layer0 = 0;
		*group0 = 0;
	}
	freeReplyObject(rep);
	return 0;
}

/* One batch encoded and written, written again after the slot map is read again while its keys move (MOVED, ASK),
 * at most MAX_RETRIES times. 0 or the error. */
static int put_batch(struct loader *ld, struct batch *b, size_t vmax)
{
	int err, tries = 0;

	if ((err = encode(ld, b, vmax)) < 0)
		return err;
	while ((err = write_batch(ld, b, vmax)) == 1 && ++tries < MAX_RETRIES) {
		if ((err = eg_remote_refresh(ld->map)) < 0)
			return err;
		for (int i = 0; i < ld->n_ctx; i++) /* a node's index may now be another address's */
			drop_ctx(ld, i);
	}
	return err == 1 ? eg_fail(-EPROTO, "remote: the slot map kept changing while loading") : err;
}

/* Every row from layer0, group0 on, a batch at a time, the progress key written after each batch; stopped by the
 * row limit or the progress callback (-ECANCELED). 0 or the error. */
static int load_rows(struct loader *ld, const struct engram_remote_load_options *o, struct batch *b, size_t vmax,
		     unsigned layer0, uint64_t group0, struct engram_remote_load_result *res)
{
	const engram_config *cfg = ld->st->cfg;
	char text[160];
	int err;

	for (unsigned l = layer0; l < cfg->n_layers; l++) {
		uint64_t groups = (cfg->layers[l].rows + EG_REMOTE_GROUP - 1) / EG_REMOTE_GROUP;
		for (uint64_t g = l == layer0 ? group0 : 0; g < groups; g += b->n) {
			if (o->limit_rows && res->rows_loaded >= o->limit_rows)
				return eg_fail(-ECANCELED, "remote load stopped after %llu rows (the limit): the set is "
					       "marked incomplete; run again to resume", (unsigned long long)res->rows_loaded);
			b->layer = l;
			b->group0 = g;
			b->n = groups - g < BATCH_GROUPS ? (unsigned)(groups - g) : BATCH_GROUPS;
			if ((err = put_batch(ld, b, vmax)) < 0)
				return err;
			res->rows_loaded += b->rows;
			res->row_bytes += b->row_bytes;
			res->value_bytes += b->value_bytes;
			res->keys += b->n;
			int tl = snprintf(text, sizeof(text), "%u %llu", g + b->n < groups ? l : l + 1,
					  (unsigned long long)(g + b->n < groups ? g + b->n : 0));
			if ((err = meta_set(ld, "load", text, tl)) < 0)
				return err;
			if (o->progress && o->progress(o->progress_arg, res->rows_resumed + res->rows_loaded, res->rows_total))
				return eg_fail(-ECANCELED, "remote load cancelled: the set is marked incomplete; run again to "
					       "resume");
		}
	}
	return 0;
}

/* The load as its order of writes has it (the comment at the top): 0 or the error, res filled as far as it got. */
static int load(struct loader *ld, const struct engram_remote_load_options *o, struct engram_remote_load_result *res)
{
	const engram_store *st = ld->st;
	size_t vmax = largest_value(st, &res->rows_total);
	struct batch b = { 0 };
	unsigned layer0 = 0;
	uint64_t group0 = 0;
	char text[160];
	int err, tl;

	b.vals = malloc(BATCH_GROUPS * vmax);
	b.len = malloc(BATCH_GROUPS * sizeof(*b.len));
	if (!b.vals || !b.len) {
		err = eg_fail(-ENOMEM, "out of memory for a batch of %u keys", BATCH_GROUPS);
		goto out;
	}
	res->used_memory_before = used_memory(ld, &res->masters);
	if (o->restart && (err = forget_load(ld)) < 0)
		goto out;
	if ((err = load_complete(ld)) != 0) { /* complete already: nothing to do */
		if (err > 0) {
			res->already_complete = 1;
			res->rows_resumed = res->rows_total;
			res->used_memory_after = res->used_memory_before;
			err = 0;
		}
		goto out;
	}
	if ((err = resume_point(ld, &layer0, &group0, res)) < 0 ||
	    (err = load_rows(ld, o, &b, vmax, layer0, group0, res)) < 0)
		goto out;
	tl = snprintf(text, sizeof(text), "libengram remote set: %llu rows, %u layers, %u rows a key",
			  (unsigned long long)res->rows_total, st->cfg->n_layers, EG_REMOTE_GROUP);
	if ((err = meta_set(ld, "done", text, tl)) < 0)
		goto out;
	res->used_memory_after = used_memory(ld, &res->masters);
out:
	free(b.vals);
	free(b.len);
	return err;
}

ENGRAM_API int engram_remote_load(const engram_store *st, const struct engram_remote_load_options *opts,
				  struct engram_remote_load_result *result)
{
	EG_KEEP_ERRNO;
	struct engram_remote_load_options o = { .size = sizeof(o) };
	struct engram_remote_load_result res = { .size = sizeof(res) };
	struct loader ld = { .st = st };
	struct eg_sigpipe sp;
	int err;

	if (!st || !opts)
		return eg_fail(-EINVAL, "engram_remote_load: NULL argument");
	if ((err = eg_struct_in(&o, sizeof(o), opts, EG_SIZE_THROUGH(struct engram_remote_load_options, progress_arg),
				"remote load options")) < 0)
		return err;
	if (!o.url)
		return eg_fail(-EINVAL, "engram_remote_load: no cluster address");
	if ((err = check_loadable(st)) < 0)
		return err;
	ld.set_id = st->shards[0].hdr->set_id;
	ld.timeout_ms = o.timeout_ms ? o.timeout_ms : 5000;
	/* a node lost mid-load fails the load with a message, not the process with SIGPIPE */
	eg_remote_sigpipe_block(&sp);
	if ((err = eg_remote_open(&ld.map, o.url, ld.set_id, ld.timeout_ms, 0)) < 0) {
		eg_remote_sigpipe_restore(&sp);
		return err;
	}
	err = load(&ld, &o, &res);
	if (result) {
		int out = eg_struct_out(result, &res, sizeof(res),
					EG_SIZE_THROUGH(struct engram_remote_load_result, already_complete),
					"engram_remote_load_result");
		if (!err)
			err = out;
	}
	loader_free(&ld);
	eg_remote_sigpipe_restore(&sp);
	return err;
}
