/* The replies a cluster node owes the remote client, checked as their bytes arrive, before hiredis buffers them.
 *
 * hiredis's reader keeps a bulk string's bytes until the whole string is in (a "$2147483647" header makes it grow
 * until memory runs out), makes an array of whatever count a header declares ("*2147483647": 16 GiB of element
 * pointers, freed one by one) and takes any type in any place. So every byte a node sends goes through this
 * scanner first: it follows the reply's structure (type bytes, header lines, bulk bodies, open arrays) and refuses
 * it at the first header, type or line that the command asked does not owe; the caller then fails the node as
 * one that closed. A refused reply costs at most the bytes of one header line (EG_REPLY_LINE). What each
 * command owes (remote_reply.h, enum eg_reply_kind):
 *
 *   GETRANGE (a row)    a bulk string of at most the record's bytes; or an error (MOVED, ASK, CLUSTERDOWN...)
 *   ASKING, SET,        a status; or an error
 *   READONLY
 *   EXISTS, DEL         an integer; or an error
 *   GET, INFO           a bulk string of at most the bound given, or nil; or an error
 *   CLUSTER SLOTS       an array of at most EG_REMOTE_SLOTS ranges, each of 3 to EG_REPLY_RANGE_ITEMS items
 *                       (two integers, then nodes), a node an array of at most EG_REPLY_NODE_ITEMS strings,
 *                       integers, nils or one more level of such (Redis 7's metadata), each string at most
 *                       EG_REPLY_FIELD bytes; EG_REPLY_SLOTS_ITEMS items and EG_REPLY_SLOTS_BYTES bytes in all
 *
 * Errors and statuses are lines of at most EG_REPLY_LINE bytes; every line and bulk body must end in CRLF. */
#include "remote_key.h"
#include "remote_reply.h"

enum { G_DONE, G_TYPE, G_LINE, G_BODY }; /* a zeroed guard is done: it awaits eg_reply_expect */

void eg_reply_expect(struct eg_reply_guard *g, enum eg_reply_kind kind, uint64_t max)
{
	*g = (struct eg_reply_guard){ .kind = (uint8_t)kind, .state = G_TYPE, .max = max };
}

int eg_reply_done(const struct eg_reply_guard *g)
{
	return g->state == G_DONE;
}

static int refuse(struct eg_reply_guard *g, const char *why)
{
	g->why = why;
	return -1;
}

/* An item of the reply is complete: the arrays it ends end too; the reply when none is open. */
static void item_done(struct eg_reply_guard *g)
{
	while (g->depth && --g->left[g->depth - 1] == 0)
		g->depth--;
	g->state = g->depth ? G_TYPE : G_DONE;
}

/* The type byte of an item at the current depth: 0 when the command owes one there. */
static int check_type(struct eg_reply_guard *g, char t)
{
	unsigned d = g->depth;

	if (t != '+' && t != '-' && t != ':' && t != '$' && t != '*')
		return refuse(g, "not a RESP type byte");
	if (g->kind == EG_REPLY_SLOTS && ++g->items > EG_REPLY_SLOTS_ITEMS)
		return refuse(g, "a CLUSTER SLOTS reply of too many items");
	if (d == 0) {
		if (t == '-')
			return 0;
		switch (g->kind) {
		case EG_REPLY_ROW:
		case EG_REPLY_BULK: return t == '$' ? 0 : refuse(g, "not a bulk string (the type the command owes)");
		case EG_REPLY_STATUS: return t == '+' ? 0 : refuse(g, "not a status (the type the command owes)");
		case EG_REPLY_INTEGER: return t == ':' ? 0 : refuse(g, "not an integer (the type the command owes)");
		default: return t == '*' ? 0 : refuse(g, "not an array (the type CLUSTER SLOTS owes)");
		}
	}
	/* inside CLUSTER SLOTS (the only reply with arrays): ranges (depth 1), a range's slots and nodes (2), a
	 * node's host, port, id and metadata (3), the metadata's fields (4) */
	if (t == '+' || t == '-')
		return refuse(g, "a status or an error inside CLUSTER SLOTS");
	if (d == 1 && t != '*')
		return refuse(g, "a slot range that is not an array");
	if (d == 2 && t == '$')
		return refuse(g, "a string where CLUSTER SLOTS has a slot or a node");
	if (d == 4 && t == '*')
		return refuse(g, "CLUSTER SLOTS nested deeper than a node's metadata");
	return 0;
}

/* A complete header line's number n, for the item's type: 0 when the command owes it. */
static int check_header(struct eg_reply_guard *g, long long n)
{
	unsigned d = g->depth;

	if (g->type == '$') {
		if (n == -1) { /* nil */
			if (d == 0 ? g->kind != EG_REPLY_BULK : d < 3)
				return refuse(g, "a nil reply the command does not owe");
			item_done(g);
			return 0;
		}
		if (n < 0)
			return refuse(g, "a negative bulk string length");
		if ((uint64_t)n > (d == 0 ? g->max : EG_REPLY_FIELD))
			return refuse(g, "a bulk string longer than the command owes");
		g->body = (uint64_t)n + 2;
		g->state = G_BODY;
		return 0;
	}
	/* an array: CLUSTER SLOTS's levels */
	static const long long most[3] = { EG_REMOTE_SLOTS, EG_REPLY_RANGE_ITEMS, EG_REPLY_NODE_ITEMS };
	if (n < 0)
		return refuse(g, "a nil or negative array length");
	if (n > (d < 3 ? most[d] : EG_REPLY_NODE_ITEMS))
		return refuse(g, "an array longer than CLUSTER SLOTS owes");
	if (d == 1 && n < 3)
		return refuse(g, "a CLUSTER SLOTS range of fewer than 3 items");
	if (n == 0) {
		item_done(g);
		return 0;
	}
	g->left[d] = (uint32_t)n;
	g->depth++;
	g->state = G_TYPE;
	return 0;
}

ptrdiff_t eg_reply_scan(struct eg_reply_guard *g, const char *p, size_t len)
{
	size_t i = 0;

	if (g->why)
		return -1;
	while (i < len && g->state != G_DONE) {
		char c = p[i];
		switch (g->state) {
		case G_TYPE:
			if (check_type(g, c) < 0)
				return -1;
			g->type = (uint8_t)c;
			g->state = G_LINE;
			g->line = 0;
			g->num = 0;
			g->neg = g->cr = 0;
			i++;
			break;
		case G_LINE:
			i++;
			if (++g->line > EG_REPLY_LINE)
				return refuse(g, "a line longer than any the command owes");
			if (g->cr) {
				if (c != '\n')
					return refuse(g, "a carriage return not followed by a line feed");
				if (g->type == '+' || g->type == '-' || g->type == ':') {
					item_done(g);
				} else if (check_header(g, g->neg ? -g->num : g->num) < 0) {
					return -1;
				}
				break;
			}
			if (c == '\r') {
				if ((g->type == '$' || g->type == '*' || g->type == ':') && g->line == 1 + (unsigned)g->neg)
					return refuse(g, "a length or integer without digits");
				g->cr = 1;
			} else if (g->type == '+' || g->type == '-') {
				if (c == '\n')
					return refuse(g, "a line feed without a carriage return");
			} else if (c == '-' && g->line == 1) {
				g->neg = 1;
			} else if (c < '0' || c > '9') {
				return refuse(g, "a length or integer that is not a decimal number");
			} else if (g->num > 99999999999999999) { /* 18 digits: more cannot be a length anyone owes */
				return refuse(g, "a length or integer of too many digits");
			} else {
				g->num = g->num * 10 + (c - '0');
			}
			break;
		case G_BODY: {
			size_t take = len - i;
			if (g->body > 2) { /* the string's bytes: anything */
				if (take > g->body - 2)
					take = (size_t)(g->body - 2);
				i += take;
				g->body -= take;
				break;
			}
			if (c != (g->body == 2 ? '\r' : '\n'))
				return refuse(g, "a bulk string not ended by CRLF");
			i++;
			if (--g->body == 0)
				item_done(g);
			break;
		}
		}
	}
	if (g->kind == EG_REPLY_SLOTS && (g->bytes += i) > EG_REPLY_SLOTS_BYTES)
		return refuse(g, "a CLUSTER SLOTS reply of too many bytes");
	return (ptrdiff_t)i;
}
