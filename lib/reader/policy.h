/* The reader's decisions, on keys alone: which unit a request reads (and so which entry CLOCK gives up), where a
 * gathered row stands and whether it counts as served from RAM, and what a gather puts into the row cache: the
 * row it takes from a unit, and the first time it takes one from a unit just read, that unit's other rows. The
 * reader calls them on its tables (read.c, gather.c); lib/cachesim.c calls them on its keys-only tables, so that
 * the simulation replays the same policy rather than a copy of it. Every change to the row cache is made by a
 * gather, in its rows' order, never by a read's completion: both sides make the same insertions in the same
 * order whatever the disk's timing. Inline: they run for every row of a push or gather. */
#ifndef ENGRAM_READER_POLICY_H
#define ENGRAM_READER_POLICY_H

#include <stdint.h>

#include "layout.h"
#include "rowcache.h"
#include "units.h"

/* What a request does with the unit of key in table t, whose entry is found (EG_NO_UNIT: none). */
enum eg_pol_req {
	EG_POL_HIT,  /* held already: its CLOCK bit set; *slot is its entry */
	EG_POL_READ, /* to be read: *slot is a new entry (free, or CLOCK's victim), FREE with no pins, to fill */
	EG_POL_LEAVE /* nothing now: every entry pinned or in flight, or a failed read this step holds (the gather
		      * reads it) */
};

static inline enum eg_pol_req eg_policy_request(struct eg_units *t, uint64_t key, uint32_t found, uint32_t *slot)
{
	if (found != EG_NO_UNIT && t->u[found].err == 0) {
		t->u[found].ref = 1;
		*slot = found;
		return EG_POL_HIT;
	}
	if (found != EG_NO_UNIT) {
		if (t->u[found].pins)
			return EG_POL_LEAVE; /* a failed read of this step: gather retries it */
		eg_units_drop(t, found);
	}
	if ((*slot = eg_units_alloc(t, key)) == EG_NO_UNIT)
		return EG_POL_LEAVE;
	return EG_POL_READ;
}

/* Where a gathered row stands when the gather call begins. */
enum row_state { ROW_READY, ROW_NOT_READY, ROW_MISS };

/* The row cache's fill from a unit's data (eg_unit.fill): NONE until a read of the unit completes with its
 * data (PENDING); the first gather to take a row from it then fills, or finds nothing to fill (DONE or NONE). */
enum eg_fill { EG_FILL_NONE, EG_FILL_PENDING, EG_FILL_DONE };

/* A row found in the row cache (in_rc), or by its unit's entry u (NULL: none), at a gather of the step begun at
 * t0: its state, and *ram whether its bytes were in RAM with no read on its behalf in this step (a row in the row
 * cache whose unit was read in this step and filled from by an earlier gather of the step may have come from
 * that read, from the disk). */
static inline enum row_state eg_policy_classify(const struct eg_unit *u, int in_rc, uint64_t t0, int *ram)
{
	if (in_rc) {
		*ram = !(u && u->fill == EG_FILL_DONE && u->disk && u->t_done >= t0);
		return ROW_READY;
	}
	if (!u) {
		*ram = 0;
		return ROW_MISS;
	}
	if (u->state == EG_UNIT_READY && !u->err) {
		*ram = !u->disk || u->t_done < t0;
		return ROW_READY;
	}
	*ram = 0;
	return ROW_NOT_READY; /* in flight, queued, or a failed read to retry */
}

/* The row tier keeps rows, not pages; but while its slots are still empty, the other rows of a unit read for one
 * row are worth keeping there (eg_rc_fill: free slots only, nothing evicted). data: the unit's bytes (NULL: a
 * keys-only row cache). 1 when it filled (the unit holds several rows and the cache has empty slots). Filling
 * again from the same unit inserts nothing: a slot once written is never empty again. */
static inline int eg_policy_fill_rows(engram_rowcache *rc, unsigned layer, const struct eg_disk_table *t,
				      uint64_t unit, const uint8_t *data)
{
	uint64_t first, end;

	if (!t->rows_per_page)
		return 0; /* a row of a page or more: its unit holds it alone, and gather keeps it */
	if (!eg_rc_filling(rc))
		return 0;
	eg_unit_rows(t, unit, &first, &end);
	for (uint64_t local = first; local < end; local++) /* the sets are scattered: their loads overlap */
		eg_rc_prefetch(rc, eg_rc_key(layer, t->row_begin + local));
	for (uint64_t local = first; local < end; local++) {
		uint64_t i = local - first;
		eg_rc_fill(rc, eg_rc_key(layer, t->row_begin + local),
			   data ? data + i / t->rows_per_page * EG_PAGE + i % t->rows_per_page * t->record_size : NULL,
			   data ? t->record_size : 0);
	}
	return 1;
}

/* A gather takes row (its record rec) from unit of table t, whose data are data and whose entry is u (NULL: read
 * with no entry of the unit table, its data here only now): the row goes into the row cache (eg_rc_put: it
 * evicts), then the unit's other rows if it was just read (its fill pending, or no entry). rec and data: NULL
 * for a keys-only row cache. */
static inline void eg_policy_keep_row(engram_rowcache *rc, unsigned layer, const struct eg_disk_table *t,
				      uint64_t row, const uint8_t *rec, struct eg_unit *u, uint64_t unit,
				      const uint8_t *data)
{
	eg_rc_put(rc, eg_rc_key(layer, row), rec, rec ? t->record_size : 0);
	if (!u)
		eg_policy_fill_rows(rc, layer, t, unit, data);
	else if (u->fill == EG_FILL_PENDING)
		u->fill = eg_policy_fill_rows(rc, layer, t, unit, data) ? EG_FILL_DONE : EG_FILL_NONE;
}

#endif
