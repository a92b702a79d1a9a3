/* SIGINT / SIGTERM during training: record, let the step finish (train_signal.h). */
#include "train/train_signal.h"

#include <signal.h>
#include <stdbool.h>
#include <string.h>

static volatile sig_atomic_t pending;
static struct sigaction old_int, old_term;
static bool installed;

static void on_signal(int sig) {
    if (!pending) pending = sig;
}

void train_signals_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_RESETHAND;
    pending = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    installed = true;
}

int train_signal_pending(void) { return (int)pending; }

void train_signals_restore(void) {
    if (!installed) return;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    installed = false;
}
