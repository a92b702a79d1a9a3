/* Pool window resolution shared by cpu_nn_pool.c and cpu_nn_pool_grad.c; the window math is in
 * cpu_nn_pool_geom.h. Errors name the node and both shapes.
 */
#include "backends/cpu/cpu_nn_pool_geom.h"

sc_status pool_geom_resolve(const sc_kernel_call *call, const sc_desc *x, const char *x_name, const sc_desc *y,
                            const char *y_name, cpu_window *w) {
    const sc_window_attrs *wa = &call->node->attrs->window;
    if (x->rank < 3 || x->rank > 2 + SC_MAX_SPATIAL || y->rank != x->rank || y->dims[0] != x->dims[0] ||
        y->dims[1] != x->dims[1]) {
        char a[96], b[96];
        return cpu_errorf(call, "%s %s and %s %s do not match a pool", x_name, sc_desc_str(x, a, sizeof a), y_name,
                          sc_desc_str(y, b, sizeof b));
    }
    if (!wa->has_kernel_shape || wa->n_spatial != x->rank - 2)
        return cpu_errorf(call, "kernel_shape missing or not of rank %d", x->rank - 2);
    return cpu_window_resolve(call, wa, x, wa->kernel_shape, y, w);
}
