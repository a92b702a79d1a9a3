/* scorch-run's commands: each takes the arguments after its name and returns the exit status
 * (0 success, 1 failure, 2 usage error). */
#ifndef SC_CMD_H
#define SC_CMD_H

#include "core/status.h"

int cmd_gen(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_train(int argc, char **argv); /* tools/cmd_train.c */
int cmd_plan(int argc, char **argv);  /* tools/cmd_plan.c */
int cmd_bench(int argc, char **argv); /* tools/cmd_bench.c */

/* Prints "scorch-run: <message>" for a failed status, frees it and returns 1 (0 for success). */
int cmd_report(sc_status st);

#endif
