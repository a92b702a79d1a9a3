/* scorch-run: the command-line front end. Subcommands live in tools/cmd_<name>.c. */
#include <stdio.h>
#include <string.h>

#include "scorch.h"

int main(int argc, char **argv) {
    fprintf(stderr, "scorch-run %s: no subcommands yet\n", SCORCH_VERSION);
    return 2;
}
