/* engram-stat replay: sequences, the Zipf stream and the step schedule (see replay_sched.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "replay_sched.h"

int replay_cut(const int64_t *tokens, size_t n, int64_t bos, size_t seq_len, size_t **starts, size_t *n_seqs)
{
	size_t cap = 64, k = 0;
	size_t *v = malloc(cap * sizeof(*v));

	if (!v)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int start = seq_len ? i % seq_len == 0 : (i == 0 || tokens[i] == bos);
		if (!start)
			continue;
		if (k + 2 > cap) {
			size_t *nv = realloc(v, (cap *= 2) * sizeof(*v));
			if (!nv) {
				free(v);
				return -1;
			}
			v = nv;
		}
		v[k++] = i;
	}
	v[k] = n;
	*starts = v;
	*n_seqs = k;
	return 0;
}

static int add_entry(struct replay_sched *s, size_t *cap, struct replay_entry e)
{
	if (s->n_entries == *cap) {
		size_t nc = *cap ? 2 * *cap : 1024;
		struct replay_entry *v = realloc(s->e, nc * sizeof(*v));
		if (!v)
			return -1;
		s->e = v;
		*cap = nc;
	}
	s->e[s->n_entries++] = e;
	s->positions += e.n;
	if (e.prefill)
		s->prefill_positions += e.n;
	if (e.n > s->max_push)
		s->max_push = e.n;
	return 0;
}

int replay_schedule(struct replay_sched *s, const size_t *starts, size_t n_seqs, unsigned batch, unsigned prefill,
		    size_t max_steps)
{
	uint64_t *pos = calloc(batch, sizeof(*pos)), *end = calloc(batch, sizeof(*end));
	size_t cap = 0, steps_cap = 0, next = 0;
	int status = -1;

	memset(s, 0, sizeof(*s));
	if (!pos || !end)
		goto out;
	for (size_t step = 0; !max_steps || step < max_steps; step++) {
		size_t first = s->n_entries, step_pos = 0;
		for (unsigned b = 0; b < batch; b++) {
			struct replay_entry e = { .slot = b };
			if (pos[b] < end[b]) {
				e.off = pos[b];
				e.n = 1;
			} else if (next < n_seqs) {
				uint64_t len = starts[next + 1] - starts[next];
				e.off = starts[next];
				e.n = (uint32_t)(len < prefill ? len : prefill);
				e.reset = e.prefill = 1;
				end[b] = starts[next] + len;
				next++;
				s->seqs_started++;
			} else {
				continue;
			}
			pos[b] = e.off + e.n;
			if (pos[b] == end[b])
				s->seqs_done++;
			step_pos += e.n;
			if (add_entry(s, &cap, e) < 0)
				goto out;
		}
		if (s->n_entries == first)
			break;
		if (s->n_steps + 2 > steps_cap) {
			size_t nc = steps_cap ? 2 * steps_cap : 1024;
			size_t *v = realloc(s->step_begin, nc * sizeof(*v));
			if (!v)
				goto out;
			s->step_begin = v;
			steps_cap = nc;
		}
		s->step_begin[s->n_steps++] = first;
		if (step_pos > s->max_step_positions)
			s->max_step_positions = step_pos;
	}
	if (!s->step_begin && !(s->step_begin = malloc(sizeof(*s->step_begin))))
		goto out;
	s->step_begin[s->n_steps] = s->n_entries;
	status = 0;
out:
	free(pos);
	free(end);
	if (status < 0)
		replay_sched_free(s);
	return status;
}

void replay_sched_free(struct replay_sched *s)
{
	free(s->step_begin);
	free(s->e);
	memset(s, 0, sizeof(*s));
}

/* splitmix64: small, fast and fully determined by its seed. */
static uint64_t next_u64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double next_unit(uint64_t *state)
{
	return (double)(next_u64(state) >> 11) * 0x1p-53;
}

int replay_zipf(int64_t **out, size_t n, double alpha, uint64_t vocab, int64_t bos, size_t seq_len, uint64_t seed)
{
	uint64_t m = vocab - (bos >= 0 && (uint64_t)bos < vocab ? 1 : 0), state = seed;
	int64_t *ids, *v;
	double *cdf;

	if (vocab < 2 || m > SIZE_MAX / sizeof(double))
		return -1;
	ids = malloc(m * sizeof(*ids));
	cdf = malloc(m * sizeof(*cdf));
	v = malloc((n ? n : 1) * sizeof(*v));
	if (!ids || !cdf || !v) { /* nothing fails past here */
		free(ids);
		free(cdf);
		free(v);
		return -1;
	}
	for (uint64_t i = 0, k = 0; i < vocab; i++)
		if ((int64_t)i != bos)
			ids[k++] = (int64_t)i;
	for (uint64_t i = m - 1; i > 0; i--) {
		uint64_t j = next_u64(&state) % (i + 1);
		int64_t t = ids[i];
		ids[i] = ids[j];
		ids[j] = t;
	}
	double sum = 0;
	for (uint64_t k = 0; k < m; k++)
		cdf[k] = sum += pow((double)(k + 1), -alpha);
	for (size_t i = 0; i < n; i++) {
		if (i % seq_len == 0) {
			v[i] = bos;
			continue;
		}
		double u = next_unit(&state) * sum;
		uint64_t lo = 0, hi = m - 1;
		while (lo < hi) {
			uint64_t mid = lo + (hi - lo) / 2;
			if (cdf[mid] > u)
				hi = mid;
			else
				lo = mid + 1;
		}
		v[i] = ids[lo];
	}
	free(ids);
	free(cdf);
	*out = v;
	return 0;
}
