/* The CPU backend's kernel interface.
 *
 * A kernel computes one node. The caller (executor, constant folder, tests) has already run shape
 * inference, so every output tensor arrives with its final desc and storage allocated; kernels only
 * fill out[k].data. An omitted optional input or output has data == NULL. Kernels must not keep
 * pointers to their inputs or outputs after returning. Input-dependent failures (unsupported dtype,
 * bad attribute combination) return a status naming the node; kernels never print.
 *
 * Float kernels handle f32 (fast path, vectorised / oneDNN) and, where the op is differentiable, f64
 * (reference loops used by the finite-difference gradient checks).
 */
#ifndef SC_CPU_H
#define SC_CPU_H

#include "backends/common/common.h"
#include "graph/graph.h"
#include "graph/passes.h"

typedef sc_status (*sc_cpu_kernel)(const sc_kernel_call *call);

/* Indexed by op; NULL means the CPU backend does not run that op (see sc_kernel_missing_reason). */
extern const sc_cpu_kernel sc_cpu_kernels[SC_OP_COUNT];

/* Runs one node through the table; a NULL entry gives a clear "unsupported" status. */
sc_status cpu_run_node(const sc_node *node, const sc_tensor *in, int n_in, sc_tensor *out, int n_out);
/* The CPU kernels as graph/'s constant-folding evaluator (sc_bind_options.eval). */
const sc_node_evaluator *cpu_evaluator(void);

/* Threads used by the backend's parallel loops and oneDNN (OpenMP). 0 = library default. */
void cpu_set_num_threads(int n);
int cpu_num_threads(void);

/* Parameter data changed in place (an optimizer step, new weights loaded): caches derived from
 * parameter values (oneDNN's reordered conv weights) are rebuilt on next use. The trainer calls it
 * after every step; the epoch is what caches compare against. */
void cpu_params_changed(void);
uint64_t cpu_params_epoch(void);

/* A status naming the node, for kernels: cpu_errorf(call, "dtype %s not supported", ...). */
sc_status cpu_errorf(const sc_kernel_call *call, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
