/* The remote client's nodes and slot map (CLUSTER SLOTS), and opening and closing it: see remote.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "remote_client.h"

uint64_t eg_remote_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int eg_remote_find_node(struct eg_remote *r, const char *host, int port)
{
	for (int i = 0; i < r->n_nodes; i++)
		if (r->nodes[i].port == port && !strcmp(r->nodes[i].host, host))
			return i;
	if (r->n_nodes == r->cap_nodes) {
		int cap = r->cap_nodes ? 2 * r->cap_nodes : 8;
		struct node *v = realloc(r->nodes, (size_t)cap * sizeof(*v));
		if (!v)
			return NO_NODE;
		r->nodes = v;
		r->cap_nodes = cap;
	}
	struct node *n = &r->nodes[r->n_nodes];
	memset(n, 0, sizeof(*n));
	snprintf(n->host, sizeof(n->host), "%s", host);
	n->port = port;
	snprintf(n->name, sizeof(n->name), "%s:%d", host, port);
	return r->n_nodes++;
}

/* ---- the slot map ---- */

int eg_remote_apply_slots(struct eg_remote *r, const redisReply *rep, const char *asked_host)
{
	if (!rep || rep->type != REDIS_REPLY_ARRAY)
		return -EPROTO;
	for (unsigned s = 0; s < EG_REMOTE_SLOTS; s++)
		r->slot_node[s] = NO_NODE;
	for (size_t i = 0; i < rep->elements; i++) {
		const redisReply *e = rep->element[i];
		if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 || e->element[0]->type != REDIS_REPLY_INTEGER ||
		    e->element[1]->type != REDIS_REPLY_INTEGER || e->element[2]->type != REDIS_REPLY_ARRAY ||
		    e->element[2]->elements < 2 || e->element[2]->element[0]->type != REDIS_REPLY_STRING ||
		    e->element[2]->element[1]->type != REDIS_REPLY_INTEGER)
			return -EPROTO;
		long long a = e->element[0]->integer, b = e->element[1]->integer;
		const char *host = e->element[2]->element[0]->str;
		int node = eg_remote_find_node(r, *host ? host : asked_host, (int)e->element[2]->element[1]->integer);
		if (node == NO_NODE)
			return -ENOMEM;
		for (long long s = a; s <= b && s < EG_REMOTE_SLOTS; s++)
			if (s >= 0)
				r->slot_node[s] = (int16_t)node;
	}
	r->st.refreshes++;
	return 0;
}

/* ---- opening ---- */

/* One command on a blocking connection of bounded waits (after READONLY when readonly: a replica's reads): the
 * reply, or NULL with *err set. */
static redisReply *blocking_command_on(const char *host, int port, unsigned timeout_ms, int *err, int readonly,
				       const char *fmt, const char *arg, size_t arg_len)
{
	struct timeval tv = { (time_t)(timeout_ms / 1000), (suseconds_t)(timeout_ms % 1000) * 1000 };
	struct eg_sigpipe sp;
	eg_remote_sigpipe_block(&sp);
	redisContext *c = redisConnectWithTimeout(host, port, tv);
	redisReply *rep = NULL;

	if (!c || c->err) {
		*err = c && c->err == REDIS_ERR_IO && errno == ETIMEDOUT ? -ETIMEDOUT : -ECONNREFUSED;
	} else if (redisSetTimeout(c, tv) != REDIS_OK) {
		*err = -ETIMEDOUT;
	} else if (readonly && !(rep = redisCommand(c, "READONLY"))) {
		*err = -ETIMEDOUT;
	} else {
		if (rep)
			freeReplyObject(rep);
		if (!(rep = arg ? redisCommand(c, fmt, arg, arg_len) : redisCommand(c, fmt)))
			*err = -ETIMEDOUT;
	}
	if (c)
		redisFree(c);
	eg_remote_sigpipe_restore(&sp);
	return rep;
}

static redisReply *blocking_command(const char *host, int port, unsigned timeout_ms, int *err, const char *fmt,
				    const char *arg, size_t arg_len)
{
	return blocking_command_on(host, port, timeout_ms, err, 0, fmt, arg, arg_len);
}

int eg_remote_refresh(struct eg_remote *r)
{
	int err = -ECONNREFUSED;

	for (int i = 0; i < r->n_nodes; i++) {
		char host[64];
		int port = r->nodes[i].port;
		snprintf(host, sizeof(host), "%s", r->nodes[i].host); /* apply_slots may move the nodes */
		redisReply *rep = blocking_command(host, port, r->timeout_ms, &err, "CLUSTER SLOTS", NULL, 0);
		if (!rep)
			continue;
		err = rep->type == REDIS_REPLY_ERROR ? -EPROTO : eg_remote_apply_slots(r, rep, host);
		freeReplyObject(rep);
		if (err == 0)
			return 0;
	}
	return eg_fail(err, "remote: no node gave a slot map (%s)", engram_strerror(err));
}

int eg_remote_n_nodes(const struct eg_remote *r)
{
	return r->n_nodes;
}

const char *eg_remote_node(const struct eg_remote *r, int i, int *port)
{
	*port = r->nodes[i].port;
	return r->nodes[i].host;
}

int eg_remote_slot_node(const struct eg_remote *r, unsigned slot)
{
	return r->slot_node[slot % EG_REMOTE_SLOTS];
}

/* Connect through one seed of a comma-separated list: its slot map into r. */
static int open_seed(struct eg_remote *r, const char *url)
{
	char host[64], one[160];
	const char *p = url;
	int port, err = -EINVAL;

	while (*p) {
		size_t len = strcspn(p, ",");
		snprintf(one, sizeof(one), "%.*s", (int)len, p);
		p += len + (p[len] == ',');
		if (eg_remote_parse_url(one, host, sizeof(host), &port) < 0)
			return eg_fail(-EINVAL, "remote '%s': not redis://HOST:PORT", one);
		redisReply *rep = blocking_command(host, port, r->timeout_ms, &err, "CLUSTER SLOTS", NULL, 0);
		if (!rep) {
			eg_fail(err, "remote %s:%d: %s", host, port, engram_strerror(err));
			continue;
		}
		err = rep->type == REDIS_REPLY_ERROR ? -EPROTO : eg_remote_apply_slots(r, rep, host);
		freeReplyObject(rep);
		if (err == 0)
			return 0;
		eg_fail(err, "remote %s:%d: not a Redis Cluster (CLUSTER SLOTS failed)", host, port);
	}
	return err;
}

/* EXISTS key on the replicas of its slot (READONLY), for a master that cannot be reached (failed, not yet
 * replaced): the slot's entry of CLUSTER SLOTS from any node that answers, then each replica it lists. Returns
 * the reply of the first replica that answers, or NULL with *err set. */
static redisReply *exists_on_replicas(const struct eg_remote *r, unsigned slot, const char *key, size_t klen,
				      int *err)
{
	for (int i = 0; i < r->n_nodes; i++) {
		redisReply *map = blocking_command(r->nodes[i].host, r->nodes[i].port, r->timeout_ms, err,
						   "CLUSTER SLOTS", NULL, 0);
		if (!map)
			continue;
		redisReply *rep = NULL;
		for (size_t e = 0; map->type == REDIS_REPLY_ARRAY && e < map->elements && !rep; e++) {
			const redisReply *x = map->element[e];
			if (x->type != REDIS_REPLY_ARRAY || x->elements < 3 || x->element[0]->type != REDIS_REPLY_INTEGER ||
			    x->element[1]->type != REDIS_REPLY_INTEGER || x->element[0]->integer > (long long)slot ||
			    x->element[1]->integer < (long long)slot)
				continue;
			for (size_t k = 3; k < x->elements && !rep; k++) {
				const redisReply *n = x->element[k];
				if (n->type != REDIS_REPLY_ARRAY || n->elements < 2 ||
				    n->element[0]->type != REDIS_REPLY_STRING || n->element[1]->type != REDIS_REPLY_INTEGER)
					continue;
				rep = blocking_command_on(*n->element[0]->str ? n->element[0]->str : r->nodes[i].host,
							  (int)n->element[1]->integer, r->timeout_ms, err, 1, "EXISTS %b",
							  key, klen);
			}
		}
		freeReplyObject(map);
		if (rep)
			return rep;
	}
	return NULL;
}

int eg_remote_open(struct eg_remote **out, const char *url, const uint8_t set_id[16], unsigned timeout_ms,
		   int need_done)
{
	struct eg_remote *r = calloc(1, sizeof(*r));
	char key[EG_REMOTE_KEY_MAX];
	int err = 0;
	redisReply *rep;

	*out = NULL;
	if (!r)
		return eg_fail(-ENOMEM, "out of memory");
	memcpy(r->set_id, set_id, 16);
	r->timeout_ms = timeout_ms ? timeout_ms : 1000;
	r->free_req = UINT32_MAX;
	for (unsigned s = 0; s < EG_REMOTE_SLOTS; s++)
		r->slot_node[s] = NO_NODE;
	if ((err = open_seed(r, url)) < 0) {
		eg_remote_close(r);
		return err;
	}
	if (!need_done) {
		*out = r;
		return 0;
	}
	size_t klen = eg_remote_meta_key(key, set_id, "done");
	int ni = r->slot_node[eg_remote_slot(key, klen)];
	if (ni == NO_NODE) {
		eg_remote_close(r);
		return eg_fail(-EPROTO, "remote %s: no node serves the set's completion key", url);
	}
	rep = blocking_command(r->nodes[ni].host, r->nodes[ni].port, r->timeout_ms, &err, "EXISTS %b", key, klen);
	if (!rep) /* its master is down: a replica knows as well whether the set is complete */
		rep = exists_on_replicas(r, eg_remote_slot(key, klen), key, klen, &err);
	if (!rep || rep->type != REDIS_REPLY_INTEGER || rep->integer != 1) {
		const char *name = r->nodes[ni].name;
		if (rep)
			err = -ENOENT;
		if (rep)
			freeReplyObject(rep);
		eg_fail(err, "remote %s: %s", name,
			err == -ENOENT ? "the table set is not loaded completely (no completion key: its load "
					 "did not finish)"
				       : engram_strerror(err));
		eg_remote_close(r);
		return err;
	}
	freeReplyObject(rep);
	*out = r;
	return 0;
}

void eg_remote_close(struct eg_remote *r)
{
	if (!r)
		return;
	for (int i = 0; i < r->n_nodes; i++) {
		if (r->nodes[i].c)
			redisFree(r->nodes[i].c);
		free(r->nodes[i].ops);
	}
	free(r->nodes);
	free(r->reqs);
	free(r->queue);
	free(r);
}
