/* ONNX model -> graph IR (import/onnx.h).
 *
 * Order of work, each step validating what it reads before anything depends on it:
 *   1. unpack the ModelProto; check the default-domain opset is in [SC_MIN_OPSET, SC_MAX_OPSET];
 *      nodes and initializers are unpacked one at a time as steps 2, 4 and 5 reach them (below);
 *   2. initializers -> PARAM (floating point) or CONST (integer/bool) values, data in the graph arena;
 *   3. graph inputs that are not initializers -> INPUT values (dim_param -> dim -1 with its name);
 *   4. nodes in file order: Constant -> CONST value, others -> ops with typed attributes and
 *      canonicalised inputs (import/canonical.c). A duplicate output names both nodes; an input
 *      that nothing made yet is looked for among the later nodes, so a reference to a value
 *      produced later is reported as a topological-order error rather than as a missing value
 *      (on the error path only: indexing every output up front cost a map probe per output and an
 *      extra unpack per node, a quarter of the load time at depth 250000);
 *   5. graph outputs; graph_link.
 * Nothing in the graph points into unpacked messages (names, attributes and initializer data are
 * copied); the serialized bytes stay with the model for sc_model_save. A file is mapped rather than
 * read: its bytes are the page cache's pages, not 680 MB of fresh memory to fault in and copy at depth
 * 250000 (Scorch replaces files by rename, so the mapped file is never changed under it). Unpacking a whole model costs
 * about 2.5 KB per node (protobuf-c allocates every message, string and array separately): 5 GB for
 * a 680 MB file at depth 250000, all of it page-faulted in and thrown away. So the ModelProto and
 * its GraphProto are unpacked as shells without their repeated node and initializer fields, and
 * each node and initializer is unpacked alone from its bytes into a scratch bump allocator that is
 * emptied after it (protobuf's merge rules hold: several graph fields are read in file order, as
 * one graph). Every step that reads them walks the bytes again; unpacking is cheap next to faulting.
 * On any failure the partly built model is freed and the error is prefixed with the file name.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/free_all.h"
#include "import/onnx.h"
#include "import/onnx_internal.h"
#include "import/onnx_load_ctx.h"


static sc_status parse_failed(void) {
    return sc_errorf("not a valid ONNX model: protobuf parse failed (truncated or corrupt file)");
}

typedef sc_status (*graph_entry_fn)(load_ctx *c, size_t idx, const ProtobufCMessage *msg);

/* Calls fn on every entry of the graph's repeated message field `name`, in file order, each
 * unpacked alone into the scratch pool. */
static sc_status each_graph_entry(load_ctx *c, const char *name, const ProtobufCMessageDescriptor *desc,
                                  graph_entry_fn fn) {
    uint32_t number = onnx_field_number(&onnx__graph_proto__descriptor, name);
    size_t idx = 0;
    for (int gi = 0; gi < c->n_graphs; gi++) {
        const uint8_t *p = c->graphs[gi].data, *end = p + c->graphs[gi].size;
        onnx_wire_field f;
        while (onnx_wire_next(&p, end, &f)) {
            if (f.number != number || f.wire != 2) continue;
            ProtobufCMessage *msg = protobuf_c_message_unpack(desc, &c->scratch_alloc, f.size, f.data);
            sc_status st = msg ? fn(c, idx++, msg) : parse_failed();
            proto_pool_reset(&c->scratch);
            if (st) return st;
        }
    }
    return SC_OK;
}

static bool is_default_domain(const char *d) { return !d || !*d || strcmp(d, "ai.onnx") == 0; }

static sc_status check_opset(const Onnx__ModelProto *mp, int64_t *opset) {
    if (!mp->n_opset_import) return sc_errorf("not a valid ONNX model: no opset_import (truncated file?)");
    bool found = false;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        if (!is_default_domain(o->domain) || found) continue;
        found = true;
        *opset = o->has_version ? o->version : 0;
    }
    if (!found) return sc_errorf("opset_import: no entry for the default ONNX domain");
    if (*opset < SC_MIN_OPSET || *opset > SC_MAX_OPSET)
        return sc_errorf("opset_import: unsupported opset %lld (supported %d..%d)", (long long)*opset, SC_MIN_OPSET,
                         SC_MAX_OPSET);
    return SC_OK;
}

static sc_status add_initializers(load_ctx *c) {
    if (c->gp->n_sparse_initializer) return sc_errorf("sparse initializers are not supported");
    return each_graph_entry(c, "initializer", &onnx__tensor_proto__descriptor, onnx_load_initializer);
}

static sc_status add_nodes(load_ctx *c) { return each_graph_entry(c, "node", &onnx__node_proto__descriptor, onnx_load_node); }
/* Copies the fields of [p, end) into shell except the length-delimited fields skip_a and skip_b,
 * which are counted (*n_a, *n_b) and, for skip_a when list is given, listed. */
static sc_status split_fields(const uint8_t *p, const uint8_t *end, onnx_buf *shell, uint32_t skip_a, size_t *n_a,
                              uint32_t skip_b, size_t *n_b, onnx_wire_field **list) {
    onnx_wire_field f;
    while (onnx_wire_next(&p, end, &f)) {
        if (f.wire == 2 && f.number == skip_a) {
            if (list) {
                onnx_wire_field *l = realloc(*list, (*n_a + 1) * sizeof *l);
                if (!l) return sc_errorf("out of memory");
                *list = l;
                l[*n_a] = f;
            }
            ++*n_a;
        } else if (f.wire == 2 && f.number == skip_b) {
            ++*n_b;
        } else if (!onnx_buf_put(shell, f.start, (size_t)(f.end - f.start))) {
            return sc_errorf("out of memory");
        }
    }
    return p == end ? SC_OK : parse_failed();
}

/* Unpacks the ModelProto and GraphProto shells into pool (c->gp, *mp) and lists the graph fields. */
static sc_status unpack_shells(load_ctx *c, const uint8_t *data, size_t size, ProtobufCAllocator *pool,
                               Onnx__ModelProto **mp) {
    onnx_buf model = {0}, graph = {0};
    size_t n_graphs = 0, none = 0;
    sc_status st = split_fields(data, data + size, &model, onnx_field_number(&onnx__model_proto__descriptor, "graph"),
                                &n_graphs, 0, &none, &c->graphs);
    c->n_graphs = (int)n_graphs;
    for (int i = 0; i < c->n_graphs && !st; i++)
        st = split_fields(c->graphs[i].data, c->graphs[i].data + c->graphs[i].size, &graph,
                          onnx_field_number(&onnx__graph_proto__descriptor, "node"), &c->n_node,
                          onnx_field_number(&onnx__graph_proto__descriptor, "initializer"), &c->n_initializer, NULL);
    if (!st) *mp = onnx__model_proto__unpack(pool, model.n, model.p ? model.p : (const uint8_t *)"");
    if (!st && !*mp) st = parse_failed();
    if (!st && c->n_graphs) c->gp = onnx__graph_proto__unpack(pool, graph.n, graph.p ? graph.p : (const uint8_t *)"");
    if (!st && c->n_graphs && !c->gp) st = parse_failed();
    free(model.p);
    free(graph.p);
    return st;
}

static sc_status model_build(sc_model *m, load_ctx *c, const Onnx__ModelProto *mp, size_t file_size) {
    c->g = &m->graph;
    c->top = &m->graph;
    c->src = (sc_tensor_src){.dir = m->dir, .max_inline = file_size, .arena = &m->graph.arena};
    if (!c->gp) return sc_errorf("not a valid ONNX model: no graph");
    SC_TRY(check_opset(mp, &c->opset));
    m->graph.opset = c->opset;
    if (c->n_node > SC_IMPORT_MAX_NODES)
        return sc_errorf("graph has %zu nodes, more than the supported %d", c->n_node, SC_IMPORT_MAX_NODES);
    /* Room for every name up front (most nodes have one output): no rehash of a growing map. */
    if (!sc_strmap_reserve(&m->graph.by_name, c->n_initializer + c->gp->n_input + c->n_node))
        return sc_errorf("out of memory indexing %zu names", c->n_initializer + c->gp->n_input + c->n_node);
    sc_status st = add_initializers(c);
    if (!st) st = onnx_load_inputs(c);
    c->first_node_value = m->graph.n_values;
    if (!st) st = add_nodes(c);
    if (!st) st = onnx_load_outputs(c);
    if (!st) st = graph_link(&m->graph);
    return st;
}

void onnx_bytes_drop(const sc_model *m, const void *p, size_t n) {
    if (!m->proto_mapped || !n) return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo = ((uintptr_t)p + page - 1) & ~(page - 1),
              hi = ((uintptr_t)p + n) & ~(page - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

static void bytes_release(void *data, size_t size, bool mapped) {
    if (mapped) munmap(data, size);
    else free(data);
}

/* Builds the model from data (size bytes; mapped: from file_map), taking ownership of data: it is
 * kept as the model's serialized bytes on success and released on failure. */
static sc_status model_load_owned(uint8_t *data, size_t size, bool mapped, const char *name, const char *dir,
                                  sc_model **out) {
    *out = NULL;
    if (size == 0) {
        bytes_release(data, size, mapped);
        return sc_errorf("%s: empty file", name);
    }
    sc_status st = sc_status_prefix(onnx_wire_check(data, size), "%s: ", name);
    proto_block *blocks = NULL;
    ProtobufCAllocator pool = {.alloc = proto_pool_alloc, .free = proto_pool_free, .allocator_data = &blocks};
    load_ctx c = {.scratch_alloc = {.alloc = proto_pool_alloc, .free = proto_pool_free}};
    c.scratch_alloc.allocator_data = &c.scratch;
    Onnx__ModelProto *mp = NULL;
    if (!st) st = sc_status_prefix(unpack_shells(&c, data, size, &pool, &mp), "%s: ", name);
    sc_model *m = st ? NULL : calloc(1, sizeof *m);
    if (!st && !m) st = sc_errorf("%s: out of memory", name);
    if (st) {
        proto_pool_release(blocks);
        free(c.graphs);
        bytes_release(data, size, mapped);
        return st;
    }
    graph_init(&m->graph);
    m->proto_bytes = data;
    m->proto_size = size;
    m->proto_mapped = mapped;
    m->path = strdup(name);
    m->dir = dir ? strdup(dir) : NULL;
    st = (!m->path || (dir && !m->dir)) ? sc_errorf("out of memory") : model_build(m, &c, mp, size);
    SC_FREE_ALL(c.value_node, c.in_buf, c.graphs);
    proto_pool_release(c.scratch);
    proto_pool_release(blocks);
    if (st) {
        sc_model_free(m);
        return sc_status_prefix(st, "%s: ", name);
    }
    onnx_bytes_drop(m, data, size); /* every initializer is decoded: the file's pages are no longer needed */
    *out = m;
    return SC_OK;
}

sc_status sc_model_load_buffer(const void *data, size_t size, const char *name, const char *dir, sc_model **out) {
    *out = NULL;
    if (!name) name = "<buffer>";
    if (size == 0) return sc_errorf("%s: empty file", name);
    uint8_t *copy = malloc(size);
    if (!copy) return sc_errorf("%s: out of memory copying %zu bytes", name, size);
    memcpy(copy, data, size);
    return model_load_owned(copy, size, false, name, dir, out);
}

/* Maps a regular file read-only (*mapped true), or reads it where mapping fails. */
static sc_status file_map(const char *path, uint8_t **buf, size_t *size, bool *mapped) {
    *mapped = false;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return onnx_read_file(path, buf, size); /* its message names the cause */
    struct stat sb;
    void *p = MAP_FAILED;
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0)
        p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return onnx_read_file(path, buf, size);
    *buf = p;
    *size = (size_t)sb.st_size;
    *mapped = true;
    return SC_OK;
}

sc_status sc_model_load(const char *path, sc_model **out) {
    *out = NULL;
    uint8_t *buf;
    size_t size;
    bool mapped;
    SC_TRY(file_map(path, &buf, &size, &mapped));
    char *dir = onnx_dir_of(path);
    sc_status st = SC_OK;
    if (dir) st = model_load_owned(buf, size, mapped, path, dir, out);
    else {
        bytes_release(buf, size, mapped);
        st = sc_errorf("%s: out of memory", path);
    }
    free(dir);
    return st;
}

void sc_model_free(sc_model *m) {
    if (!m) return;
    graph_free(&m->graph);
    if (m->proto_bytes) bytes_release(m->proto_bytes, m->proto_size, m->proto_mapped);
    SC_FREE_ALL(m->path, m->dir, m);
}
