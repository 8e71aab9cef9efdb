/* A file for node_exporter's textfile collector (engram-stat metrics --textfile DIR): written whole under a
 * temporary name of our own in DIR and renamed onto its name. The final name is never opened or followed: a
 * symbolic link, FIFO or file there is replaced, not written through, so whoever can write DIR cannot turn the
 * write against another file (a root cron job writing /etc/shadow through a link) or block it (a FIFO). A DIR
 * that others (its group or anyone) may write is refused unless it is sticky; in a sticky one a name that exists
 * and is another user's is refused, ours is replaced (no one else may remove or rename it there). */
#ifndef ENGRAM_TEXTFILE_H
#define ENGRAM_TEXTFILE_H

#include <stdio.h>

struct textfile {
	FILE *f;          /* write the content here */
	int dirfd;
	int shared;       /* DIR is sticky and others may write it */
	char tmp[64];     /* the temporary name in DIR */
	char *dir, *name;
};

/* Open a temporary file in dir for the content of dir/name. Returns 0, or -1 (printed, naming the file and the
 * problem). */
int textfile_open(struct textfile *t, const char *dir, const char *name);
/* Flush, fsync, make it 0644 and rename it onto dir/name. Returns 0, or -1 (printed; the temporary removed, the
 * final name untouched). Either way *t is released. */
int textfile_commit(struct textfile *t);
/* Remove the temporary file and release *t. */
void textfile_abort(struct textfile *t);

#endif
