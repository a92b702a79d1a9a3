/* Einsum's equation and shape (graph/einsum.h). Letters are a-z and A-Z; an operand's letters match
 * its dims one to one; a letter repeated within one operand is its diagonal (dims of equal size, as
 * numpy asks; graph/pass_einsum.c takes it with a strided Slice) and, in the implicit form, is
 * summed like any letter used more than once. An ellipsis ('...') stands for the dims the letters
 * leave, numpy's way: the ellipses of all operands are aligned from the right and broadcast, and
 * become letters of their own before parsing (expand_ellipsis), so the lowering never sees one. A
 * letter's size is the same in every operand, or 1 there (numpy broadcasting, which MatMul's batch
 * dims give after lowering). */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "graph/einsum.h"
#include "graph/shape_fns.h"

static bool parse_fail(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool parse_fail(char *why, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return false;
}

/* One operand's (or the output's) letters from [s, e); false on anything but letters. */
static bool letters(const char *s, const char *e, char *dst) {
    int r = 0;
    for (const char *p = s; p < e; p++) {
        if (!isalpha((unsigned char)*p) || r >= SC_MAX_RANK) return false;
        dst[r++] = *p;
    }
    dst[r] = 0;
    return true;
}

/* Whether [s, e) holds an ellipsis. */
static bool has_dots(const char *s, const char *e) {
    for (const char *p = s; e - p >= 3; p++)
        if (!strncmp(p, "...", 3)) return true;
    return false;
}

/* Appends [s, e) to dst (size n) with its ellipsis replaced by the letters fresh[from, to); false
 * when it does not fit or has a second ellipsis. */
static bool put_part(char *dst, size_t n, const char *s, const char *e, const char *fresh, int from, int to) {
    size_t len = strlen(dst);
    bool dots = false;
    for (const char *p = s; p < e; p++) {
        if (e - p >= 3 && !strncmp(p, "...", 3)) {
            if (dots) return false;
            dots = true;
            for (int k = from; k < to && len + 1 < n; k++) dst[len++] = fresh[k];
            p += 2;
        } else if (len + 1 < n) {
            dst[len++] = *p;
        }
    }
    dst[len] = 0;
    return len + 1 < n;
}

/* eq with every ellipsis spelled as letters the equation does not use: operand k's covers its
 * rank less its letters, the last of the E = max over operands; the output's, all E (an explicit
 * output must have one when E > 0, as numpy requires); without an output, numpy's implicit one
 * (the ellipsis, then the letters used once in ASCII order). */
static bool expand_ellipsis(const char *eq, int n_in, const sc_desc *const *ins, char *dst, size_t dn, char *why,
                            size_t wn) {
    dst[0] = 0;
    if (!strstr(eq, "...")) return snprintf(dst, dn, "%s", eq) < (int)dn;
    bool used[128] = {false};
    int count[128] = {0}, e_k[SC_EINSUM_MAX_IN] = {0}, E = 0;
    for (const char *p = eq; *p; p++)
        if (isalpha((unsigned char)*p)) used[(unsigned char)*p] = true;
    const char *arrow = strstr(eq, "->"), *end = arrow ? arrow : eq + strlen(eq), *s = eq;
    for (int k = 0; k < n_in && k < SC_EINSUM_MAX_IN; k++) {
        const char *comma = memchr(s, ',', (size_t)(end - s)), *e = comma && k < n_in - 1 ? comma : end;
        int n_letters = 0;
        for (const char *p = s; p < e; p++)
            if (isalpha((unsigned char)*p)) n_letters++, count[(unsigned char)*p]++;
        bool dots = has_dots(s, e);
        e_k[k] = dots ? ins[k]->rank - n_letters : 0;
        if (e_k[k] < 0) return parse_fail(why, wn, "equation '%s': operand %d has rank %d, fewer than its letters", eq, k, ins[k]->rank);
        if (e_k[k] > E) E = e_k[k];
        s = e + 1;
    }
    char fresh[SC_MAX_RANK + 1];
    int nf = 0;
    for (int c = 'A'; c <= 'z' && nf < E; c++)
        if (isalpha(c) && !used[c]) fresh[nf++] = (char)c;
    if (nf < E) return parse_fail(why, wn, "equation '%s': no letters left for the ellipsis", eq);
    s = eq;
    for (int k = 0; k < n_in && k < SC_EINSUM_MAX_IN; k++) {
        const char *comma = memchr(s, ',', (size_t)(end - s)), *e = comma && k < n_in - 1 ? comma : end;
        if (k) strncat(dst, ",", dn - strlen(dst) - 1);
        if (!put_part(dst, dn, s, e, fresh, E - e_k[k], E))
            return parse_fail(why, wn, "equation '%s': operand %d has more than one ellipsis", eq, k);
        s = e + 1;
    }
    size_t len = strlen(dst);
    if (len + 3 >= dn) return parse_fail(why, wn, "equation '%s' is too long", eq);
    strcat(dst, "->");
    if (arrow) {
        if (E && !has_dots(arrow + 2, arrow + strlen(arrow)))
            return parse_fail(why, wn, "equation '%s': the ellipsis covers %d dims but the output has none (numpy "
                                       "refuses it too)", eq, E);
        if (!put_part(dst, dn, arrow + 2, arrow + strlen(arrow), fresh, 0, E))
            return parse_fail(why, wn, "equation '%s': the output has more than one ellipsis", eq);
        return true;
    }
    len = strlen(dst);
    for (int k = 0; k < E && len + 1 < dn; k++) dst[len++] = fresh[k];
    for (int c = 0; c < 128 && len + 1 < dn; c++)
        if (count[c] == 1) dst[len++] = (char)c;
    dst[len] = 0;
    return true;
}

bool sc_einsum_parse(const char *equation, int n_in, const sc_desc *const *ins, sc_einsum_spec *sp, char *why,
                     size_t wn) {
    memset(sp, 0, sizeof *sp);
    for (int c = 0; c < 128; c++) sp->size[c] = -1;
    char eq[256];
    if (!expand_ellipsis(equation, n_in, ins, eq, sizeof eq, why, wn)) {
        if (!why[0]) snprintf(why, wn, "equation '%s' is too long", equation);
        return false;
    }
    if (n_in < 1 || n_in > SC_EINSUM_MAX_IN) return parse_fail(why, wn, "equation '%s': %d operands (1 to 8 supported)", eq, n_in);
    const char *arrow = strstr(eq, "->"), *end = arrow ? arrow : eq + strlen(eq), *s = eq;
    int count[128] = {0};
    for (int k = 0; k < n_in; k++) {
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *e = k < n_in - 1 ? comma : end;
        if (!e || (k == n_in - 1 && comma)) return parse_fail(why, wn, "equation '%s' does not have %d operands", eq, n_in);
        if (!letters(s, e, sp->in[k])) return parse_fail(why, wn, "equation '%s': operand %d is not a list of letters", eq, k);
        int r = (int)strlen(sp->in[k]);
        if (r != ins[k]->rank)
            return parse_fail(why, wn, "equation '%s': operand %d has rank %d, the equation gives it %d letters", eq, k,
                              ins[k]->rank, r);
        for (int d = 0; d < r; d++) {
            unsigned char ch = (unsigned char)sp->in[k][d];
            int64_t n = ins[k]->dims[d];
            const char *first = memchr(sp->in[k], ch, (size_t)d); /* a diagonal: sizes agree as numpy asks */
            if (first && ins[k]->dims[first - sp->in[k]] != n)
                return parse_fail(why, wn, "equation '%s': letter '%c' repeats in operand %d over dims of sizes %lld and %lld "
                                           "(a diagonal needs equal sizes)", eq, ch, k,
                                  (long long)ins[k]->dims[first - sp->in[k]], (long long)n);
            if (sp->size[ch] < 0 || sp->size[ch] == 1) sp->size[ch] = n;
            else if (n != 1 && n != sp->size[ch])
                return parse_fail(why, wn, "equation '%s': operand %d disagrees with another on a letter's size", eq, k);
            count[ch]++;
        }
        s = e + 1;
    }
    if (arrow) {
        if (!letters(arrow + 2, arrow + strlen(arrow), sp->out)) return parse_fail(why, wn, "equation '%s': the output is not a list of letters", eq);
        for (const char *p = sp->out; *p; p++)
            if (sp->size[(unsigned char)*p] < 0 || strchr(p + 1, *p))
                return parse_fail(why, wn, "equation '%s': output letter %d is in no operand or repeats", eq, (int)(p - sp->out));
    } else {
        int r = 0;
        for (int c = 0; c < 128; c++)
            if (count[c] == 1 && r < SC_MAX_RANK) sp->out[r++] = (char)c;
        sp->out[r] = 0;
    }
    sp->n_in = n_in;
    return true;
}

sc_status shape_einsum(sc_graph *g, sc_node *n) {
    const sc_desc *ins[SC_EINSUM_MAX_IN];
    for (int k = 0; k < n->n_in && k < SC_EINSUM_MAX_IN; k++) ins[k] = shape_in(g, n, k);
    sc_einsum_spec sp;
    char why[256];
    if (!sc_einsum_parse(n->attrs->einsum.equation, n->n_in, ins, &sp, why, sizeof why)) return shape_fail(g, n, "%s", why);
    for (int k = 1; k < n->n_in; k++)
        if (ins[k]->dtype != ins[0]->dtype) return shape_fail(g, n, "operand %d has another type than operand 0", k);
    sc_desc out = *ins[0];
    out.rank = (int)strlen(sp.out);
    for (int d = 0; d < out.rank; d++) out.dims[d] = sp.size[(unsigned char)sp.out[d]];
    return shape_out(g, n, &out);
}
