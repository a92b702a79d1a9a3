/* `scorch-run train MODEL.onnx`: trains with a training session (train/trainer.h) and writes the
 * trained model back as ONNX. --device cpu|cuda|auto (default auto: the GPU when this build has the
 * CUDA backend and a device is present) picks where steps run; the first line names the device.
 * --device cuda without a usable GPU stops before training with exit code 1 and the reason; on the
 * GPU every step runs a plan (strategy none without --memory, unless that does not fit the GPU's
 * free memory: then auto strategy and streaming for it, with a warning), --memory is capped at the
 * GPU's free memory, and --tf32 lets cuBLAS/cuDNN use TF32.
 *
 * Output: a progress line (step, loss, samples or tokens per second, elapsed, ETA), updated in place
 * on a terminal and printed every --print-every steps otherwise; at the end "loss A -> B" (the first
 * and the last step of this run) and the path written. --log FILE writes CSV
 * (step,loss,lr,samples_per_s,elapsed_s,precision,loss_scale,skipped; samples_per_s of that step, elapsed
 * since the run began, precision fp32, bf16 or fp16; with fp16 the loss scale the step ran with and 1
 * when its update overflowed and was skipped, else 0 and 0),
 * appending when resuming into an existing log.
 * Checkpoints: --save-every N --state DIR saves DIR/state.bin every N steps and after the last step;
 * --resume DIR continues from DIR/state.bin (and keeps saving there unless --state says otherwise).
 * On a NaN/Inf the run stops with the step and the first tensor where it appeared; nothing is
 * written then: neither the model nor a state, so the last checkpoint stays as it was. --rollback
 * (trainer.h, sc_rollback) says whether a copy of the state is kept to undo the step and locate the
 * origin; without it ("rollback off" on the first line) the message names the first non-finite value.
 * SIGINT / SIGTERM (train/train_signal.h): the step in flight finishes, the training state is saved to
 * --state DIR (or --resume DIR, else MODEL.state/ next to the model), the model is not written, and
 * the process exits 130 / 143; --resume DIR continues bit-identically. A second signal kills at once.
 * --dump-grads DIR writes the gradients and the loss of the first step run (trainer.h has the layout).
 * --profile prints the per-op kernel table of `run --profile` (backends/profile.h) over the steps
 * after the first.
 * --memory SIZE / --strategy S / --offload O / --slots S (any of them) run every step through a plan
 * (schedule/plan.h) with the plan executor; at the end a line compares the plan's predictions with
 * the measurements: "plan S (offload O): K segments, peak planned P measured M bytes, step time
 * predicted X s measured Y s (median)". An infeasible budget stops before training, naming the smallest budget.
 * --calibrate (with a plan, CPU only) measures every node of the training graph first
 * (train/calibrate.h), and the session's one plan is built with those times.
 * Data parallel: `mpirun -np N scorch-run train ...` trains on N ranks, each on its shard of the
 * global batch of N x --batch samples (trainer.h); rank 0 prints, logs and writes, and a rank that
 * fails ends the job naming itself (--comm-timeout bounds the wait for a silent rank).
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backends/comm.h"
#include "backends/profile.h"
#include "core/stats.h"
#include "core/clock.h"
#include "tools/args.h"
#include "tools/cmd.h"
#include "tools/model_load.h"
#include "tools/plan_report.h"
#include "train/train_signal.h"
#include "train/trainer.h"

static char *hms(double s, char *buf, size_t n) {
    long t = s > 0 && s < 1e9 ? (long)(s + 0.5) : 0;
    if (t >= 3600) snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
    return buf;
}

typedef struct {
    bool tty;
    int64_t print_every;
    double t0;
    int64_t first_step, done; /* this run */
    int64_t units;            /* samples or tokens processed in this run */
    const char *unit_name;
    float first_loss, last_loss;
    FILE *log;
    const char *precision; /* the log's precision column: fp32, bf16 or fp16 */
    int64_t skipped;       /* fp16 steps whose update overflowed and was skipped */
    int64_t peak_bytes;     /* max measured arena high-water mark (plans) */
    int64_t bytes_h2d, bytes_d2h; /* moved by the last step (plans) */
    int64_t bytes_staged;         /* of those, copied through the backend's staging buffers */
    int64_t host_bytes;           /* host copies of the session after the last step (plans) */
    bool show;              /* prints progress (data parallel: rank 0 only) */
    double *exec_times;     /* per step of this run, for the median */
    int64_t n_exec, cap_exec;
} progress;

static void exec_time_add(progress *p, double s) {
    if (p->n_exec == p->cap_exec) {
        int64_t cap = p->cap_exec ? 2 * p->cap_exec : 64;
        double *x = realloc(p->exec_times, (size_t)cap * sizeof *x);
        if (!x) return; /* the median then covers fewer steps */
        p->exec_times = x, p->cap_exec = cap;
    }
    p->exec_times[p->n_exec++] = s;
}

/* Median of the steps after the first (the first pays for caches and page faults) when there are more. */
static double exec_median(progress *p) {
    int64_t skip = p->n_exec > 1 ? 1 : 0, n = p->n_exec - skip;
    return n > 0 ? sc_median(p->exec_times + skip, (size_t)n) : 0;
}

static void plan_report_line(const sc_trainer *t, progress *p) {
    const sc_plan *pl = sc_trainer_plan(t);
    if (!pl) return;
    char a[32], b[32];
    printf("plan %s (offload %s): %d segments, peak planned %lld measured %lld bytes (%s / %s), step time predicted "
           "%.4g s measured %.4g s (median of %lld)\n",
           plan_strategy_name(pl->strategy), plan_offload_name(pl->offload), pl->n_segments, (long long)pl->arena_bytes,
           (long long)p->peak_bytes,
           fmt_bytes(pl->arena_bytes, a, sizeof a), fmt_bytes(p->peak_bytes, b, sizeof b), pl->predicted_time,
           exec_median(p), (long long)(p->n_exec > 1 ? p->n_exec - 1 : p->n_exec));
    /* the session also moves the feeds in and the outputs out, which the plan does not count */
    int64_t n_params = plan_param_count(&sc_trainer_model((sc_trainer *)t)->graph); /* reads only */
    double per = n_params > 0 ? (double)n_params : 1;
    printf("moved per step: planned h2d %lld d2h %lld bytes (%.2f + %.2f B/param), measured h2d %lld d2h %lld "
           "(feeds and outputs included; %lld staged); updates %s%s",
           (long long)pl->bytes_h2d, (long long)pl->bytes_d2h, (double)pl->bytes_h2d / per, (double)pl->bytes_d2h / per,
           (long long)p->bytes_h2d, (long long)p->bytes_d2h, (long long)p->bytes_staged, plan_update_name(pl->update_on),
           pl->update_on == SC_UPDATE_HOST ? " (streamed parameters)" : "");
    if (pl->n_resident) printf(", %d small parameters resident on the device", pl->n_resident);
    putchar('\n');
    if (pl->host_bytes > 0 || p->host_bytes > 0)
        printf("host copies: planned %lld measured %lld bytes (%s / %s) beside the parameters and state\n",
               (long long)pl->host_bytes, (long long)p->host_bytes, fmt_bytes(pl->host_bytes, a, sizeof a),
               fmt_bytes(p->host_bytes, b, sizeof b));
}

static void progress_show(progress *p, const sc_trainer *t, const sc_step_result *r) {
    double el = sc_clock_seconds() - p->t0, rate = el > 0 ? (double)p->units / el : 0;
    int64_t total = sc_trainer_total_steps(t), left = total - r->step;
    char e[32], eta[32];
    hms(el, e, sizeof e);
    hms(p->done ? el / (double)p->done * (double)left : 0, eta, sizeof eta);
    bool last = r->step == total;
    if (p->tty) {
        fprintf(stderr, "\rstep %lld/%lld  loss %.4f  %.1f %s/s  elapsed %s  ETA %s\033[K%s", (long long)r->step,
                (long long)total, r->loss, rate, p->unit_name, e, eta, last ? "\n" : "");
        fflush(stderr);
    } else if (r->step % p->print_every == 0 || last || p->done == 1) {
        fprintf(stderr, "step %lld/%lld  loss %.4f  %.1f %s/s  elapsed %s  ETA %s\n", (long long)r->step,
                (long long)total, r->loss, rate, p->unit_name, e, eta);
    }
}

static sc_status log_open(progress *p, const char *path, bool resuming) {
    bool append = resuming && access(path, F_OK) == 0;
    p->log = fopen(path, append ? "a" : "w");
    if (!p->log) return sc_errorf("%s: cannot open the log for writing", path);
    if (!append) fprintf(p->log, "step,loss,lr,samples_per_s,elapsed_s,precision,loss_scale,skipped\n");
    return SC_OK;
}

typedef struct {
    const char *out, *state_dir, *dump_grads;
    const char *interrupt_dir; /* where an interrupted run saves its state: state_dir or MODEL.state */
    int64_t save_every;
    bool calibrate; /* --calibrate: plan with measured node times (sc_trainer_config.calibrate) */
    bool profile;   /* --profile: per-op kernel times over the steps after the first */
} run_opts;

/* The signal that stopped the run (0: none); cmd_train exits 128 + it. */
static int stopped_by;

/* SIGINT / SIGTERM arrived (train/train_signal.h): the step in flight has finished; save the state
 * and stop. The model itself is not written: the run is not over, --resume finishes it. */
static sc_status train_interrupt(sc_trainer *t, const run_opts *o, progress *p, int sig) {
    if (p->show && p->tty && p->done) fputc('\n', stderr);
    if (p->show)
        fprintf(stderr, "%s: stopping after step %lld; saving the training state to %s\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
                (long long)sc_trainer_step_count(t), o->interrupt_dir);
    SC_TRY(sc_trainer_save_state(t, o->interrupt_dir));
    if (p->show) fprintf(stderr, "saved; continue with: --resume %s\n", o->interrupt_dir);
    stopped_by = sig;
    return SC_OK;
}

/* A signal pending on any rank (mpirun forwards SIGINT and SIGTERM to every rank, but not at the same
 * instant): the ranks stop at the same step boundary, or one would wait in the next step's
 * collectives for a rank that is saving and exiting. */
static int signal_agreed(sc_status *st) {
    double sig = train_signal_pending();
    if (sc_comm_size() > 1) *st = sc_comm_allreduce_f64(&sig, 1, SC_COMM_MAX, "checking for signals");
    return *st ? 0 : (int)sig;
}

static sc_status train_loop(sc_trainer *t, const run_opts *o, progress *p) {
    sc_status st = SC_OK;
    while (!st && !sc_trainer_done(t)) {
        int sig = signal_agreed(&st);
        if (st) break;
        if (sig) return train_interrupt(t, o, p, sig);
        sc_step_result r;
        double ts = sc_clock_seconds();
        st = sc_trainer_step(t, &r);
        if (st) break;
        double dt = sc_clock_seconds() - ts;
        if (!p->done) {
            p->first_loss = r.loss;
            p->unit_name = r.tokens != r.samples ? "tokens" : "samples";
        }
        p->last_loss = r.loss;
        p->done++;
        if (r.skipped && p->show) {
            p->skipped++;
            fprintf(stderr, "%sstep %lld: fp16 gradients overflowed at loss scale %g; update skipped, scale now %g\n",
                    p->tty ? "\r\033[K" : "", (long long)r.step, r.loss_scale, r.loss_scale / 2);
        }
        if (r.peak_bytes > p->peak_bytes) p->peak_bytes = r.peak_bytes;
        p->bytes_h2d = r.bytes_h2d, p->bytes_d2h = r.bytes_d2h, p->bytes_staged = r.bytes_staged;
        p->host_bytes = r.host_bytes;
        exec_time_add(p, r.exec_time);
        p->units += strcmp(p->unit_name, "tokens") ? r.samples : r.tokens;
        if (p->log) {
            fprintf(p->log, "%lld,%.9g,%.9g,%.3f,%.6f,%s,%.17g,%d\n", (long long)r.step, r.loss, r.lr,
                    dt > 0 ? (double)r.samples / dt : 0.0, sc_clock_seconds() - p->t0, p->precision, r.loss_scale,
                    r.skipped);
            fflush(p->log);
        }
        if (p->show) progress_show(p, t, &r);
        if (o->profile && p->done == 1) { /* the first step creates primitives and pays first touches */
            sc_profile_reset();
            sc_profile_enable(true);
        }
        if (o->dump_grads && p->done == 1) st = sc_trainer_dump_grads(t, o->dump_grads);
        if (!st && o->state_dir && (sc_trainer_done(t) || (o->save_every > 0 && r.step % o->save_every == 0)))
            st = sc_trainer_save_state(t, o->state_dir);
        int after = st ? 0 : signal_agreed(&st);
        if (after) return train_interrupt(t, o, p, after);
    }
    if (st && p->show && p->tty && p->done) fputc('\n', stderr);
    return st;
}

/* "model.onnx" -> "model<suffix>"; any other name gets suffix appended. */
static char *model_derived(const char *model, const char *suffix) {
    size_t n = strlen(model), k = strlen(suffix) + 1;
    char *out = malloc(n + k);
    if (!out) return NULL;
    if (n > 5 && !strcmp(model + n - 5, ".onnx")) n -= 5;
    snprintf(out, n + k, "%.*s%s", (int)n, model, suffix);
    return out;
}

/* "model.onnx" -> "model.trained.onnx". */
static char *default_output(const char *model) { return model_derived(model, ".trained.onnx"); }

/* Sharded optimizer: each rank's optimizer state bytes, on rank 0's second line. */
static sc_status shard_report(sc_trainer *t, bool show) {
    const sc_training_graph *tg = sc_trainer_graph(t);
    if (tg->n_all_params == 0) return SC_OK;
    const sc_graph *g = &sc_trainer_model(t)->graph;
    double mine = 0;
    for (int i = 0; i < tg->n_states; i++) mine += (double)sc_desc_bytes(&g->values[tg->states[i]].desc);
    int n = sc_comm_size();
    double *all = calloc((size_t)n, sizeof(double));
    if (!all) return sc_errorf("out of memory");
    sc_status st = sc_comm_allgather(&mine, all, sizeof mine, "reporting the optimizer state");
    if (!st && show) {
        double total = 0, most = 0;
        for (int r = 0; r < n; r++) total += all[r], most = all[r] > most ? all[r] : most;
        char a[32], b[32];
        fprintf(stderr, "sharded optimizer: %d parameter tensors; optimizer state per rank at most %s of %s in all "
                        "(%.2f of it, 1/%d = %.2f):",
                tg->n_all_params, fmt_bytes((int64_t)most, a, sizeof a), fmt_bytes((int64_t)total, b, sizeof b),
                total > 0 ? most / total : 0.0, n, 1.0 / n);
        for (int r = 0; r < n && r < 16; r++) fprintf(stderr, " %s", fmt_bytes((int64_t)all[r], a, sizeof a));
        fprintf(stderr, "%s\n", n > 16 ? " ..." : "");
    }
    free(all);
    return st;
}

/* --profile: the per-op table over the steps after the first (CPU kernels only: the hook is in the CPU
 * backend's node runner). */
static void profile_report(const sc_trainer *t, int64_t steps) {
    if (steps < 1) printf("profile: no steps after the first to time (give --steps 2 or more)\n");
    else if (sc_profile_total_ms() <= 0)
        printf("profile: no CPU kernels ran on %s (--profile times the CPU backend's kernels)\n",
               sc_device_name(sc_trainer_device(t)));
    else {
        printf("per-op kernel time over steps 2 to %lld (wall clock; the step's own overhead not included):\n",
               (long long)steps + 1);
        sc_profile_report(stdout, (int)steps);
    }
}

static sc_status train_run(const sc_trainer_config *cfg, const run_opts *o, int64_t print_every, const char *log) {
    sc_trainer *t = NULL;
    SC_TRY(sc_trainer_create(cfg, &t));
    if (sc_trainer_calibration(t)) plan_calibration_print(sc_trainer_calibration(t), &sc_trainer_model(t)->graph, stderr);
    const sc_training_graph *tg = sc_trainer_graph(t);
    int64_t total = sc_trainer_total_steps(t), done = sc_trainer_step_count(t);
    bool show = sc_comm_rank() == 0;
    if (show) {
        fprintf(stderr, "training %s on %s: %d trainable parameter tensors, data %s, %lld steps", cfg->model_path,
                sc_device_name(sc_trainer_device(t)), tg->n_all_params ? tg->n_all_params : tg->n_params,
                sc_trainer_data_desc(t), (long long)total);
        if (sc_comm_size() > 1)
            fprintf(stderr, ", %d ranks x batch %lld over %s", sc_comm_size(), (long long)cfg->batch, sc_comm_backend_name());
        if (done) fprintf(stderr, " (resuming after step %lld)", (long long)done);
        if (!sc_trainer_rollback(t)) fprintf(stderr, ", rollback off");
        fputc('\n', stderr);
    }
    sc_status st = shard_report(t, show);
    const sc_plan *pl = show ? sc_trainer_plan(t) : NULL;
    if (pl) {
        char a[32], b[32];
        fprintf(stderr, "plan %s (offload %s): %d segments, %d steps, arena %s (budget %s)\n",
                plan_strategy_name(pl->strategy), plan_offload_name(pl->offload), pl->n_segments, pl->n_steps,
                fmt_bytes(pl->arena_bytes, a, sizeof a),
                sc_trainer_plan_options(t)->budget ? fmt_bytes(sc_trainer_plan_options(t)->budget, b, sizeof b) : "unlimited");
        if (sc_comm_size() > 1) fprintf(stderr, "cost model: %s\n", sc_trainer_cost_source(t));
    }
    progress p = {.tty = isatty(2), .t0 = sc_clock_seconds(), .print_every = print_every, .unit_name = "samples", .peak_bytes = -1,
                  .precision = precision_word(cfg->precision), .show = show};
    if (p.print_every <= 0) p.print_every = total > 20 ? total / 20 : 1;
    if (!st) st = log && show ? log_open(&p, log, cfg->resume_dir != NULL) : SC_OK;
    st = sc_comm_agree(st, "opening the log");
    if (!st) st = train_loop(t, o, &p);
    sc_profile_enable(false);
    if (p.log) fclose(p.log);
    if (!st && !stopped_by) st = sc_trainer_save_model(t, o->out);
    if (!st && !stopped_by && show) {
        if (p.done)
            printf("loss %.4f -> %.4f over %lld steps on %s%s\n", p.first_loss, p.last_loss, (long long)p.done,
                   sc_device_name(sc_trainer_device(t)), p.skipped ? " (some fp16 updates skipped, see above)" : "");
        else printf("nothing to do: the state is already at step %lld of %lld\n", (long long)done, (long long)total);
        printf("wrote %s\n", o->out);
        int64_t runs[2];
        int threads;
        if (p.done && sc_trainer_thread_runs(t, &threads, runs))
            printf("threads: %d, or fewer for %lld of %lld steps (whichever ran faster; the weights are the same)\n",
                   threads, (long long)runs[1], (long long)(runs[0] + runs[1]));
        if (p.done) plan_report_line(t, &p);
        if (sc_trainer_prefetch_hits(t))
            printf("prefetch: %lld of %lld steps took a batch drawn during the step before\n",
                   (long long)sc_trainer_prefetch_hits(t), (long long)p.done);
        if (o->profile) profile_report(t, p.done - 1);
    }
    free(p.exec_times);
    sc_trainer_free(t);
    return st;
}

static int pick(const char *v, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (!strcmp(v, names[i])) return i;
    return -1;
}

/* Options -> config; 0 or a usage message. */
static const char *config_from_args(arg_spec *s, sc_trainer_config *c) {
    static const char *const optims[] = {"sgd", "adamw"}, *const scheds[] = {"constant", "cosine"},
                             *const losses[] = {"auto", "ce", "mse"}, *const tdt[] = {"uint16", "int32"};
    arg_opt *a;
    c->model_path = s->pos[0];
    int k;
    if ((a = args_get(s, "optimizer"))->set) {
        if ((k = pick(a->s, optims, 2)) < 0) return "--optimizer must be sgd or adamw";
        c->train.optim = k ? SC_OPTIM_ADAMW : SC_OPTIM_SGD;
    }
    bool adamw = c->train.optim == SC_OPTIM_ADAMW;
    c->lr = adamw ? 1e-3f : 0.01f;
    c->train.momentum = adamw ? 0.0f : 0.9f;
    c->train.weight_decay = adamw ? 0.01f : 0.0f;
    c->steps = 100;
    if ((a = args_get(s, "batch"))->set && (c->batch = a->i) < 1) return "--batch must be at least 1";
    const char *why;
    if ((a = args_get(s, "precision"))->set && !(c->precision = precision_parse(a->s, &why))) return why;
    if ((a = args_get(s, "seq"))->set && (c->seq = a->i) < 1) return "--seq must be at least 1";
    if ((a = args_get(s, "save-precision"))->set) {
        if (!strcmp(a->s, "bf16")) c->save_precision = SC_BF16;
        else if (strcmp(a->s, "fp32")) return "--save-precision must be fp32 or bf16";
    }
    bool fp16 = c->precision == SC_F16;
    if ((a = args_get(s, "loss-scale"))->set &&
        (!fp16 || !((c->loss_scale_init = a->f) > 0 && isfinite(c->loss_scale_init))))
        return fp16 ? "--loss-scale must be a finite value > 0" : "--loss-scale needs --precision fp16";
    if ((a = args_get(s, "loss-scale-interval"))->set && (!fp16 || (c->loss_scale_interval = a->i) < 1))
        return fp16 ? "--loss-scale-interval must be at least 1" : "--loss-scale-interval needs --precision fp16";
    if ((a = args_get(s, "epochs"))->set) {
        if (args_get(s, "steps")->set) return "give --steps or --epochs, not both";
        if ((c->epochs = a->i) < 1) return "--epochs must be at least 1";
        c->steps = 0;
    }
    if ((a = args_get(s, "steps"))->set && (c->steps = a->i) < 1) return "--steps must be at least 1";
    if ((a = args_get(s, "lr"))->set && !((c->lr = (float)a->f) >= 0 && isfinite(c->lr))) return "--lr must be >= 0";
    if ((a = args_get(s, "momentum"))->set && !((c->train.momentum = (float)a->f) >= 0)) return "--momentum must be >= 0";
    if ((a = args_get(s, "weight-decay"))->set && !((c->train.weight_decay = (float)a->f) >= 0))
        return "--weight-decay must be >= 0";
    c->train.nesterov = args_get(s, "nesterov")->set;
    if (c->train.nesterov && (adamw || c->train.momentum <= 0)) return "--nesterov needs SGD with --momentum > 0";
    if ((a = args_get(s, "schedule"))->set) {
        if ((k = pick(a->s, scheds, 2)) < 0) return "--schedule must be constant or cosine";
        c->schedule = k ? SC_LR_COSINE : SC_LR_CONSTANT;
    }
    if ((a = args_get(s, "warmup"))->set && (c->warmup = a->i) < 0) return "--warmup must be >= 0";
    if ((a = args_get(s, "clip"))->set && !((c->train.clip_norm = (float)a->f) > 0)) return "--clip must be > 0";
    if ((a = args_get(s, "param-block"))->set && !(c->train.param_block = sc_param_block_parse(a->s)))
        return PARAM_BLOCK_USAGE;
    if ((a = args_get(s, "seed"))->set) c->seed = (uint64_t)a->i;
    if ((a = args_get(s, "freeze"))->set) c->train.freeze_regex = a->s;
    if ((a = args_get(s, "loss"))->set) {
        if ((k = pick(a->s, losses, 3)) < 0) return "--loss must be auto, ce or mse";
        c->train.loss = k == 0 ? SC_LOSS_AUTO : k == 1 ? SC_LOSS_CROSS_ENTROPY : SC_LOSS_MSE;
    }
    arg_opt *data = args_get(s, "data");
    if (data->n_list > 8) return "--data is given more than 8 times";
    c->data_path = data->n_list ? data->list[0] : NULL;
    for (int i = 1; i < data->n_list; i++) c->more_data[c->n_more_data++] = data->list[i];
    c->labels_path = args_get(s, "labels")->s;
    c->tokens_path = args_get(s, "tokens")->s;
    if (c->tokens_path && (c->data_path || c->labels_path)) return "give --data/--labels or --tokens, not both";
    if (c->labels_path && !c->data_path) return "--labels needs --data";
    if (c->data_path && !c->labels_path) return "--data needs --labels";
    if ((a = args_get(s, "token-dtype"))->set) {
        if ((k = pick(a->s, tdt, 2)) < 0) return "--token-dtype must be uint16 or int32";
        c->token_dtype = k ? SC_I32 : SC_U16;
    }
    c->resume_dir = args_get(s, "resume")->s;
    if ((a = args_get(s, "threads"))->set && (c->threads = (int)a->i) < 1) return "--threads must be at least 1";
    c->train.keep_grads = args_get(s, "dump-grads")->set;
    const char *sn, *on;
    const char *u = plan_options_from_args(s, &c->plan, &c->use_plan, &sn, &on);
    if (u) return u;
    c->link_bandwidth = c->plan.link_bandwidth; /* --link-bandwidth: the CPU backend's link too */
    c->device = SC_DEVICE_AUTO;
    if ((a = args_get(s, "device"))->set && (k = device_parse(a->s)) < 0) return "--device must be cpu, cuda or auto";
    if (a->set) c->device = (sc_device)k;
    c->tf32 = args_get(s, "tf32")->set;
    c->train.shard_optimizer = args_get(s, "shard-optimizer")->set;
    if ((a = args_get(s, "comm-timeout"))->set) {
        if (!(a->f > 0 && isfinite(a->f))) return "--comm-timeout must be a number of seconds > 0";
        sc_comm_set_timeout(a->f);
    }
    static const char *const rollbacks[] = {"auto", "on", "off"}; /* sc_rollback's order, and sc_prefetch's */
    if ((a = args_get(s, "rollback"))->set) {
        if ((k = pick(a->s, rollbacks, 3)) < 0) return "--rollback must be auto, on or off";
        c->rollback = (sc_rollback)k;
    }
    if ((a = args_get(s, "prefetch"))->set) {
        if ((k = pick(a->s, rollbacks, 3)) < 0) return "--prefetch must be auto, on or off";
        c->prefetch = (sc_prefetch)k;
    }
    return NULL;
}

/* The exit code; data parallel: a rank that failed ends the whole job (MPI_Abort), since the others
 * may be waiting for it in a collective, and a job every rank finished leaves MPI cleanly. */
static int ranks_exit(sc_status st) {
    if (sc_comm_size() > 1 && st) {
        int code = cmd_report(sc_status_prefix(st, "rank %d of %d: ", sc_comm_rank(), sc_comm_size()));
        fflush(stderr);
        fflush(stdout);
        sc_comm_abort(code);
        return code;
    }
    sc_comm_finalize();
    if (!st && stopped_by) return 128 + stopped_by;
    return cmd_report(st);
}

int cmd_train(int argc, char **argv) {
    arg_opt opts[] = {
        {.name = "output", .short_name = 'o', .kind = ARG_STR, .metavar = "FILE", .help = "trained model (default MODEL.trained.onnx)"},
        STEP_SHAPE_OPTS,
        {.name = "steps", .kind = ARG_INT, .metavar = "N", .help = "total optimizer steps (default 100)"},
        {.name = "epochs", .kind = ARG_INT, .metavar = "N", .help = "train N passes over the data instead"},
        {.name = "lr", .kind = ARG_FLOAT, .metavar = "X", .help = "learning rate (default 0.01 SGD, 0.001 AdamW)"},
        OPTIMIZER_OPT,
        {.name = "momentum", .kind = ARG_FLOAT, .metavar = "X", .help = "SGD momentum (default 0.9)"},
        {.name = "weight-decay", .kind = ARG_FLOAT, .metavar = "X", .help = "default 0 (SGD), 0.01 (AdamW)"},
        {.name = "nesterov", .kind = ARG_FLAG, .help = "Nesterov momentum (SGD)"},
        {.name = "schedule", .kind = ARG_STR, .metavar = "constant|cosine", .help = "learning-rate schedule (default constant)"},
        {.name = "warmup", .kind = ARG_INT, .metavar = "N", .help = "linear warm-up steps (default 0)"},
        CLIP_OPT,
        PARAM_BLOCK_OPT,
        {.name = "seed", .kind = ARG_INT, .metavar = "N", .help = "seed of data, shuffling and dropout (default 0)"},
        {.name = "freeze", .kind = ARG_STR, .metavar = "REGEX", .help = "parameters whose name matches are not trained"},
        {.name = "loss", .kind = ARG_STR, .metavar = "auto|ce|mse", .help = "loss head (default: from the output shape)"},
        {.name = "data", .kind = ARG_LIST, .metavar = "[NAME=]X.npy",
         .help = "model input samples [N, ...]: the one data input, or the input NAME (repeatable; attention masks "
                 "and position ids left out get all ones and 0..T-1)"},
        {.name = "labels", .kind = ARG_STR, .metavar = "Y.npy", .help = "loss targets [N, ...]"},
        {.name = "tokens", .kind = ARG_STR, .metavar = "FILE.bin", .help = "flat token ids for a language model"},
        {.name = "token-dtype", .kind = ARG_STR, .metavar = "uint16|int32", .help = "dtype of --tokens (default uint16)"},
        {.name = "save-every", .kind = ARG_INT, .metavar = "N", .help = "save the training state every N steps"},
        {.name = "state", .kind = ARG_STR, .metavar = "DIR", .help = "folder of the training state"},
        {.name = "resume", .kind = ARG_STR, .metavar = "DIR", .help = "continue from DIR/state.bin"},
        {.name = "log", .kind = ARG_STR, .metavar = "FILE.csv",
         .help = "CSV: step,loss,lr,samples_per_s,elapsed_s,precision,loss_scale,skipped"},
        {.name = "save-precision", .kind = ARG_STR, .metavar = "fp32|bf16",
         .help = "the trained model's weights: fp32 (default), or bf16 initializers behind Cast nodes (half the "
                 "file; onnxruntime runs it)"},
        {.name = "loss-scale", .kind = ARG_FLOAT, .metavar = "S",
         .help = "fp16: the first step's loss scale (default 65536; halved on overflow, doubled after "
                 "--loss-scale-interval good steps)"},
        {.name = "loss-scale-interval", .kind = ARG_INT, .metavar = "N",
         .help = "fp16: good steps in a row before the loss scale doubles (default 2000)"},
        {.name = "print-every", .kind = ARG_INT, .metavar = "N", .help = "plain progress lines every N steps (not a terminal)"},
        THREADS_OPT,
        {.name = "profile", .kind = ARG_FLAG,
         .help = "print the time per op (CPU kernels) over the steps after the first, slowest first"},
        {.name = "dump-grads", .kind = ARG_STR, .metavar = "DIR", .help = "write step 1's gradients and loss as .npy"},
        {.name = "device", .kind = ARG_STR, .metavar = "cpu|cuda|auto", .help = "where to train (default auto: the GPU when present)"},
        {.name = "tf32", .kind = ARG_FLAG, .help = "allow TF32 for f32 products and convolutions (CUDA)"},
        {.name = "shard-optimizer", .kind = ARG_FLAG,
         .help = "data parallel (mpirun): each rank keeps and updates 1/N of the optimizer state (ZeRO-1); the "
                 "weights are those of the unsharded run"},
        {.name = "comm-timeout", .kind = ARG_FLOAT, .metavar = "S",
         .help = "data parallel (mpirun): seconds a rank waits for another in a collective before the job fails "
                 "naming it (default 600)"},
        {.name = "rollback", .kind = ARG_STR, .metavar = "auto|on|off",
         .help = "keep a copy of the state to undo a NaN/Inf step and find its origin (default auto: when it fits "
                 "in half the free host memory)"},
        {.name = "prefetch", .kind = ARG_STR, .metavar = "auto|on|off",
         .help = "draw the next batch on a worker thread while a step runs (default auto: on for a GPU, off on "
                 "the CPU, whose step uses every core); the weights are the same"},
        PLAN_CLI_OPTS,
        PLAN_CALIBRATE_OPT,
    };
    arg_spec spec = ARGS_MODEL_SPEC(
        "scorch-run train MODEL.onnx [-o FILE] [options]",
        "Trains the model on the CPU or an NVIDIA GPU (forward, loss, backward, optimizer update) and writes it back as ONNX.\n"
        "Without --data or --tokens it trains on seeded synthetic data shaped for the model.",
        opts);
    int exit_code;
    if (args_done(&spec, argc, argv, &exit_code)) return exit_code;
    sc_trainer_config cfg;
    sc_trainer_config_default(&cfg);
    const char *usage = config_from_args(&spec, &cfg);
    run_opts o = {.state_dir = args_get(&spec, "state")->s, .dump_grads = args_get(&spec, "dump-grads")->s};
    arg_opt *se = args_get(&spec, "save-every");
    if (!usage && se->set && (o.save_every = se->i) < 1) usage = "--save-every must be at least 1";
    if (!o.state_dir) o.state_dir = cfg.resume_dir;
    if (!usage && se->set && !o.state_dir) usage = "--save-every needs --state DIR (or --resume DIR)";
    o.calibrate = cfg.calibrate = args_get(&spec, "calibrate")->set;
    o.profile = args_get(&spec, "profile")->set;
    if (!usage && o.calibrate && !cfg.use_plan)
        usage = "--calibrate calibrates the planner: give --memory (or --strategy/--offload) with it";
    if (usage) {
        args_error("%s", usage);
        args_free(&spec);
        return 2;
    }
    char *def_out = args_get(&spec, "output")->set ? NULL : default_output(cfg.model_path);
    o.out = def_out ? def_out : args_get(&spec, "output")->s;
    char *def_state = o.state_dir ? NULL : model_derived(cfg.model_path, ".state");
    o.interrupt_dir = o.state_dir ? o.state_dir : def_state;
    sc_status st = o.out && o.interrupt_dir ? SC_OK : sc_errorf("out of memory");
    arg_opt *pe = args_get(&spec, "print-every");
    stopped_by = 0;
    train_signals_install();
    if (!st) st = train_run(&cfg, &o, pe->set ? pe->i : 0, args_get(&spec, "log")->s);
    train_signals_restore();
    free(def_out);
    free(def_state);
    args_free(&spec);
    return ranks_exit(st);
}
