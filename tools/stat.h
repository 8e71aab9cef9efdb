/* engram-stat subcommands: each takes the arguments after its name and returns the exit status. */
#ifndef ENGRAM_STAT_H
#define ENGRAM_STAT_H

int stat_rows(int argc, char **argv);
int stat_info(int argc, char **argv);
int stat_verify(int argc, char **argv);
int stat_gather(int argc, char **argv);
int stat_replay(int argc, char **argv);
int stat_tokenmap(int argc, char **argv);
int stat_plan(int argc, char **argv);
int stat_cachesim(int argc, char **argv);
int stat_remote_load(int argc, char **argv);
int stat_top(int argc, char **argv);
int stat_metrics(int argc, char **argv);

#endif
