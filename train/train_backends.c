/* What a session tells its backends between steps (trainer_internal.h): through their vtable only,
 * for the host backend and the device backend alike. */
#include "train/trainer_internal.h"

void train_backends_params_changed(sc_trainer *t) {
    sc_backend *be[2] = {t->host, t->backend};
    for (int i = 0; i < 2; i++)
        if (be[i] && be[i]->iface->params_changed) be[i]->iface->params_changed(be[i]);
}

/* The last step, a loaded state or a restore changed weights in place; Dropout masks are a function
 * of (seed, step). */
void train_backends_step_begin(sc_trainer *t, uint64_t step) {
    train_backends_params_changed(t);
    sc_backend *be[2] = {t->host, t->backend};
    for (int i = 0; i < 2; i++)
        if (be[i]) be[i]->iface->set_seed(be[i], t->cfg.seed, step);
}
