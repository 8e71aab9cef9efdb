/* The remote client's nodes and slot map (CLUSTER SLOTS), and opening and closing it: see remote.c.
 *
 * Bounds. The client knows at most EG_REMOTE_MAX_NODES nodes at once: an address past them (from CLUSTER SLOTS or a
 * MOVED or ASK) takes the place of a node that nothing routes to (no slot of the map, no row owed, no ASK pending),
 * else it is refused (the slot map that names it is not applied; the redirected row fails as DOWN). Opening is one
 * deadline, remote_timeout_ms from the call: every seed's CLUSTER SLOTS, the completion key's EXISTS and, when its
 * master cannot answer, at most EG_REMOTE_MAX_REPLICAS of its replicas, share it (remote_sync.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "remote_state.h"

struct eg_remote *eg_remote_new(const uint8_t set_id[16], unsigned timeout_ms)
{
	struct eg_remote *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	memcpy(r->set_id, set_id, 16);
	r->timeout_ms = timeout_ms ? timeout_ms : 1000;
	r->free_req = UINT32_MAX;
	r->parse.ni = NO_NODE;
	memset(r->slot_node, 0xff, sizeof(r->slot_node)); /* NO_NODE, every slot */
	return r;
}

/* A node nothing routes to (no slot of the map, or of the map being applied; no row owed or to ASK; not the node
 * whose replies are being parsed), its connection closed, for another address: its index, or NO_NODE. */
static int idle_node(struct eg_remote *r)
{
	uint8_t used[EG_REMOTE_MAX_NODES] = { 0 };

	for (unsigned s = 0; s < EG_REMOTE_SLOTS; s++) {
		if (r->slot_node[s] >= 0)
			used[r->slot_node[s]] = 1;
		if (r->applying && r->slot_new[s] >= 0)
			used[r->slot_new[s]] = 1;
	}
	for (uint32_t i = 0; i < r->cap_reqs; i++)
		if (r->reqs[i].ask_node >= 0)
			used[r->reqs[i].ask_node] = 1;
	if (r->parse.ni >= 0)
		used[r->parse.ni] = 1;
	for (int i = 0; i < r->n_nodes; i++) {
		struct node *n = &r->nodes[i];
		if (used[i] || n->n)
			continue;
		if (n->c)
			redisFree(n->c);
		struct op *ops = n->ops;
		size_t cap = n->cap;
		memset(n, 0, sizeof(*n));
		n->ops = ops;
		n->cap = cap;
		return i;
	}
	return NO_NODE;
}

int eg_remote_find_node(struct eg_remote *r, const char *host, int port, int recycle)
{
	int i;

	for (i = 0; i < r->n_nodes; i++)
		if (r->nodes[i].port == port && !strcmp(r->nodes[i].host, host))
			return i;
	if (r->n_nodes == EG_REMOTE_MAX_NODES) {
		if (!recycle || (i = idle_node(r)) == NO_NODE)
			return -ENOSPC;
	} else {
		if (r->n_nodes == r->cap_nodes) {
			int cap = r->cap_nodes ? 2 * r->cap_nodes : 8;
			struct node *v = realloc(r->nodes, (size_t)cap * sizeof(*v));
			if (!v)
				return -ENOMEM;
			r->nodes = v;
			r->cap_nodes = cap;
		}
		i = r->n_nodes++;
		memset(&r->nodes[i], 0, sizeof(r->nodes[i]));
	}
	struct node *n = &r->nodes[i];
	snprintf(n->host, sizeof(n->host), "%s", host);
	n->port = port;
	snprintf(n->name, sizeof(n->name), "%s:%d", host, port);
	return i;
}

/* ---- the slot map ---- */

/* A node's host and port in a CLUSTER SLOTS entry (an array of host, port, ...): 1, 0 for a node of no known
 * address (nil or "?": Redis 7's unknown endpoint), or -EPROTO with *why. */
static int node_address(const redisReply *n, const char **host, int *port, const char **why)
{
	if (n->type != REDIS_REPLY_ARRAY || n->elements < 2 || n->element[1]->type != REDIS_REPLY_INTEGER ||
	    (n->element[0]->type != REDIS_REPLY_STRING && n->element[0]->type != REDIS_REPLY_NIL)) {
		*why = "a node that is not an array of host and port";
		return -EPROTO;
	}
	const redisReply *h = n->element[0];
	if (h->type == REDIS_REPLY_NIL || (h->len == 1 && h->str[0] == '?'))
		return 0;
	if (h->len >= sizeof(((struct node *)0)->host) || strlen(h->str) != h->len) {
		*why = "a node's host longer than 63 bytes or holding a NUL";
		return -EPROTO;
	}
	if (n->element[1]->integer < 1 || n->element[1]->integer > 65535) {
		*why = "a node's port not in 1-65535";
		return -EPROTO;
	}
	*host = h->str;
	*port = (int)n->element[1]->integer;
	return 1;
}

/* A CLUSTER SLOTS entry's first and last slot: 0, or -EPROTO with *why. */
static int entry_range(const redisReply *e, long long *a, long long *b, const char **why)
{
	if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 || e->element[0]->type != REDIS_REPLY_INTEGER ||
	    e->element[1]->type != REDIS_REPLY_INTEGER) {
		*why = "a slot range that is not an array of two slots and nodes";
		return -EPROTO;
	}
	*a = e->element[0]->integer;
	*b = e->element[1]->integer;
	if (*a < 0 || *a > *b || *b >= EG_REMOTE_SLOTS) {
		*why = "a slot range out of 0-16383";
		return -EPROTO;
	}
	return 0;
}

int eg_remote_apply_slots(struct eg_remote *r, const redisReply *rep, const char *asked, const char **why)
{
	char asked_host[sizeof(((struct node *)0)->host)];
	int err = 0;

	*why = NULL;
	if (!rep || rep->type != REDIS_REPLY_ARRAY) {
		*why = rep && rep->type == REDIS_REPLY_ERROR ? "CLUSTER SLOTS failed (not a Redis Cluster?)"
							     : "CLUSTER SLOTS not an array";
		return -EPROTO;
	}
	snprintf(asked_host, sizeof(asked_host), "%s", asked); /* a node's own: find_node may move the nodes */
	memset(r->slot_new, 0xff, sizeof(r->slot_new)); /* NO_NODE */
	r->applying = 1;
	for (size_t i = 0; i < rep->elements && !err; i++) {
		const redisReply *e = rep->element[i];
		const char *host = NULL;
		long long a, b;
		int port = 0, known = 0;
		if ((err = entry_range(e, &a, &b, why)) < 0 || (known = node_address(e->element[2], &host, &port, why)) <= 0) {
			err = known < 0 ? known : err;
			continue;
		}
		int node = eg_remote_find_node(r, *host ? host : asked_host, port, 1);
		if (node < 0) {
			*why = node == -ENOSPC ? "more nodes than the client keeps at once (" EG_REMOTE_STR(EG_REMOTE_MAX_NODES) ")"
					       : "out of memory";
			err = node == -ENOSPC ? -EPROTO : node;
			break;
		}
		for (long long s = a; s <= b; s++)
			r->slot_new[s] = (int16_t)node;
	}
	r->applying = 0;
	if (err < 0)
		return err;
	memcpy(r->slot_node, r->slot_new, sizeof(r->slot_node));
	r->st.refreshes++;
	return 0;
}

/* ---- opening ---- */

/* "remote HOST:PORT: WHAT: why" as the error err (-EPROTO: the reply refused or wrong, why says how). */
static int node_error(int err, const char *why, const char *host, int port, const char *what)
{
	return eg_fail(err, "remote %s:%d: %s: %s", host, port, what, why ? why : engram_strerror(err));
}

/* One command (after READONLY when readonly: a replica's reads) on a connection of its own, its reply owing kind,
 * by deadline: the reply (an error reply included), or NULL with *err and *why. */
static redisReply *command_on(const char *host, int port, uint64_t deadline, int readonly, enum eg_reply_kind kind,
			      int *err, const char **why, const char *fmt, const char *arg, size_t arg_len)
{
	struct eg_remote_conn k;
	redisReply *rep = NULL;
	struct eg_sigpipe sp;

	*why = NULL;
	if ((*err = eg_remote_conn_open(&k, host, port, deadline)) < 0)
		return NULL;
	eg_remote_sigpipe_block(&sp); /* a node that closes while we write */
	if ((readonly && redisAppendCommand(k.c, "READONLY") != REDIS_OK) ||
	    (arg ? redisAppendCommand(k.c, fmt, arg, arg_len) : redisAppendCommand(k.c, fmt)) != REDIS_OK) {
		*err = -ENOMEM;
	} else if (!readonly || (rep = eg_remote_conn_reply(&k, EG_REPLY_STATUS, 0, deadline, err, why))) {
		if (rep)
			freeReplyObject(rep);
		rep = eg_remote_conn_reply(&k, kind, 0, deadline, err, why);
	}
	eg_remote_conn_close(&k);
	eg_remote_sigpipe_restore(&sp);
	return rep;
}

/* CLUSTER SLOTS from host:port into the map by deadline: 0, or an error (set, naming the node). */
static int slots_from(struct eg_remote *r, const char *host, int port, uint64_t deadline)
{
	const char *why;
	int err;
	redisReply *rep = command_on(host, port, deadline, 0, EG_REPLY_SLOTS, &err, &why, "CLUSTER SLOTS", NULL, 0);

	if (!rep)
		return node_error(err, why, host, port, "CLUSTER SLOTS");
	err = eg_remote_apply_slots(r, rep, host, &why);
	freeReplyObject(rep);
	return err < 0 ? node_error(err, why, host, port, "CLUSTER SLOTS") : 0;
}

int eg_remote_refresh(struct eg_remote *r)
{
	uint64_t deadline = eg_remote_now_ms() + r->timeout_ms;
	int err = -ECONNREFUSED;

	if (!r->n_nodes)
		return eg_fail(-EPROTO, "remote: no node to ask for a slot map");
	for (int i = 0; i < r->n_nodes; i++) {
		char host[sizeof(r->nodes[i].host)];
		snprintf(host, sizeof(host), "%s", r->nodes[i].host); /* apply_slots may move the nodes */
		if ((err = slots_from(r, host, r->nodes[i].port, deadline)) == 0)
			return 0;
	}
	return eg_fail_prefix(err, "remote: no node gave a slot map: ");
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

/* Connect through one seed of a comma-separated list (in turn, by deadline): its slot map into r. */
static int open_seed(struct eg_remote *r, const char *url, uint64_t deadline)
{
	char host[64], one[160];
	const char *p = url;
	int port, err = -EINVAL;

	if (!*url)
		return eg_fail(-EINVAL, "remote '': no cluster address");
	while (*p) {
		size_t len = strcspn(p, ",");
		snprintf(one, sizeof(one), "%.*s", (int)len, p);
		p += len + (p[len] == ',');
		if (eg_remote_parse_url(one, host, sizeof(host), &port) < 0)
			return eg_fail(-EINVAL, "remote '%s': not redis://HOST:PORT", one);
		if ((err = slots_from(r, host, port, deadline)) == 0)
			return 0;
	}
	return err;
}

/* EXISTS key on the replicas of its slot (READONLY), for a master that cannot be reached (failed, not yet
 * replaced): the slot's entry of CLUSTER SLOTS from any node that answers, then at most EG_REMOTE_MAX_REPLICAS of
 * the replicas listed, all by deadline. Returns the reply of the first replica that answers, or NULL with *err. */
static redisReply *exists_on_replicas(struct eg_remote *r, unsigned slot, const char *key, size_t klen,
				      uint64_t deadline, int *err)
{
	unsigned tried = 0;
	const char *why;

	for (int i = 0; i < r->n_nodes && tried < EG_REMOTE_MAX_REPLICAS && eg_remote_now_ms() < deadline; i++) {
		redisReply *map = command_on(r->nodes[i].host, r->nodes[i].port, deadline, 0, EG_REPLY_SLOTS, err, &why,
					     "CLUSTER SLOTS", NULL, 0);
		redisReply *rep = NULL;
		for (size_t e = 0; map && map->type == REDIS_REPLY_ARRAY && e < map->elements && !rep; e++) {
			const redisReply *x = map->element[e];
			long long a, b;
			if (entry_range(x, &a, &b, &why) < 0 || a > (long long)slot || b < (long long)slot)
				continue;
			for (size_t k = 3; k < x->elements && !rep && tried < EG_REMOTE_MAX_REPLICAS; k++) {
				const char *host;
				int port;
				if (node_address(x->element[k], &host, &port, &why) <= 0)
					continue;
				tried++;
				rep = command_on(*host ? host : r->nodes[i].host, port, deadline, 1, EG_REPLY_INTEGER, err,
						 &why, "EXISTS %b", key, klen);
			}
		}
		if (map)
			freeReplyObject(map);
		if (rep)
			return rep;
	}
	return NULL;
}

int eg_remote_open(struct eg_remote **out, const char *url, const uint8_t set_id[16], unsigned timeout_ms,
		   int need_done)
{
	struct eg_remote *r = eg_remote_new(set_id, timeout_ms);
	char key[EG_REMOTE_KEY_MAX];
	const char *why = NULL;
	int err = 0;

	*out = NULL;
	if (!r)
		return eg_fail(-ENOMEM, "out of memory");
	uint64_t deadline = eg_remote_now_ms() + r->timeout_ms; /* the whole open's */
	if ((err = open_seed(r, url, deadline)) < 0) {
		eg_remote_close(r);
		return err;
	}
	if (!need_done) {
		*out = r;
		return 0;
	}
	size_t klen = eg_remote_meta_key(key, set_id, "done");
	unsigned slot = eg_remote_slot(key, klen);
	int ni = r->slot_node[slot];
	if (ni == NO_NODE) {
		eg_remote_close(r);
		return eg_fail(-EPROTO, "remote %s: no node serves the set's completion key", url);
	}
	char host[sizeof(r->nodes[ni].host)];
	int port = r->nodes[ni].port;
	snprintf(host, sizeof(host), "%s", r->nodes[ni].host);
	redisReply *rep = command_on(host, port, deadline, 0, EG_REPLY_INTEGER, &err, &why, "EXISTS %b", key, klen);
	if (!rep && err != -EPROTO) /* its master is down: a replica knows as well whether the set is complete */
		rep = exists_on_replicas(r, slot, key, klen, deadline, &err);
	if (!rep || rep->type != REDIS_REPLY_INTEGER || rep->integer != 1) {
		if (rep && rep->type == REDIS_REPLY_ERROR) {
			err = -EPROTO;
			why = "EXISTS failed";
		} else if (rep) {
			err = -ENOENT;
			why = "the table set is not loaded completely (no completion key: its load did not finish)";
		}
		if (rep)
			freeReplyObject(rep);
		node_error(err, why, host, port, "the set's completion key");
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
