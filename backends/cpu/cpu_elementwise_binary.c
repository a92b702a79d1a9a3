/* Binary and variadic element-wise kernels with numpy broadcasting (ONNX Add, Sub, Mul, Div, Mod,
 * Pow, Max, Min, Equal, Less, Greater, And, Or, Where).
 *
 * Semantics follow the ONNX operator specs and onnxruntime where the spec is silent:
 * - integer Div truncates toward zero (C division, as onnxruntime); division by zero is an error
 *   naming the node instead of a crash; INT_MIN / -1 wraps.
 * - Pow: the output has the base's type; the exponent may be any numeric type. Integer bases
 *   compute pow in double and truncate (as onnxruntime's static_cast<T>(std::pow(x, y))).
 * - Max/Min propagate NaN (onnxruntime >= 1.16).
 * All inputs except Where's condition and Pow's exponent must share one dtype (the shape pass has
 * checked shapes; dtypes are checked here because kernels are also called directly).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/cpu/cpu_kernels.h"
#include "core/half.h"

/* One vectorised pass of a row: x and y are XI and YI (an element a[i] / b[i], or a broadcast
 * scalar read once before the loop, so an output written over an input cannot change it). */
#define BIN_LOOP(XI, YI, EXPR)                                                                     \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                          \
        TA x = (XI);                                                                               \
        TB y = (YI);                                                                               \
        o[i] = (TO)(EXPR);                                                                         \
    }

/* A row function over inputs of types TA_, TB_ writing TO_; EXPR sees x (from a) and y (from b). */
#define BIN_ROW(NAME, TA_, TB_, TO_, EXPR)                                                         \
    static void NAME(const void *ctx, void *o_, const void *const *in, const int64_t *s, int64_t n) { \
        typedef TA_ TA;                                                                            \
        typedef TB_ TB;                                                                            \
        typedef TO_ TO;                                                                            \
        (void)ctx;                                                                                 \
        TO *o = o_;                                                                                \
        const TA *a = in[0];                                                                       \
        const TB *b = in[1];                                                                       \
        if (n <= 0) return;                                                                        \
        const TA a0 = a[0];                                                                        \
        const TB b0 = b[0];                                                                        \
        if (s[0] && s[1]) {                                                                        \
            BIN_LOOP(a[i], b[i], EXPR)                                                             \
        } else if (s[0]) {                                                                         \
            BIN_LOOP(a[i], b0, EXPR)                                                               \
        } else if (s[1]) {                                                                         \
            BIN_LOOP(a0, b[i], EXPR)                                                               \
        } else {                                                                                   \
            const TA x = a0;                                                                       \
            const TB y = b0;                                                                       \
            const TO v = (TO)(EXPR);                                                               \
            for (int64_t i = 0; i < n; i++) o[i] = v;                                              \
        }                                                                                          \
    }

#define SAME_DEF(code, T, tn, op, ...) BIN_ROW(op##_##tn, T, T, T, __VA_ARGS__)
#define CMP_DEF(code, T, tn, op, ...) BIN_ROW(op##_##tn, T, T, uint8_t, __VA_ARGS__)
#define ENTRY(code, T, tn, op, ...) [code] = op##_##tn,

/* 16-bit floats (core/half.h), for every op below that takes them. Arithmetic rounds the f32 row's
 * result once (cpu_half_arith_row). Max, Min and the comparisons compare the widened values;
 * Max and Min then copy the chosen input's bits, so a NaN passes through unchanged. */
#define HALF_ARITH(tn, code, WIDEN, INF, op)                                                       \
    static void op##_##tn(const void *ctx, void *o, const void *const *in, const int64_t *s, int64_t n) { \
        cpu_half_arith_row(code, op##_f32, ctx, o, in, s, n, 2);                                   \
    }
#define HALF_OPS(X, ...)                                                                           \
    X(f16, SC_F16, sc_f16_to_f32, 0x7c00u, __VA_ARGS__) X(bf16, SC_BF16, sc_bf16_to_f32, 0x7f80u, __VA_ARGS__)
#define HALF_SELECT(tn, code, WIDEN, INF, ...)                                                        \
    static inline bool isnan_##tn(uint16_t h) { return (h & 0x7fffu) > (INF); }                     \
    static inline uint16_t max1_##tn(uint16_t x, uint16_t y) {                                     \
        return isnan_##tn(x) ? x : isnan_##tn(y) ? y : WIDEN(x) > WIDEN(y) ? x : y;                \
    }                                                                                              \
    static inline uint16_t min1_##tn(uint16_t x, uint16_t y) {                                     \
        return isnan_##tn(x) ? x : isnan_##tn(y) ? y : WIDEN(x) < WIDEN(y) ? x : y;                \
    }                                                                                              \
    BIN_ROW(max_##tn, uint16_t, uint16_t, uint16_t, max1_##tn(x, y))                              \
    BIN_ROW(min_##tn, uint16_t, uint16_t, uint16_t, min1_##tn(x, y))                              \
    BIN_ROW(eq_##tn, uint16_t, uint16_t, uint8_t, WIDEN(x) == WIDEN(y))                           \
    BIN_ROW(lt_##tn, uint16_t, uint16_t, uint8_t, WIDEN(x) < WIDEN(y))                            \
    BIN_ROW(gt_##tn, uint16_t, uint16_t, uint8_t, WIDEN(x) > WIDEN(y))
#define HALF_ENTRY(tn, code, WIDEN, INF, op) [code] = op##_##tn,

/* Add, Sub, Mul over every numeric type. */
CPU_NUM_TYPES(SAME_DEF, add, x + y)
CPU_NUM_TYPES(SAME_DEF, sub, x - y)
CPU_NUM_TYPES(SAME_DEF, mul, x * y)
HALF_OPS(HALF_ARITH, add)
HALF_OPS(HALF_ARITH, sub)
HALF_OPS(HALF_ARITH, mul)
static const cpu_bcast_row_fn add_fns[SC_DTYPE_MAX] = {CPU_NUM_TYPES(ENTRY, add) HALF_OPS(HALF_ENTRY, add)};
static const cpu_bcast_row_fn sub_fns[SC_DTYPE_MAX] = {CPU_NUM_TYPES(ENTRY, sub) HALF_OPS(HALF_ENTRY, sub)};
static const cpu_bcast_row_fn mul_fns[SC_DTYPE_MAX] = {CPU_NUM_TYPES(ENTRY, mul) HALF_OPS(HALF_ENTRY, mul)};

/* Div: y == -1 is negation through unsigned arithmetic so INT_MIN / -1 wraps instead of trapping. */
CPU_FLOAT_TYPES(SAME_DEF, div, x / y)
CPU_SINT_TYPES(SAME_DEF, div, y == -1 ? (TO)(0 - (uint64_t)x) : x / y)
CPU_UINT_TYPES(SAME_DEF, div, x / y)
HALF_OPS(HALF_ARITH, div)
static const cpu_bcast_row_fn div_fns[SC_DTYPE_MAX] = {CPU_NUM_TYPES(ENTRY, div) HALF_OPS(HALF_ENTRY, div)};

/* Max/Min: a NaN operand wins (x != x is the NaN test that survives vectorisation). */
CPU_FLOAT_TYPES(SAME_DEF, max, x != x ? x : (y != y ? y : (x > y ? x : y)))
CPU_FLOAT_TYPES(SAME_DEF, min, x != x ? x : (y != y ? y : (x < y ? x : y)))
CPU_INT_TYPES(SAME_DEF, max, x > y ? x : y)
CPU_INT_TYPES(SAME_DEF, min, x < y ? x : y)
HALF_OPS(HALF_SELECT, 0)
static const cpu_bcast_row_fn max_fns[SC_DTYPE_MAX] = {CPU_NUM_TYPES(ENTRY, max) HALF_OPS(HALF_ENTRY, max)};
static const cpu_bcast_row_fn min_fns[SC_DTYPE_MAX] = {CPU_NUM_TYPES(ENTRY, min) HALF_OPS(HALF_ENTRY, min)};

/* Comparisons write bool (one byte, 0 or 1). Equal also takes bool inputs. */
CPU_NUM_TYPES(CMP_DEF, eq, x == y)
CPU_NUM_TYPES(CMP_DEF, lt, x < y)
CPU_NUM_TYPES(CMP_DEF, gt, x > y)
BIN_ROW(eq_bool, uint8_t, uint8_t, uint8_t, (x != 0) == (y != 0))
BIN_ROW(and_bool, uint8_t, uint8_t, uint8_t, (x != 0) & (y != 0))
BIN_ROW(or_bool, uint8_t, uint8_t, uint8_t, (x != 0) | (y != 0))
static const cpu_bcast_row_fn eq_fns[SC_DTYPE_MAX] = {CPU_NUM_TYPES(ENTRY, eq) HALF_OPS(HALF_ENTRY, eq)[SC_BOOL] = eq_bool};
static const cpu_bcast_row_fn lt_fns[SC_DTYPE_MAX] = {CPU_NUM_TYPES(ENTRY, lt) HALF_OPS(HALF_ENTRY, lt)};
static const cpu_bcast_row_fn gt_fns[SC_DTYPE_MAX] = {CPU_NUM_TYPES(ENTRY, gt) HALF_OPS(HALF_ENTRY, gt)};
static const cpu_bcast_row_fn and_fns[SC_DTYPE_MAX] = {[SC_BOOL] = and_bool};
static const cpu_bcast_row_fn or_fns[SC_DTYPE_MAX] = {[SC_BOOL] = or_bool};

/* Pow rows: float bases take an exponent of their own type, integer bases a double exponent. */
BIN_ROW(pow_f32, float, float, float, powf(x, y))
BIN_ROW(pow_f64, double, double, double, pow(x, y))
BIN_ROW(pow_i32, int32_t, double, int32_t, pow((double)x, y))
BIN_ROW(pow_i64, int64_t, double, int64_t, pow((double)x, y))
BIN_ROW(square_f32, float, float, float, ((void)y, x * x))
BIN_ROW(square_f64, double, double, double, ((void)y, x * x))

static sc_status shapes_errorf(const sc_kernel_call *c, int n_in) {
    char buf[4][96];
    sc_desc_str(&c->out[0].desc, buf[0], sizeof buf[0]);
    for (int k = 0; k < n_in && k < 3; k++) sc_desc_str(&c->in[k].desc, buf[k + 1], sizeof buf[k + 1]);
    return cpu_errorf(c, "inputs %s%s%s%s%s cannot be broadcast to the output %s", buf[1], n_in > 1 ? ", " : "",
                      n_in > 1 ? buf[2] : "", n_in > 2 ? ", " : "", n_in > 2 ? buf[3] : "", buf[0]);
}

/* out = fn(a, b) broadcast to out's desc. */
static sc_status bcast2(const sc_kernel_call *c, cpu_bcast_row_fn fn, const sc_tensor *a, const sc_tensor *b,
                        sc_tensor *o) {
    const sc_desc *d[2] = {&a->desc, &b->desc};
    cpu_bcast bc;
    if (!cpu_bcast_init(&bc, &o->desc, d, 2)) return shapes_errorf(c, 2);
    const void *p[2] = {a->data, b->data};
    size_t es[2] = {sc_dtype_size(a->desc.dtype), sc_dtype_size(b->desc.dtype)};
    cpu_bcast_run(&bc, fn, NULL, o->data, sc_dtype_size(o->desc.dtype), p, es);
    return SC_OK;
}

/* Add, Sub and Mul with attrs.binary.nhwc (graph/pass_layout.c; other ops' attrs share the union,
 * so only these read the flag): the output and its full-shape inputs are stored channels-last and
 * any other input is the same bytes in either layout, so broadcasting over the channels-last views
 * of all three computes the op. */
static bool binary_channels_last(const sc_kernel_call *c) {
    const sc_node *n = c->node;
    return n && (n->op == SC_OP_ADD || n->op == SC_OP_SUB || n->op == SC_OP_MUL) && n->attrs->binary.nhwc;
}

static sc_status binary_run(const sc_kernel_call *c, const cpu_bcast_row_fn *table) {
    sc_dtype t = c->in[0].desc.dtype;
    if (c->in[1].desc.dtype != t)
        return cpu_errorf(c, "input dtypes differ (%s and %s)", sc_dtype_name(t), sc_dtype_name(c->in[1].desc.dtype));
    cpu_bcast_row_fn fn = (unsigned)t < SC_DTYPE_MAX ? table[t] : NULL;
    if (!fn) return cpu_errorf(c, "dtype %s not supported", sc_dtype_name(t));
    if (!binary_channels_last(c)) return bcast2(c, fn, &c->in[0], &c->in[1], &c->out[0]);
    sc_tensor a = c->in[0], b = c->in[1], o = c->out[0];
    int r = o.desc.rank;
    if (!cpu_channels_last_view(&a.desc, r) || !cpu_channels_last_view(&b.desc, r) ||
        !cpu_channels_last_view(&o.desc, r))
        return cpu_errorf(c, "a channels-last elementwise op needs an output of rank 3 to 5 and inputs of at most its rank");
    return bcast2(c, fn, &a, &b, &o);
}

sc_status cpu_add(const sc_kernel_call *c) { return binary_run(c, add_fns); }
sc_status cpu_sub(const sc_kernel_call *c) { return binary_run(c, sub_fns); }
sc_status cpu_mul(const sc_kernel_call *c) { return binary_run(c, mul_fns); }
sc_status cpu_equal(const sc_kernel_call *c) { return binary_run(c, eq_fns); }
sc_status cpu_less(const sc_kernel_call *c) { return binary_run(c, lt_fns); }
sc_status cpu_greater(const sc_kernel_call *c) { return binary_run(c, gt_fns); }
sc_status cpu_and(const sc_kernel_call *c) { return binary_run(c, and_fns); }
sc_status cpu_or(const sc_kernel_call *c) { return binary_run(c, or_fns); }

/* Mod. fmod = 1: C's fmod / %, the sign of the dividend; fmod = 0 (integers only, ONNX): Python's %,
 * the sign of the divisor, r + y when r and y differ in sign. y == -1 gives 0 without evaluating
 * INT_MIN % -1, which traps. */
static inline int64_t py_mod(int64_t x, int64_t y) {
    int64_t r = y == -1 ? 0 : x % y;
    return r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
}
CPU_FLOAT_TYPES(SAME_DEF, fmod, fmod(x, y))
CPU_SINT_TYPES(SAME_DEF, fmod, y == -1 ? 0 : x % y)
CPU_UINT_TYPES(SAME_DEF, fmod, x % y)
CPU_SINT_TYPES(SAME_DEF, pymod, py_mod(x, y))
static const cpu_bcast_row_fn fmod_fns[SC_DTYPE_MAX] = {CPU_NUM_TYPES(ENTRY, fmod)};
static const cpu_bcast_row_fn pymod_fns[SC_DTYPE_MAX] = {CPU_SINT_TYPES(ENTRY, pymod) CPU_UINT_TYPES(ENTRY, fmod)};

/* True if any element of an integer tensor is zero (integer Div's divisor check). */
static bool int_has_zero(const sc_tensor *t) {
    int64_t n = sc_desc_numel(&t->desc);
    size_t es = sc_dtype_size(t->desc.dtype);
    const unsigned char *p = t->data;
    static const unsigned char zero[8];
    for (int64_t i = 0; i < n; i++)
        if (!memcmp(p + i * (int64_t)es, zero, es)) return true;
    return false;
}

sc_status cpu_div(const sc_kernel_call *c) {
    if (!sc_dtype_is_float(c->in[1].desc.dtype) && c->in[1].desc.dtype == c->in[0].desc.dtype && int_has_zero(&c->in[1]))
        return cpu_errorf(c, "integer division by zero (divisor input has a zero element)");
    return binary_run(c, div_fns);
}

sc_status cpu_mod(const sc_kernel_call *c) {
    sc_dtype t = c->in[0].desc.dtype;
    bool fmod_ = c->node->attrs->mod.fmod;
    if (sc_dtype_is_float(t) && !fmod_) return cpu_errorf(c, "fmod must be 1 for floating-point inputs (%s)", sc_dtype_name(t));
    if (!sc_dtype_is_float(t) && c->in[1].desc.dtype == t && int_has_zero(&c->in[1]))
        return cpu_errorf(c, "integer modulo by zero (divisor input has a zero element)");
    return binary_run(c, fmod_ ? fmod_fns : pymod_fns);
}

/* Max/Min: out = op(in0, in1), then out = op(out, in_k) in place for the remaining inputs. */
static sc_status variadic_run(const sc_kernel_call *c, const cpu_bcast_row_fn *table) {
    sc_dtype t = c->in[0].desc.dtype;
    for (int k = 1; k < c->n_in; k++)
        if (c->in[k].desc.dtype != t)
            return cpu_errorf(c, "input %d has dtype %s, input 0 has %s", k, sc_dtype_name(c->in[k].desc.dtype),
                              sc_dtype_name(t));
    cpu_bcast_row_fn fn = (unsigned)t < SC_DTYPE_MAX ? table[t] : NULL;
    if (!fn) return cpu_errorf(c, "dtype %s not supported", sc_dtype_name(t));
    if (c->n_in == 1) return bcast2(c, fn, &c->in[0], &c->in[0], &c->out[0]); /* max(x, x) = x */
    SC_TRY(bcast2(c, fn, &c->in[0], &c->in[1], &c->out[0]));
    for (int k = 2; k < c->n_in; k++) SC_TRY(bcast2(c, fn, &c->out[0], &c->in[k], &c->out[0]));
    return SC_OK;
}

sc_status cpu_max(const sc_kernel_call *c) { return variadic_run(c, max_fns); }
sc_status cpu_min(const sc_kernel_call *c) { return variadic_run(c, min_fns); }

/* A scalar exponent equal to 2 (x**2 in exported LayerNorm / GELU graphs) becomes a multiply. */
static bool exponent_is_two(const sc_tensor *e) {
    if (sc_desc_numel(&e->desc) != 1) return false;
    double v;
    if (!cpu_convert(&v, SC_F64, e->data, e->desc.dtype, 1)) return false;
    return v == 2.0;
}

sc_status cpu_pow(const sc_kernel_call *c) {
    const sc_tensor *base = &c->in[0], *ex = &c->in[1];
    sc_dtype bt = base->desc.dtype, et = ex->desc.dtype;
    cpu_bcast_row_fn fn;
    sc_dtype want; /* the exponent type the row function reads */
    switch (bt) {
    case SC_F32: fn = exponent_is_two(ex) ? square_f32 : pow_f32; want = SC_F32; break;
    case SC_F64: fn = exponent_is_two(ex) ? square_f64 : pow_f64; want = SC_F64; break;
    case SC_I32: fn = pow_i32; want = SC_F64; break;
    case SC_I64: fn = pow_i64; want = SC_F64; break;
    default: return cpu_errorf(c, "base dtype %s not supported", sc_dtype_name(bt));
    }
    if (et == SC_BOOL || et == SC_STRING || sc_dtype_size(et) == 0)
        return cpu_errorf(c, "exponent dtype %s not supported", sc_dtype_name(et));
    if (et == want) return bcast2(c, fn, base, ex, &c->out[0]);
    int64_t n = sc_desc_numel(&ex->desc);
    void *tmp = malloc((size_t)(n ? n : 1) * sc_dtype_size(want));
    if (!tmp) return cpu_errorf(c, "out of memory converting the exponent");
    cpu_convert(tmp, want, ex->data, et, n);
    sc_tensor conv = {ex->desc, tmp};
    conv.desc.dtype = want;
    sc_status st = bcast2(c, fn, base, &conv, &c->out[0]);
    free(tmp);
    return st;
}

/* Where(cond, X, Y): a three-input row function copying elements of X's size. */
#define WHERE_ROW(NAME, T)                                                                         \
    static void NAME(const void *ctx, void *o_, const void *const *in, const int64_t *s, int64_t n) { \
        (void)ctx;                                                                                 \
        T *o = o_;                                                                                 \
        const uint8_t *cnd = in[0];                                                                \
        const T *x = in[1], *y = in[2];                                                            \
        int64_t sc = s[0], sx = s[1], sy = s[2];                                                   \
        if (sc && sx && sy) {                                                                      \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) o[i] = cnd[i] ? x[i] : y[i];       \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++) o[i] = cnd[i * sc] ? x[i * sx] : y[i * sy];            \
        }                                                                                          \
    }
CPU_BY_SIZE(WHERE_ROW, where)

sc_status cpu_where(const sc_kernel_call *c) {
    const sc_tensor *cnd = &c->in[0], *x = &c->in[1], *y = &c->in[2];
    if (cnd->desc.dtype != SC_BOOL)
        return cpu_errorf(c, "condition must be bool, got %s", sc_dtype_name(cnd->desc.dtype));
    if (x->desc.dtype != y->desc.dtype)
        return cpu_errorf(c, "X and Y dtypes differ (%s and %s)", sc_dtype_name(x->desc.dtype),
                          sc_dtype_name(y->desc.dtype));
    size_t es = sc_dtype_size(x->desc.dtype);
    cpu_bcast_row_fn fn = CPU_BY_SIZE_PICK(where, es);
    if (!fn) return cpu_errorf(c, "dtype %s not supported", sc_dtype_name(x->desc.dtype));
    const sc_desc *d[3] = {&cnd->desc, &x->desc, &y->desc};
    cpu_bcast bc;
    if (!cpu_bcast_init(&bc, &c->out[0].desc, d, 3)) return shapes_errorf(c, 3);
    const void *p[3] = {cnd->data, x->data, y->data};
    size_t ies[3] = {1, es, es};
    cpu_bcast_run(&bc, fn, NULL, c->out[0].data, es, p, ies);
    return SC_OK;
}
