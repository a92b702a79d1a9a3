/* scorch-run: the command-line front end. Subcommands live in tools/cmd_<name>.c; this file only
 * dispatches. Errors go to stderr as "scorch-run: <message>"; exit 1 on failure, 2 on usage errors. */
#include <stdio.h>
#include <string.h>

#include "tools/stages.h"
#include "tools/args.h"
#include "tools/cmd.h"

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} command;

static const command commands[] = {
    {"gen", cmd_gen, "write a generated model (resnet, dranet, gpt) as ONNX"},
    {"info", cmd_info, "op histogram, parameters, FLOPs and activation memory of a model"},
    {"run", cmd_run, "run a model's forward pass on the CPU and save its outputs as .npy"},
    {"train", cmd_train, "train a model on the CPU and write it back as ONNX"},
    {"plan", cmd_plan, "plan a training step under a memory budget and show its predicted costs"},
    {"bench", cmd_bench, "measure strategies and memory budgets by running training steps"},
};

int cmd_report(sc_status st) {
    if (!st) return 0;
    fprintf(stderr, "scorch-run: %s\n", sc_status_message(st));
    sc_status_free(st);
    return 1;
}

static void usage(FILE *f) {
    fprintf(f, "usage: scorch-run COMMAND [options]   (scorch %s)\n\ncommands:\n", SCORCH_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-6s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n'scorch-run COMMAND --help' describes a command's options.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("scorch-run %s\n", SCORCH_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 2, argv + 2);
    args_error("unknown command '%s'", argv[1]);
    usage(stderr);
    return 2;
}
