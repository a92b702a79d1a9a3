/* libscorch's public header: the stages of DESIGN.md, callable one by one.
 *
 *   sc_model_load        import/   ONNX file -> graph IR
 *   graph_prepare        graph/    bind dims, infer shapes, fold, clean up
 *   sc_forward_*         backends/ run the graph on the CPU
 *   sc_model_save        import/   graph's parameters -> ONNX file
 *
 * Every function that can fail on input returns an sc_status (NULL on success) whose message names
 * the file, node or value at fault; free it with sc_status_free.
 */
#ifndef SCORCH_H
#define SCORCH_H

#include "core/status.h"
#include "core/tensor.h"
#include "graph/graph.h"
#include "graph/passes.h"
#include "import/onnx.h"
#include "backends/executor.h"

#define SCORCH_VERSION "0.1.0"

#endif
