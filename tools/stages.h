/* The library's stages, callable one by one (internal: scorch-run and the tests; the public,
 * installed API is include/scorch.h).
 *
 *   sc_model_load        import/   ONNX file -> graph IR
 *   graph_prepare        graph/    bind dims, infer shapes, fold, clean up
 *   sc_forward_*         backends/ run the graph on the CPU
 *   sc_model_save        import/   graph's parameters -> ONNX file
 *
 * Every function that can fail on input returns an sc_status (NULL on success) whose message names
 * the file, node or value at fault; free it with sc_status_free.
 */
#ifndef SC_TOOLS_STAGES_H
#define SC_TOOLS_STAGES_H

#include "core/status.h"
#include "core/tensor.h"
#include "graph/graph.h"
#include "graph/passes.h"
#include "import/onnx.h"

#include "scorch.h" /* SCORCH_VERSION */

#endif
