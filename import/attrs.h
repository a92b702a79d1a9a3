/* The attribute parser table (docs/STYLE.md habits 2 and 3): one parse function per op family, indexed
 * by sc_op with designated initializers. Each parser fills the op's typed struct of graph/attrs.h
 * from the ONNX node, applying the defaults of the model's opset. Ops without attributes use
 * attrs_parse_none (explicitly, so a table that misses an op is visible). A NULL entry has a reason in
 * attrs_parser_missing_reason. */
#ifndef SC_IMPORT_ATTRS_H
#define SC_IMPORT_ATTRS_H

#include "core/status.h"
#include "graph/attrs.h"
#include "graph/ops.h"

typedef struct sc_node_ctx sc_node_ctx; /* import/onnx_internal.h */
typedef sc_status (*sc_attr_parser)(const sc_node_ctx *c, sc_attrs *out);

extern const sc_attr_parser sc_attr_parsers[SC_OP_COUNT];
const char *attrs_parser_missing_reason(sc_op op);

#endif
