/* GPT-2 generator (Radford et al. 2019), laid out as Hugging Face's GPT2LMHeadModel / nanoGPT.
 *
 *   input_ids i64 [batch, seq] (seq <= --seq, symbolic)
 *   x = Gather(wte [V,D], ids) + Gather(wpe [T,D], Slice(arange(T), 0, seq))
 *   per block (pre-LayerNorm):
 *     h = LayerNormalization(x; ln_1, eps 1e-5)
 *     q,k,v = Split(h @ c_attn.weight [D,3D] + c_attn.bias, [D,D,D], axis 2)
 *     heads: Reshape [0,0,H,D/H] + Transpose (q,v: [B,H,T,hd]; k: [B,H,hd,T])
 *     att = Softmax(Where(causal[:seq,:seq], (q @ k) * 1/sqrt(hd), -FLT_MAX), axis -1)
 *       (the mask is a constant bool lower triangle [T,T] sliced to [seq,seq]; -FLT_MAX as HF's
 *        finfo.min, so a row never becomes NaN)
 *     x = x + (merge(att @ v) @ attn.c_proj.weight [D,D] + bias)
 *     h = LayerNormalization(x; ln_2)
 *     x = x + (gelu(h @ c_fc.weight [D,4D] + b) @ mlp.c_proj.weight [4D,D] + b)
 *       gelu(u) = 0.5 u (1 + erf(u / sqrt 2)), PyTorch's default exact form (opset 17 has no Gelu)
 *   logits [batch, seq, V] = LayerNormalization(x; ln_f) @ Transpose(wte)  (tied LM head)
 *
 * Init (GPT-2 paper / HF _init_weights): every weight normal(0, 0.02), the two residual
 * projections (attn.c_proj, mlp.c_proj) normal(0, 0.02/sqrt(2 L)), biases 0, LayerNorm 1/0.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tools/gen_models.h"

typedef struct {
    const char *head_shape, *merge_shape, *split_sizes, *scale, *mask, *neg, *half, *one, *sqrt2;
} gpt_consts;

static const char *node1(onnxb *b, const char *op, const char *x, const char *name, Onnx__NodeProto **n) {
    const char *in[1] = {x}, *out[1] = {name};
    *n = onnxb_node(b, op, name, in, 1, out, 1);
    return name;
}

static const char *transpose(onnxb *b, const char *x, const char *name, const int64_t *perm, int n) {
    Onnx__NodeProto *node;
    node1(b, "Transpose", x, name, &node);
    onnxb_attr_ints(b, node, "perm", perm, n);
    return name;
}

static const char *layer_norm(onnxb *b, const char *p, const char *x, int64_t d) {
    int64_t dd[1] = {d};
    const char *in[3] = {x, gen_param_fill(b, onnxb_name(b, "%s.weight", p), 1, dd, 1.0f),
                         gen_param_fill(b, onnxb_name(b, "%s.bias", p), 1, dd, 0.0f)};
    const char *out[1] = {p};
    Onnx__NodeProto *n = onnxb_node(b, "LayerNormalization", p, in, 3, out, 1);
    onnxb_attr_int(b, n, "axis", -1);
    onnxb_attr_float(b, n, "epsilon", 1e-5f);
    return p;
}

/* x @ W + bias with W [din, dout] normal(0, std) (HF's Conv1D layout), bias 0. */
static const char *linear(onnxb *b, gen_rng *r, const char *p, const char *x, int64_t din, int64_t dout, double std) {
    int64_t wd[2] = {din, dout}, bd[1] = {dout};
    const char *w = gen_param_normal(b, r, onnxb_name(b, "%s.weight", p), 2, wd, std);
    const char *bias = gen_param_fill(b, onnxb_name(b, "%s.bias", p), 1, bd, 0.0f);
    const char *y = gen_op2(b, "MatMul", x, w, onnxb_name(b, "%s.matmul", p));
    return gen_op2(b, "Add", y, bias, p);
}

static const char *attention(onnxb *b, gen_rng *r, const gpt_consts *k, const char *p, const char *h,
                             const gen_gpt_opts *o) {
    int64_t d = o->dim;
    double std = 0.02, proj_std = 0.02 / sqrt(2.0 * (double)o->layers);
    const char *qkv = linear(b, r, onnxb_name(b, "%s.c_attn", p), h, d, 3 * d, std);
    const char *parts[3] = {onnxb_name(b, "%s.q", p), onnxb_name(b, "%s.k", p), onnxb_name(b, "%s.v", p)};
    const char *in[2] = {qkv, k->split_sizes};
    Onnx__NodeProto *n = onnxb_node(b, "Split", onnxb_name(b, "%s.split", p), in, 2, parts, 3);
    onnxb_attr_int(b, n, "axis", 2);
    static const int64_t perm_qv[4] = {0, 2, 1, 3}, perm_k[4] = {0, 2, 3, 1};
    const char *q = gen_op2(b, "Reshape", parts[0], k->head_shape, onnxb_name(b, "%s.q_heads", p));
    const char *kk = gen_op2(b, "Reshape", parts[1], k->head_shape, onnxb_name(b, "%s.k_heads", p));
    const char *v = gen_op2(b, "Reshape", parts[2], k->head_shape, onnxb_name(b, "%s.v_heads", p));
    q = transpose(b, q, onnxb_name(b, "%s.q_t", p), perm_qv, 4);
    kk = transpose(b, kk, onnxb_name(b, "%s.k_t", p), perm_k, 4);
    v = transpose(b, v, onnxb_name(b, "%s.v_t", p), perm_qv, 4);
    const char *att = gen_op2(b, "MatMul", q, kk, onnxb_name(b, "%s.scores", p));
    att = gen_op2(b, "Mul", att, k->scale, onnxb_name(b, "%s.scaled", p));
    const char *win[3] = {k->mask, att, k->neg}, *wout[1] = {onnxb_name(b, "%s.masked", p)};
    onnxb_node(b, "Where", wout[0], win, 3, wout, 1);
    const char *probs = node1(b, "Softmax", wout[0], onnxb_name(b, "%s.probs", p), &n);
    onnxb_attr_int(b, n, "axis", -1);
    const char *y = gen_op2(b, "MatMul", probs, v, onnxb_name(b, "%s.context", p));
    y = transpose(b, y, onnxb_name(b, "%s.context_t", p), perm_qv, 4);
    y = gen_op2(b, "Reshape", y, k->merge_shape, onnxb_name(b, "%s.merged", p));
    return linear(b, r, onnxb_name(b, "%s.c_proj", p), y, d, d, proj_std);
}

static const char *mlp(onnxb *b, gen_rng *r, const gpt_consts *k, const char *p, const char *h, const gen_gpt_opts *o) {
    int64_t d = o->dim;
    const char *u = linear(b, r, onnxb_name(b, "%s.c_fc", p), h, d, 4 * d, 0.02);
    const char *e = gen_op2(b, "Div", u, k->sqrt2, onnxb_name(b, "%s.gelu.scaled", p));
    e = gen_op1(b, "Erf", e, onnxb_name(b, "%s.gelu.erf", p));
    e = gen_op2(b, "Add", e, k->one, onnxb_name(b, "%s.gelu.erf1", p));
    const char *hu = gen_op2(b, "Mul", u, k->half, onnxb_name(b, "%s.gelu.half", p));
    const char *g = gen_op2(b, "Mul", hu, e, onnxb_name(b, "%s.gelu", p));
    return linear(b, r, onnxb_name(b, "%s.c_proj", p), g, 4 * d, d, 0.02 / sqrt(2.0 * (double)o->layers));
}

/* Positions and the causal mask, both cut to the run's seq from the input's shape. */
static const char *positions_and_mask(onnxb *b, gpt_consts *k, const gen_gpt_opts *o) {
    int64_t t = o->seq;
    const char *shape = gen_op1(b, "Shape", "input_ids", "input_shape");
    int64_t one[1] = {1}, two[1] = {2}, zero[1] = {0}, zeros2[2] = {0, 0}, axes2[2] = {0, 1};
    const char *c1 = onnxb_const_i64(b, "const.one", 1, one);
    const char *c0 = onnxb_const_i64(b, "const.zero", 1, zero);
    const char *sin[4] = {shape, c1, onnxb_const_i64(b, "const.two", 1, two), c0}, *sout[1] = {"seq_len"};
    onnxb_node(b, "Slice", "seq_len", sin, 4, sout, 1);
    int64_t *ar = malloc(sizeof *ar * (size_t)t);
    unsigned char *m = malloc((size_t)(t * t));
    if (!ar || !m) {
        free(ar);
        free(m);
        onnxb_fail(b, sc_errorf("gpt: out of memory for the position table (seq %lld)", (long long)t));
        return "";
    }
    for (int64_t i = 0; i < t; i++) {
        ar[i] = i;
        for (int64_t j = 0; j < t; j++) m[i * t + j] = j <= i;
    }
    const char *arange = onnxb_const_i64(b, "positions.all", (int)t, ar);
    int64_t md[2] = {t, t};
    const char *mask_all = onnxb_const(b, "causal_mask.all", SC_BOOL, 2, md, m);
    free(ar);
    free(m);
    const char *pin[4] = {arange, c0, "seq_len", c0}, *pout[1] = {"positions"};
    onnxb_node(b, "Slice", "positions", pin, 4, pout, 1);
    const char *cin[2] = {"seq_len", "seq_len"}, *cout[1] = {"mask_ends"};
    Onnx__NodeProto *n = onnxb_node(b, "Concat", "mask_ends", cin, 2, cout, 1);
    onnxb_attr_int(b, n, "axis", 0);
    const char *min[4] = {mask_all, onnxb_const_i64(b, "const.zeros2", 2, zeros2), "mask_ends",
                          onnxb_const_i64(b, "const.axes01", 2, axes2)},
               *mout[1] = {"causal_mask"};
    onnxb_node(b, "Slice", "causal_mask", min, 4, mout, 1);
    k->mask = "causal_mask";
    return "positions";
}

sc_status gen_gpt(onnxb *b, const gen_gpt_opts *o) {
    if (o->layers < 1 || o->heads < 1 || o->dim < 1 || o->vocab < 1 || o->seq < 1)
        return sc_errorf("gpt: --layers, --heads, --dim, --vocab and --seq must be positive");
    if (o->dim % o->heads)
        return sc_errorf("gpt: --dim %lld is not a multiple of --heads %lld", (long long)o->dim, (long long)o->heads);
    if (o->seq > 65536) return sc_errorf("gpt: --seq %lld too large (max 65536)", (long long)o->seq);
    gen_rng r;
    gen_rng_seed(&r, o->seed);
    int64_t d = o->dim, hd = d / o->heads;
    int64_t in_dims[2] = {-1, -1}, out_dims[3] = {-1, -1, o->vocab};
    const char *names[3] = {"batch", "seq"};
    onnxb_input(b, "input_ids", SC_I64, 2, in_dims, names);

    gpt_consts k;
    int64_t head_shape[4] = {0, 0, o->heads, hd}, merge_shape[3] = {0, 0, d}, split[3] = {d, d, d};
    k.head_shape = onnxb_const_i64(b, "const.head_shape", 4, head_shape);
    k.merge_shape = onnxb_const_i64(b, "const.merge_shape", 3, merge_shape);
    k.split_sizes = onnxb_const_i64(b, "const.qkv_split", 3, split);
    k.scale = onnxb_const_f32_scalar(b, "const.attn_scale", (float)(1.0 / sqrt((double)hd)));
    k.neg = onnxb_const_f32_scalar(b, "const.mask_value", -FLT_MAX);
    k.half = onnxb_const_f32_scalar(b, "const.half", 0.5f);
    k.one = onnxb_const_f32_scalar(b, "const.one_f", 1.0f);
    k.sqrt2 = onnxb_const_f32_scalar(b, "const.sqrt2", (float)sqrt(2.0));
    const char *pos = positions_and_mask(b, &k, o);

    int64_t wte_d[2] = {o->vocab, d}, wpe_d[2] = {o->seq, d};
    const char *wte = gen_param_normal(b, &r, "wte.weight", 2, wte_d, 0.02);
    const char *wpe = gen_param_normal(b, &r, "wpe.weight", 2, wpe_d, 0.02);
    const char *tok = gen_op2(b, "Gather", wte, "input_ids", "tok_emb");
    const char *pe = gen_op2(b, "Gather", wpe, pos, "pos_emb");
    const char *x = gen_op2(b, "Add", tok, pe, "h.input");
    for (int64_t l = 0; l < o->layers && !onnxb_error(b); l++) {
        const char *h = layer_norm(b, onnxb_name(b, "h.%lld.ln_1", (long long)l), x, d);
        const char *a = attention(b, &r, &k, onnxb_name(b, "h.%lld.attn", (long long)l), h, o);
        x = gen_op2(b, "Add", x, a, onnxb_name(b, "h.%lld.residual1", (long long)l));
        h = layer_norm(b, onnxb_name(b, "h.%lld.ln_2", (long long)l), x, d);
        const char *m = mlp(b, &r, &k, onnxb_name(b, "h.%lld.mlp", (long long)l), h, o);
        x = gen_op2(b, "Add", x, m, onnxb_name(b, "h.%lld.residual2", (long long)l));
    }
    x = layer_norm(b, "ln_f", x, d);
    static const int64_t perm[2] = {1, 0};
    const char *wt = transpose(b, wte, "lm_head.weight_t", perm, 2);
    gen_op2(b, "MatMul", x, wt, "logits");
    onnxb_output(b, "logits", SC_F32, 3, out_dims, names);
    return SC_OK;
}
