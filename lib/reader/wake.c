/* The I/O thread's bell (wake.h): where the thread sleeps, and how to kick it there. */
#include <errno.h>
#include <stdlib.h>

#include "io.h"
#include "reader_int.h"
#include "wake.h"

/* Under the session lock. */
struct eg_rd_bell {
	uint8_t where;                                  /* enum eg_rd_sleep */
	struct eg_io *io;                               /* the backend (progress.c's), kicked in its reap */
	void (*src_kick)(struct eg_reader *rd, void *arg); /* the source's kick, in its wait() */
	void *src_arg;
};

int eg_rd_bell_init(struct eg_reader *rd)
{
	if (!(rd->bell = calloc(1, sizeof(*rd->bell))))
		return eg_fail(-ENOMEM, "out of memory");
	return 0;
}

void eg_rd_bell_free(struct eg_reader *rd)
{
	free(rd->bell);
	rd->bell = NULL;
}

void eg_rd_bell_sleep(struct eg_reader *rd, int where)
{
	rd->bell->where = (uint8_t)where;
}

void eg_rd_bell_backend(struct eg_reader *rd, struct eg_io *io)
{
	rd->bell->io = io;
}

void eg_rd_bell_source(struct eg_reader *rd, void (*kick)(struct eg_reader *rd, void *arg), void *arg)
{
	rd->bell->src_kick = kick;
	rd->bell->src_arg = arg;
}

void eg_rd_wake_locked(struct eg_reader *rd)
{
	struct eg_rd_bell *b = rd->bell;

	if (b->where == EG_RD_SLEEP_IO)
		b->io->ops->kick(b->io);
	else if (b->where == EG_RD_SLEEP_SRC)
		b->src_kick(rd, b->src_arg);
	b->where = EG_RD_AWAKE;
}

void eg_rd_wake(struct eg_reader *rd)
{
	pthread_mutex_lock(&rd->lock);
	eg_rd_wake_locked(rd);
	pthread_mutex_unlock(&rd->lock);
}
