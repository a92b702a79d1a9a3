/* ONNX import and export (docs/DESIGN.md, import/).
 *
 * sc_model_load parses and validates a .onnx file into the graph IR (symbolic dims still unbound;
 * call graph_prepare next). The serialized model is kept, not the unpacked ModelProto: sc_model_save
 * unpacks it again to write the original model back with the graph's current parameter data,
 * unknown fields preserved, to a temp file renamed into place. (Unpacked, protobuf-c holds one
 * allocation per message and string: ~2.5 KB per node, 5 GB for a 250,000-block ResNet, against
 * the file's 680 MB.)
 */
#ifndef SC_ONNX_H
#define SC_ONNX_H

#include "core/atomic_write.h"
#include "graph/graph.h"

#define SC_MIN_OPSET 11
#define SC_MAX_OPSET 21

typedef struct sc_model {
    sc_graph graph;
    char *path;  /* the file it was loaded from */
    char *dir;   /* its folder: external data must stay inside it */
    void *proto_bytes; /* the serialized ModelProto it was built from, owned: malloc, or mapped */
    size_t proto_size;
    bool proto_mapped; /* proto_bytes is the file mapped read-only (sc_model_load): unmapped on free */
} sc_model;

/* On failure *out is NULL and the status names the file and the node, initializer or field. */
sc_status sc_model_load(const char *path, sc_model **out);
sc_status sc_model_load_buffer(const void *data, size_t size, const char *name, const char *dir, sc_model **out);
/* Writes the model with every initializer's data taken from the graph value of the same name.
 * Initializers over external_threshold bytes go to external data in "<path>.data" (0 = never). */
sc_status sc_model_save(const sc_model *m, const char *path, int64_t external_threshold);
/* The same with the trained weights stored in `weights` (SC_F32: as sc_model_save; SC_BF16: every f32
 * parameter initializer is written as a bf16 initializer "<name>.bf16", rounded to nearest even,
 * and a Cast node to float named "<name>.to_float" makes "<name>" again before the first node, so
 * the graph is unchanged for its readers and half the size; needs opset >= 13). */
sc_status sc_model_save_as(const sc_model *m, const char *path, int64_t external_threshold, sc_dtype weights);
/* The threshold for m: protobuf caps a message at 2 GiB, so a model with over 1.5 GiB of parameters
 * keeps every initializer over 1 KiB in external data; 0 (all inline) otherwise. */
int64_t sc_model_external_threshold(const sc_model *m);
void sc_model_free(sc_model *m);

/* Reads one serialized TensorProto (the onnx node tests' input_0.pb, ...) into a tensor whose data
 * is malloc'd (free with free(t->data)). Same validation as initializers. */
sc_status sc_load_tensor_pb(const char *path, sc_tensor *t, char **name_out);



#endif
