/* A bump allocator for unpacked protobuf-c messages (import/onnx_internal.h): the loader unpacks
 * one node or initializer at a time into it and empties it between them. */
#include <stddef.h>
#include <stdlib.h>

#include "import/onnx_internal.h"

enum { PROTO_BLOCK = 16 << 20 }; /* bytes per shared block; larger requests get their own */

struct proto_block {
    struct proto_block *next;
    size_t used, cap;
    max_align_t data[];
};

void *proto_pool_alloc(void *pool, size_t size) {
    proto_block **head = pool, *b = *head;
    size = (size + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    if (b && b->cap - b->used >= size) {
        void *r = (char *)b->data + b->used;
        b->used += size;
        return r;
    }
    size_t cap = size > PROTO_BLOCK / 4 ? size : PROTO_BLOCK;
    proto_block *nb = malloc(sizeof *nb + cap);
    if (!nb) return NULL;
    nb->used = size, nb->cap = cap;
    if (b && cap == size) nb->next = b->next, b->next = nb; /* a dedicated block: the head keeps its room */
    else nb->next = b, *head = nb;
    return nb->data;
}

void proto_pool_free(void *pool, void *ptr) { (void)pool, (void)ptr; } /* released by proto_pool_release */

void proto_pool_release(proto_block *b) {
    while (b) {
        proto_block *next = b->next;
        free(b);
        b = next;
    }
}

/* Empties the pool, keeping one shared block for the next message (no page is faulted twice). */
void proto_pool_reset(proto_block **head) {
    proto_block *b = *head;
    if (!b) return;
    proto_pool_release(b->next);
    b->next = NULL;
    if (b->cap != PROTO_BLOCK) {
        free(b);
        *head = NULL;
    } else {
        b->used = 0;
    }
}
