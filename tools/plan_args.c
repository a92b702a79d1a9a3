/* The plan options shared by `plan`, `train` and `bench` (plan_report.h). */
#include <string.h>

#include "core/units.h"
#include "tools/plan_report.h"
#include "train/trainer.h" /* sc_device */

/* ---- command-line options ---- */

int device_parse(const char *name) {
    static const char *const names[] = {[SC_DEVICE_CPU] = "cpu", [SC_DEVICE_CUDA] = "cuda", [SC_DEVICE_AUTO] = "auto"};
    for (int i = 0; i < 3; i++)
        if (name && !strcmp(name, names[i])) return i;
    return -1;
}

const char *plan_options_from_args(arg_spec *spec, sc_plan_options *o, bool *given, const char **strategy_name,
                                   const char **offload_name) {
    memset(o, 0, sizeof *o);
    arg_opt *mem = args_get(spec, "memory"), *strat = args_get(spec, "strategy"), *off = args_get(spec, "offload"),
            *slots = args_get(spec, "slots"), *upd = args_get(spec, "optimizer-on"),
            *link = args_get(spec, "link-bandwidth"), *res = args_get(spec, "resident");
    *given = mem->set || strat->set || off->set || slots->set;
    if (mem->set && (o->budget = sc_parse_size(mem->s)) <= 0)
        return "--memory takes a positive size such as 256MiB, 1.5GiB, 500MB or a byte count";
    if (link && link->set && (o->link_bandwidth = (double)sc_parse_size(link->s)) <= 0)
        return "--link-bandwidth takes a positive rate in bytes/s such as 25GB, 12GiB or a byte count";
    *strategy_name = strat->set ? strat->s : mem->set ? "auto" : "none";
    int k = plan_strategy_parse(*strategy_name);
    if (k < 0) return "--strategy must be none, sqrt, dc, optimal, evict or auto";
    o->strategy = (sc_strategy)k;
    *offload_name = off->set ? off->s : "none";
    if ((k = plan_offload_parse(*offload_name)) < 0) return "--offload must be auto, weights, activations, both or none";
    o->offload = (sc_offload)k;
    if (slots->set) {
        if (slots->i < 1 || slots->i > 1000000) return "--slots must be between 1 and 1000000";
        if (strat->set && o->strategy != SC_STRATEGY_DC && o->strategy != SC_STRATEGY_AUTO)
            return "--slots applies to --strategy dc (or auto) only";
        o->slots = (int)slots->i;
    }
    if (upd && upd->set) {
        int u = plan_update_parse(upd->s);
        if (u < 0) return "--optimizer-on must be host, device or auto";
        if (o->offload == SC_OFFLOAD_NONE || o->offload == SC_OFFLOAD_ACTIVATIONS)
            return "--optimizer-on applies to streamed parameters: give --offload weights, both or auto";
        o->update_on = (sc_update_place)u;
    }
    if (res && res->set) {
        if (o->offload == SC_OFFLOAD_NONE || o->offload == SC_OFFLOAD_ACTIVATIONS)
            return "--resident applies to streamed parameters: give --offload weights, both or auto";
        if (!strcmp(res->s, "none")) o->resident_max = -1;
        else if (strcmp(res->s, "auto") && (o->resident_max = sc_parse_size(res->s)) <= 0)
            return "--resident takes a size such as 64KiB, auto or none";
    }
    return NULL;
}

