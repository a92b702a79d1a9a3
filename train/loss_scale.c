/* Dynamic loss scaling for fp16 training (trainer_internal.h), with the rules and defaults of
 * torch.cuda.amp.GradScaler:
 *
 *   backward is seeded with dLoss = S instead of 1, so small fp16 gradients stay above fp16's
 *   smallest subnormal (2^-24); the updates multiply each gradient by 1/S (autodiff/optimizer.c),
 *   which for a power of two S is exact: g * (1/S) is the gradient of the unscaled loss.
 *   A step whose update went non-finite overflowed: it is undone from the rollback copy (its
 *   weights and optimizer state are those before the step, and the optimizer's step count does not
 *   advance), and S halves. After `interval` good steps in a row S doubles.
 *
 * The loss itself is computed before any scaling, so a non-finite loss is an overflow no scale can
 * cure: it is reported (train_nan_locate names the step and the first non-finite tensor) rather
 * than skipped. So is a run of skipped steps that takes S below 2^-24: the gradients then overflow
 * even where every fp16 gradient would be flushed to zero. BatchNormalization's running statistics
 * of a skipped step are kept, as in PyTorch, where the forward pass updates them whatever the
 * optimizer does. */
#include <math.h>
#include <stdio.h>

#include "train/trainer_internal.h"

/* 2^-24: fp16's smallest subnormal. */
#define LOSS_SCALE_MIN (1.0 / 16777216.0)

void train_scalars_fill(const sc_trainer *t, sc_tensor *feeds, float lr, int64_t step) {
    const sc_graph *g = &t->model->graph;
    const sc_training_graph *tg = &t->tg;
    for (int i = 0; i < g->n_inputs; i++) {
        int v = g->inputs[i];
        if (v == tg->lr) *(float *)feeds[i].data = lr;
        if (v == tg->step) *(int64_t *)feeds[i].data = step - t->skipped;
        if (v == tg->loss_scale) *(float *)feeds[i].data = (float)t->loss_scale;
        if (v == tg->inv_loss_scale) *(float *)feeds[i].data = (float)(1.0 / t->loss_scale);
    }
}

void train_loss_scale_good_step(sc_trainer *t) {
    if (t->tg.loss_scale < 0) return;
    t->skip_run = 0;
    if (++t->growth_tracker < t->cfg.loss_scale_interval) return;
    t->loss_scale *= 2.0;
    t->growth_tracker = 0;
}

sc_status train_overflow_skip(sc_trainer *t, int64_t step, double loss, int bad, bool *skipped) {
    *skipped = false;
    const sc_graph *g = &t->model->graph;
    char trigger[768];
    if (!isfinite(loss)) {
        snprintf(trigger, sizeof trigger,
                 "the loss is %g in fp16 at loss scale %g; the loss is computed before scaling, so loss scaling "
                 "cannot recover an overflow in the forward pass",
                 loss, t->loss_scale);
        return train_nan_locate(t, step, trigger);
    }
    if (!t->snapshot) {
        snprintf(trigger, sizeof trigger,
                 "the fp16 gradients overflowed at loss scale %g ('%s' became non-finite in the update), and "
                 "skipping the step needs the rollback copy (--rollback on)",
                 t->loss_scale, g->values[bad].name);
        return train_nan_locate(t, step, trigger);
    }
    double used = t->loss_scale;
    t->skipped++;
    t->skip_run++;
    t->growth_tracker = 0;
    t->loss_scale *= 0.5;
    if (t->loss_scale >= LOSS_SCALE_MIN) {
        train_snapshot_restore(t);
        *skipped = true;
        return SC_OK;
    }
    snprintf(trigger, sizeof trigger,
             "the fp16 gradients overflowed in %lld steps in a row, the last at loss scale %g ('%s' became non-finite "
             "in the update); loss scaling cannot recover",
             (long long)t->skip_run, used, g->values[bad].name);
    t->loss_scale = used; /* the step is re-run as it was to find the origin */
    return train_nan_locate(t, step, trigger);
}
