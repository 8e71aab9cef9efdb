/* Cutting a table set into shard files: whole, per layer, by size, or by ranges of whole heads. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "layout.h"
#include "pack.h"

static int add_piece(struct shard *sh, unsigned li, uint64_t begin, uint64_t count)
{
	struct piece *p;

	if (!count)
		return 0;
	if (sh->n_pieces && sh->pieces[sh->n_pieces - 1].layer_index == li &&
	    sh->pieces[sh->n_pieces - 1].row_begin + sh->pieces[sh->n_pieces - 1].row_count == begin) {
		sh->pieces[sh->n_pieces - 1].row_count += count;
		return 0;
	}
	p = realloc(sh->pieces, (sh->n_pieces + 1) * sizeof(*p));
	if (!p)
		return eg_fail(-ENOMEM, "out of memory");
	sh->pieces = p;
	p[sh->n_pieces++] = (struct piece){ li, begin, count, 0, 0 };
	return 0;
}

static struct shard *grow(struct shard **v, unsigned *n)
{
	struct shard *s = realloc(*v, (*n + 1) * sizeof(**v));

	if (!s)
		return NULL;
	*v = s;
	memset(&s[*n], 0, sizeof(s[*n]));
	return &s[(*n)++];
}

int eg_plan_shards(const engram_config *cfg, const uint32_t *rec, const struct engram_pack_options *o,
		   struct shard **out, unsigned *n_out)
{
	struct shard *v = NULL, *sh = NULL;
	unsigned n = 0, L = engram_config_num_layers(cfg), H = engram_config_num_heads(cfg);
	unsigned N = engram_config_max_ngram(cfg);
	int err = 0;

	switch (o->split) {
	case ENGRAM_SPLIT_NONE:
	case ENGRAM_SPLIT_LAYER:
		for (unsigned l = 0; l < L && !err; l++) {
			if (!sh || o->split == ENGRAM_SPLIT_LAYER)
				if (!(sh = grow(&v, &n)))
					err = eg_fail(-ENOMEM, "out of memory");
			if (!err)
				err = add_piece(sh, l, 0, engram_config_table_rows(cfg, l));
		}
		break;
	case ENGRAM_SPLIT_SIZE: {
		uint64_t cap_pages = o->split_bytes / EG_PAGE, used = 0;
		for (unsigned l = 0; l < L && !err; l++) {
			uint64_t rows = engram_config_table_rows(cfg, l), row = 0;
			if (eg_layout_rows_in_pages(rec[l], cap_pages) == 0) {
				err = eg_fail(-EINVAL, "split size %llu bytes cannot hold one page of layer %d rows",
					      (unsigned long long)o->split_bytes, engram_config_layer_id(cfg, l));
				break;
			}
			while (row < rows && !err) {
				if (!sh || used == cap_pages) {
					if (!(sh = grow(&v, &n))) {
						err = eg_fail(-ENOMEM, "out of memory");
						break;
					}
					used = 0;
				}
				uint64_t fit = eg_layout_rows_in_pages(rec[l], cap_pages - used);
				uint64_t take = rows - row < fit ? rows - row : fit;
				if (!take) {
					used = cap_pages;
					continue;
				}
				err = add_piece(sh, l, row, take);
				row += take;
				/* a table's last page is padded: it costs a whole page */
				used += eg_layout_pages_for_rows(rec[l], take);
			}
		}
		break;
	}
	case ENGRAM_SPLIT_HEADS: {
		unsigned K = o->split_ranks;
		if (K == 0 || H % K) {
			err = eg_fail(-EINVAL, "cannot split %u heads into %u ranks of whole heads", H, K);
			break;
		}
		for (unsigned k = 0; k < K && !err; k++) {
			if (!(sh = grow(&v, &n))) {
				err = eg_fail(-ENOMEM, "out of memory");
				break;
			}
			for (unsigned l = 0; l < L && !err; l++)
				for (unsigned order = 2; order <= N && !err; order++) {
					unsigned c0 = (order - 2) * H + k * (H / K), c1 = c0 + H / K;
					uint64_t begin = 0, count = 0;
					for (unsigned c = 0; c < c1; c++) {
						uint64_t p = engram_config_prime(cfg, l, c);
						if (c < c0)
							begin += p;
						else
							count += p;
					}
					err = add_piece(sh, l, begin, count);
				}
		}
		break;
	}
	default:
		err = eg_fail(-EINVAL, "unknown split mode %d", (int)o->split);
	}
	if (err) {
		eg_plan_free(v, n);
		return err;
	}
	*out = v;
	*n_out = n;
	return 0;
}

void eg_plan_free(struct shard *s, unsigned n)
{
	for (unsigned i = 0; s && i < n; i++)
		free(s[i].pieces);
	free(s);
}
