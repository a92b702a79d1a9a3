/* Model loading shared by `info` and `run` (see model_load.h). */
#include "backends/cpu/cpu.h"
#include "tools/model_load.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

sc_status model_load_prepared(arg_spec *spec, sc_model **out, int *usage_error) {
    return model_load_prepared_for(spec, false, out, usage_error);
}

sc_dtype precision_parse(const char *name, const char **why) {
    *why = NULL;
    if (!strcmp(name, "fp32")) return SC_F32;
    if (!strcmp(name, "bf16")) return SC_BF16;
    if (!strcmp(name, "fp16")) return SC_F16;
    *why = "--precision must be fp32, bf16 or fp16";
    return SC_DTYPE_UNDEFINED;
}

const char *precision_word(sc_dtype low) { return low == SC_BF16 ? "bf16" : low == SC_F16 ? "fp16" : "fp32"; }

sc_status model_load_prepared_for(arg_spec *spec, bool inference, sc_model **out, int *usage_error) {
    *out = NULL;
    *usage_error = 0;
    arg_opt *prec = args_get(spec, "precision");
    const char *why = NULL;
    sc_dtype precision = prec && prec->set ? precision_parse(prec->s, &why) : SC_F32;
    if (why) {
        *usage_error = 1;
        return sc_errorf("%s", why);
    }
    arg_opt *batch = args_get(spec, "batch"), *seq = args_get(spec, "seq"), *dim = args_get(spec, "dim");
    if ((batch->set && batch->i < 1) || (seq->set && seq->i < 1)) {
        *usage_error = 1;
        return sc_errorf("--batch and --seq must be at least 1");
    }
    sc_dim_binding *binds = calloc((size_t)dim->n_list + 1, sizeof *binds);
    char **names = calloc((size_t)dim->n_list + 1, sizeof *names);
    sc_status st = binds && names ? SC_OK : sc_errorf("out of memory");
    for (int i = 0; !st && i < dim->n_list; i++) {
        const char *eq = strchr(dim->list[i], '=');
        char *end = NULL;
        long long v = 0;
        if (eq) {
            errno = 0;
            v = strtoll(eq + 1, &end, 10);
        }
        if (!eq || eq == dim->list[i] || !end || end == eq + 1 || *end || errno || v < 1) {
            *usage_error = 1;
            st = sc_errorf("--dim '%s': expected NAME=N with N >= 1", dim->list[i]);
            break;
        }
        names[i] = strndup(dim->list[i], (size_t)(eq - dim->list[i]));
        if (!names[i]) st = sc_errorf("out of memory");
        binds[i] = (sc_dim_binding){names[i], v};
    }
    sc_model *m = NULL;
    if (!st) st = sc_model_load(spec->pos[0], &m);
    if (!st) {
        sc_bind_options bo = {.eval = cpu_evaluator(), .batch = batch->set ? batch->i : 0, .seq = seq->set ? seq->i : 0, .dims = binds,
                              .n_dims = dim->n_list, .inference = inference, .precision = precision};
        st = sc_status_prefix(graph_prepare(&m->graph, &bo), "%s: ", spec->pos[0]);
    }
    for (int i = 0; names && i < dim->n_list; i++) free(names[i]);
    free(names);
    free(binds);
    if (st) {
        sc_model_free(m);
        return st;
    }
    *out = m;
    return SC_OK;
}
