/* Every table that must cover all ops of graph/ops.def (and ops_train.def) does, or says why not (docs/STYLE.md habit 1).
 * Adding an op to ops.def without a shape function or CPU kernel fails here, naming the op. */
#include <stdio.h>

#include "backends/cpu/cpu.h"
#include "graph/shape.h"
#include "import/attrs.h"

int main(void) {
    int failures = 0;
    for (int op = 0; op < SC_OP_COUNT; op++) {
        const char *name = sc_op_name((sc_op)op);
        if (!sc_shape_fns[op] && !shape_fn_missing_reason((sc_op)op)) {
            printf("FAIL %s: no shape function and no reason\n", name);
            failures++;
        }
        if (!sc_cpu_kernels[op] && !sc_kernel_missing_reason((sc_op)op)) {
            printf("FAIL %s: no CPU kernel and no reason\n", name);
            failures++;
        }
        if (!sc_attr_parsers[op] && !attrs_parser_missing_reason((sc_op)op)) {
            printf("FAIL %s: no attribute parser and no reason\n", name);
            failures++;
        }
        if (!sc_op_is_internal((sc_op)op) && sc_op_from_onnx_name(name) != (sc_op)op) {
            printf("FAIL %s: name lookup does not round-trip\n", name);
            failures++;
        }
    }
    printf("%d ops checked, %d failures\n", SC_OP_COUNT, failures);
    return failures ? 1 : 0;
}
