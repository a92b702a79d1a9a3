/* Every op of graph/ops.def and graph/ops_train.def has a gradient rule or an explicit reason why
 * not (docs/STYLE.md habit 1), and never both: a rule with a "not differentiable" reason would
 * be a contradiction. Also checks that a graph reaching the loss through an op without a rule fails
 * with a message naming the node. */
#include <stdio.h>
#include <string.h>

#include "autodiff/autodiff.h"
#include "autodiff/grad.h"
#include "graph/shape.h"

static int check_tables(void) {
    int failures = 0, rules = 0, reasons = 0;
    for (int op = 0; op < SC_OP_COUNT; op++) {
        const char *name = sc_op_name((sc_op)op);
        const char *why = grad_rule_missing_reason((sc_op)op);
        if (!sc_grad_rules[op] && !why) {
            printf("FAIL %s: no gradient rule and no reason\n", name);
            failures++;
        }
        if (sc_grad_rules[op] && why) {
            printf("FAIL %s: has a gradient rule and a reason (\"%s\")\n", name, why);
            failures++;
        }
        if (why && strncmp(why, "not differentiable", 18) != 0) {
            printf("FAIL %s: reason does not start with \"not differentiable\": %s\n", name, why);
            failures++;
        }
        rules += sc_grad_rules[op] != NULL;
        reasons += why != NULL;
    }
    printf("%d ops: %d gradient rules, %d not differentiable\n", SC_OP_COUNT, rules, reasons);
    return failures;
}

/* x -> Range-free path through an op without a rule: Shape is not differentiable, so differentiate
 * through ReluGrad (an internal op) and expect an error naming the node. */
static int check_missing_rule_error(void) {
    sc_graph g;
    graph_init(&g);
    sc_status st = SC_OK;
    sc_desc d = sc_desc_make(SC_F32, 1, (const int64_t[]){4});
    int x = graph_add_value(&g, "x", SC_VALUE_INPUT, &d, &st);
    int y = graph_add_value(&g, "y", SC_VALUE_ACT, &d, &st);
    sc_desc s = sc_desc_make(SC_F32, 0, NULL);
    int l = graph_add_value(&g, "loss", SC_VALUE_ACT, &s, &st);
    graph_add_node(&g, SC_OP_RELU_GRAD, "the_relu_grad", (int[]){x, x}, 2, &y, 1, &st);
    graph_add_node(&g, SC_OP_REDUCE_SUM, "sum", &y, 1, &l, 1, &st);
    int gx = -1;
    int failures = 0;
    if (st) {
        printf("FAIL building the graph: %s\n", sc_status_message(st));
        failures++;
    } else {
        st = autodiff_build_backward(&g, l, &x, 1, &gx);
        if (!st || !strstr(sc_status_message(st), "the_relu_grad") || !strstr(sc_status_message(st), "not differentiated twice")) {
            printf("FAIL missing rule: expected an error naming 'the_relu_grad', got %s\n", st ? sc_status_message(st) : "success");
            failures++;
        }
    }
    sc_status_free(st);
    graph_free(&g);
    return failures;
}

int main(void) {
    int failures = check_tables() + check_missing_rule_error();
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
