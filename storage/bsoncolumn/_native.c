/* Native BSONColumn encoder for a fresh column of one fixed-size scalar type.
 *
 * A line-by-line port of the per-value path of the Python builder
 * (storage/bsoncolumn/encoding.py EncodingState.append, Encoder64 and
 * simple8b.py Simple8bBuilder) restricted to what a column of int32, int64, date or
 * double values without skips needs. The Python code is the reference: every check
 * happens in the same order so the bytes are identical. Any state the Python code
 * would treat as an error (an assertion, an index error) makes the encoder give up
 * (the module returns None and the caller uses the Python builder).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#define T_DOUBLE 0x01
#define T_OID 0x07
#define T_DATE 0x09
#define T_INT32 0x10
#define T_INT64 0x12

#define MEMORY_AS_INTEGER 5
#define RLE_SELECTOR 15
#define RLE_MULTIPLIER 120
#define MAX_RLE_COUNT 16
#define MAX_PENDING 64
#define MAX_DEPTH 200

/* ---- Simple-8b tables (see simple8b.py) ------------------------------------------ */

static const int TZ_BITS[4] = {0, 4, 4, 5};
static const int MIN_DATA_BITS[4] = {1, 2, 4, 4};
static const int MIN_SELECTOR[4] = {1, 1, 1, 8};
static const int MAX_SELECTOR[4] = {14, 9, 7, 13};
static const int INTS[4][16] = {
    {0, 60, 30, 20, 15, 12, 10, 8, 7, 6, 5, 4, 3, 2, 1, 0},
    {0, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0, 0, 0, 0},
    {0, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0},
    {0, 0, 0, 0, 0, 0, 0, 0, 6, 5, 4, 3, 2, 1, 0, 0},
};
static const int BITS[4][16] = {
    {64, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 20, 30, 60, 64},
    {64, 2, 3, 4, 5, 7, 10, 14, 24, 52, 64, 64, 64, 64, 64, 64},
    {64, 4, 5, 7, 10, 14, 24, 52, 0, 0, 64, 64, 64, 64, 64, 64},
    {64, 0, 0, 0, 0, 0, 0, 0, 4, 6, 9, 13, 23, 51, 64, 64},
};
static const uint8_t CONTROL_FOR_SCALE[6] = {0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0x80};
static const double SCALE_MULTIPLIER[5] = {1.0, 10.0, 100.0, 10000.0, 100000000.0};
static const double SAFE53 = 9007199254740992.0;

static int SEL_FOR_COUNT[4][61];

static void init_tables(void) {
    for (int ext = 0; ext < 4; ext++) {
        for (int n = 0; n <= 60; n++) {
            int sel = MAX_SELECTOR[ext];
            for (int idx = MIN_SELECTOR[ext]; idx < MAX_SELECTOR[ext]; idx++) {
                if (n >= INTS[ext][idx]) {
                    sel = idx;
                    break;
                }
            }
            SEL_FOR_COUNT[ext][n] = sel;
        }
    }
}

/* ---- numeric helpers (type_util.py) ---------------------------------------------- */

static inline uint64_t zigzag(uint64_t v) { return (v << 1) ^ (0 - (v >> 63)); }

static inline uint64_t unzigzag(uint64_t u) { return (u >> 1) ^ (0 - (u & 1)); }

static inline int bit_length(uint64_t x) { return x ? 64 - __builtin_clzll(x) : 0; }

static inline int count_bits(uint64_t v) { return bit_length(v + 1); }

static inline uint64_t double_bits(double x) {
    uint64_t u;
    memcpy(&u, &x, 8);
    return u;
}

static inline double bits_double(uint64_t u) {
    double x;
    memcpy(&x, &u, 8);
    return x;
}

/* encode_double: 1 and *out set when `val` is exactly representable at `scale`. */
static int encode_double(double val, int scale, uint64_t *out) {
    if (scale == MEMORY_AS_INTEGER) {
        *out = double_bits(val);
        return 1;
    }
    double mult = SCALE_MULTIPLIER[scale];
    double scaled = val * mult;
    if (!(scaled >= -SAFE53 && scaled <= SAFE53)) return 0; /* also NaN */
    int64_t n = (int64_t)scaled;                             /* truncates toward zero */
    double frac = scaled - (double)n;
    if (frac >= 0.5)
        n += 1;
    else if (frac <= -0.5)
        n -= 1;
    double back = (double)n / mult;
    if (back != val || (val == 0.0 && signbit(val))) return 0;
    *out = (uint64_t)n;
    return 1;
}

static double decode_double(uint64_t v, int scale) {
    if (scale == MEMORY_AS_INTEGER) return bits_double(v);
    return (double)(int64_t)v / SCALE_MULTIPLIER[scale];
}

static void scale_and_encode(double val, int min_scale, uint64_t *enc, int *scale) {
    for (int s = min_scale; s < MEMORY_AS_INTEGER; s++) {
        if (encode_double(val, s, enc)) {
            *scale = s;
            return;
        }
    }
    *enc = double_bits(val);
    *scale = MEMORY_AS_INTEGER;
}

/* ---- Simple-8b builder --------------------------------------------------------- */

typedef struct {
    uint64_t v;
    uint8_t b[4];  /* bits for base, seven, eight small, eight large (at most 65) */
    uint8_t tz[3]; /* trailing zeros stored for seven, eight small, eight large */
} Pend;

typedef void (*write_fn)(void *ctx, uint64_t block);

typedef struct {
    int64_t rle_count;
    uint64_t last;
    int curr_max[4];
    int last_valid_ext;
    int possible[4];
    int npend;
    int err;
    Pend pend[MAX_PENDING];
} S8b;

static void s8b_reset_possible(S8b *b) {
    b->possible[0] = b->possible[1] = b->possible[2] = b->possible[3] = 1;
}

static void s8b_init(S8b *b) {
    b->rle_count = 0;
    b->last = 0;
    for (int k = 0; k < 4; k++) b->curr_max[k] = MIN_DATA_BITS[k];
    b->last_valid_ext = 0;
    s8b_reset_possible(b);
    b->npend = 0;
    b->err = 0;
}

static void s8b_init_rle_from(S8b *b, const S8b *other) {
    if (other->npend == 0 || other->rle_count != 0) b->last = other->last;
}

static int pending_value(uint64_t v, Pend *p) {
    if (v == UINT64_MAX) return 0;
    int tz = v ? __builtin_ctzll(v) : 0;
    int bits = count_bits(v);
    int t7 = tz < 15 ? tz : 15;
    int m7 = bits - t7;
    int t8s = (tz < 60 ? tz : 60) & ~3;
    int m8s = bits - t8s;
    int t8l = tz & ~3; /* min(tz, 124): tz < 64 */
    int m8l = bits - t8l;
    if (tz == 15)
        m7 = count_bits(v >> tz);
    else if (tz == 60)
        m8s = count_bits(v >> tz);
    if (bits > 60 && m7 + 4 > 56 && m8s + 4 > 56 && m8l + 5 > 56) return 0;
    p->v = v;
    p->b[0] = (uint8_t)bits;
    p->b[1] = (uint8_t)m7;
    p->b[2] = (uint8_t)m8s;
    p->b[3] = (uint8_t)m8l;
    p->tz[0] = (uint8_t)t7;
    p->tz[1] = (uint8_t)t8s;
    p->tz[2] = (uint8_t)t8l;
    return 1;
}

static int s8b_fits(S8b *b, const Pend *p) {
    int n = b->npend + 1;
    int *cm = b->curr_max;
    if (b->possible[0]) {
        if ((cm[0] > p->b[0] ? cm[0] : p->b[0]) * n <= 60) {
            b->last_valid_ext = 0;
            return 1;
        }
        b->possible[0] = 0;
    }
    if (b->possible[1]) {
        if (((cm[1] > p->b[1] ? cm[1] : p->b[1]) + 4) * n <= 56) {
            b->last_valid_ext = 1;
            return 1;
        }
        b->possible[1] = 0;
    }
    if (b->possible[2]) {
        if (((cm[2] > p->b[2] ? cm[2] : p->b[2]) + 4) * n <= 56) {
            b->last_valid_ext = 2;
            return 1;
        }
        b->possible[2] = 0;
    }
    if (b->possible[3]) {
        if (((cm[3] > p->b[3] ? cm[3] : p->b[3]) + 5) * n <= 56) {
            b->last_valid_ext = 3;
            return 1;
        }
        b->possible[3] = 0;
    }
    return 0;
}

static void s8b_push(S8b *b, const Pend *p) {
    if (b->npend >= MAX_PENDING) {
        b->err = 1;
        return;
    }
    b->pend[b->npend++] = *p;
    for (int k = 0; k < 4; k++)
        if (p->b[k] > b->curr_max[k]) b->curr_max[k] = p->b[k];
}

static uint64_t s8b_encode_largest(S8b *b, int ext) {
    int n = b->npend;
    int idx = SEL_FOR_COUNT[ext][n < 60 ? n : 60];
    int ints = INTS[ext][idx];
    if (n == 0 || ints > n) {
        b->err = 1;
        b->npend = 0;
        return 0;
    }
    int base_sel = ext == 0 ? idx : (ext == 1 ? 7 : 8);
    int shift = 4 + ((base_sel == 7 || base_sel == 8) ? 4 : 0);
    int width = BITS[ext][idx] + TZ_BITS[ext];
    uint64_t word = (uint64_t)base_sel | (ext != 0 ? ((uint64_t)idx << 4) : 0);
    for (int i = 0; i < ints; i++) {
        const Pend *p = &b->pend[i];
        uint64_t slot;
        if (ext == 0) {
            slot = p->v;
        } else if (ext == 1) {
            int tz = p->tz[0];
            slot = (uint64_t)tz | ((p->v >> tz) << 4);
        } else {
            int nib = p->tz[ext - 1] >> 2; /* eight small: t8s, eight large: t8l */
            slot = (uint64_t)nib | ((p->v >> (nib << 2)) << TZ_BITS[ext]);
        }
        word |= slot << shift;
        shift += width;
    }
    memmove(b->pend, b->pend + ints, (size_t)(n - ints) * sizeof(Pend));
    b->npend = n - ints;
    for (int k = 0; k < 4; k++) b->curr_max[k] = MIN_DATA_BITS[k];
    for (int i = 0; i < b->npend; i++)
        for (int k = 0; k < 4; k++)
            if (b->pend[i].b[k] > b->curr_max[k]) b->curr_max[k] = b->pend[i].b[k];
    s8b_reset_possible(b);
    return word;
}

static int s8b_append_pending(S8b *b, const Pend *p, int try_rle, write_fn w, void *ctx) {
    if (s8b_fits(b, p)) {
        s8b_push(b, p);
        return 1;
    }
    if (b->npend == 0) {
        b->err = 1;
        return 1;
    }
    uint64_t last_pending = b->pend[b->npend - 1].v;
    for (;;) {
        if (b->npend == 0 || b->err) {
            b->err = 1;
            return 1;
        }
        w(ctx, s8b_encode_largest(b, b->last_valid_ext));
        if (s8b_fits(b, p)) break;
    }
    if (try_rle && b->npend == 0 && last_pending == p->v) {
        b->rle_count = 1;
        b->last = last_pending;
        b->last_valid_ext = 0;
        s8b_reset_possible(b);
    } else {
        s8b_push(b, p);
    }
    return 1;
}

static int s8b_append_value(S8b *b, uint64_t v, int try_rle, write_fn w, void *ctx) {
    Pend p;
    if (!pending_value(v, &p)) return 0;
    return s8b_append_pending(b, &p, try_rle, w, ctx);
}

static void s8b_rle_terminate(S8b *b, write_fn w, void *ctx) {
    int64_t count = b->rle_count / RLE_MULTIPLIER;
    if (count >= 1) {
        while (count > MAX_RLE_COUNT) {
            w(ctx, RLE_SELECTOR | ((uint64_t)(MAX_RLE_COUNT - 1) << 4));
            b->rle_count -= RLE_MULTIPLIER * MAX_RLE_COUNT;
            count -= MAX_RLE_COUNT;
        }
        w(ctx, RLE_SELECTOR | ((uint64_t)(count - 1) << 4));
        b->rle_count -= RLE_MULTIPLIER * count;
    }
    while (b->rle_count > 0 && !b->err) {
        s8b_append_value(b, b->last, 0, w, ctx);
        b->rle_count -= 1;
    }
    b->last = 0;
    if (b->npend == 0) {
        b->last_valid_ext = 0;
        s8b_reset_possible(b);
    }
}

static int s8b_append(S8b *b, uint64_t v, write_fn w, void *ctx) {
    if (b->npend == 0 || b->rle_count) {
        if (b->last == v) {
            b->rle_count += 1;
            b->last_valid_ext = 0;
            s8b_reset_possible(b);
            return 1;
        }
        s8b_rle_terminate(b, w, ctx);
    }
    return s8b_append_value(b, v, 1, w, ctx);
}

static void s8b_flush(S8b *b, write_fn w, void *ctx) {
    s8b_rle_terminate(b, w, ctx);
    if (b->npend) {
        while (b->npend && !b->err) w(ctx, s8b_encode_largest(b, b->last_valid_ext));
        b->rle_count = 0;
    }
}

/* Sum of the pending values as deltas (an ongoing RLE run included). */
static uint64_t s8b_pending_sum(const S8b *b) {
    uint64_t sum = (uint64_t)b->rle_count * unzigzag(b->last);
    for (int i = 0; i < b->npend; i++) sum += unzigzag(b->pend[i].v);
    return sum;
}

/* The k-th pending value (0 <= k < rle_count + npend). */
static inline uint64_t s8b_pending_at(const S8b *b, int64_t k) {
    return k < b->rle_count ? b->last : b->pend[k - b->rle_count].v;
}

/* ---- output buffer and encoding state ------------------------------------------ */

typedef struct {
    uint8_t *data;
    size_t len, cap;
    int oom;
} Buf;

static int buf_reserve(Buf *buf, size_t extra) {
    if (buf->len + extra <= buf->cap) return 1;
    size_t cap = buf->cap ? buf->cap : 64;
    while (cap < buf->len + extra) cap *= 2;
    uint8_t *d = PyMem_RawRealloc(buf->data, cap);
    if (!d) {
        buf->oom = 1;
        return 0;
    }
    buf->data = d;
    buf->cap = cap;
    return 1;
}

static void buf_put(Buf *buf, const void *src, size_t n) {
    if (!buf_reserve(buf, n)) return;
    memcpy(buf->data + buf->len, src, n);
    buf->len += n;
}

static void buf_byte(Buf *buf, uint8_t c) { buf_put(buf, &c, 1); }

typedef struct {
    Buf buf;
    Py_ssize_t ctrl; /* offset of the control byte being filled, -1 for none */
    int ptype;
    int size;
    uint8_t pvalue[12];
    int wtype;
    int err;
    int depth;
    /* Encoder64 */
    S8b s8b;
    uint64_t prev_delta;
    uint64_t prev_encoded;
    double last_in_prev_block;
    int scale;
} State;

/* The double just before the pending values (walking back from the last appended). */
static double value_before_pending(const State *st) {
    return decode_double(st->prev_encoded - s8b_pending_sum(&st->s8b), st->scale);
}

static void increment_count(State *st, int scale) {
    uint8_t control = CONTROL_FOR_SCALE[scale];
    Buf *buf = &st->buf;
    int count;
    if (st->ctrl < 0) {
        if (!buf_reserve(buf, 1)) return;
        st->ctrl = (Py_ssize_t)buf->len;
        buf->data[buf->len++] = 0;
        count = 0;
    } else {
        uint8_t byte = buf->data[st->ctrl];
        if ((byte & 0xF0) != control) {
            st->ctrl = -1;
            increment_count(st, scale);
            return;
        }
        count = (byte & 0x0F) + 1;
    }
    buf->data[st->ctrl] = (uint8_t)(control | count);
    if (count + 1 == 16) st->ctrl = -1;
}

static void write_block(void *ctx, uint64_t block) {
    State *st = ctx;
    increment_count(st, st->scale);
    if (st->buf.oom) return;
    uint8_t raw[8];
    for (int k = 0; k < 8; k++) raw[k] = (uint8_t)(block >> (8 * k));
    buf_put(&st->buf, raw, 8);
    if (st->wtype == T_DOUBLE) st->last_in_prev_block = value_before_pending(st);
}

/* type_util.encode_object_id: | C2 | TS3 | C1 | TS2 | C0 | TS1 | TS0 | from the low byte up
 * (the 5 process-unique bytes 4..8 are left out: a change there makes a literal). */
static inline uint64_t encode_object_id(const uint8_t *o) {
    return (uint64_t)o[11] | ((uint64_t)o[3] << 8) | ((uint64_t)o[10] << 16) |
           ((uint64_t)o[2] << 24) | ((uint64_t)o[9] << 32) | ((uint64_t)o[1] << 40) |
           ((uint64_t)o[0] << 48);
}

static void write_nothing(void *ctx, uint64_t block) {
    (void)block;
    *(int *)ctx = 1;
}

static void init_from_previous(State *st) {
    s8b_init(&st->s8b);
    st->prev_delta = 0;
    st->prev_encoded = 0;
    st->last_in_prev_block = 0.0;
    st->scale = MEMORY_AS_INTEGER;
    if (st->ptype == T_DOUBLE) {
        double x;
        memcpy(&x, st->pvalue, 8);
        st->last_in_prev_block = x;
        scale_and_encode(x, 0, &st->prev_encoded, &st->scale);
    } else if (st->ptype == T_OID) {
        st->prev_encoded = encode_object_id(st->pvalue);
    }
}

static void write_literal(State *st) {
    buf_byte(&st->buf, (uint8_t)st->ptype);
    buf_byte(&st->buf, 0);
    buf_put(&st->buf, st->pvalue, (size_t)st->size);
    st->ctrl = -1;
    init_from_previous(st);
}

static int append_double(State *st, double value, double previous);

/* Re-scale the pending values to `new_scale` into `out`, if that writes no block. */
static int try_rescale_pending(State *st, uint64_t encoded, int new_scale, S8b *out) {
    uint64_t prev, prev_rescaled, rescaled;
    if (!encode_double(st->last_in_prev_block, st->scale, &prev)) {
        st->err = 1; /* an assertion in the Python code */
        return 0;
    }
    if (!encode_double(st->last_in_prev_block, new_scale, &prev_rescaled)) return 0;
    int wrote = 0;
    s8b_init(out);
    s8b_init_rle_from(out, &st->s8b);
    int64_t total = st->s8b.rle_count + st->s8b.npend;
    for (int64_t k = 0; k < total; k++) {
        prev += unzigzag(s8b_pending_at(&st->s8b, k));
        if (!encode_double(decode_double(prev, st->scale), new_scale, &rescaled)) return 0;
        if (!s8b_append(out, zigzag(rescaled - prev_rescaled), write_nothing, &wrote) || wrote)
            return 0;
        if (out->err) {
            st->err = 1;
            return 0;
        }
        prev_rescaled = rescaled;
    }
    if (!s8b_append(out, zigzag(encoded - prev_rescaled), write_nothing, &wrote) || wrote)
        return 0;
    if (out->err) {
        st->err = 1;
        return 0;
    }
    return 1;
}

/* A block was written: restart from the lowest scale and re-append what is pending. */
static void restart_after_block(State *st) {
    if (++st->depth > MAX_DEPTH) {
        st->err = 1;
        return;
    }
    int prev_scale = st->scale;
    scale_and_encode(st->last_in_prev_block, 0, &st->prev_encoded, &st->scale);
    S8b *old = PyMem_RawMalloc(sizeof(S8b));
    if (!old) {
        st->err = 1;
        return;
    }
    *old = st->s8b;
    s8b_init(&st->s8b);
    s8b_init_rle_from(&st->s8b, old);
    double prev = st->last_in_prev_block;
    uint64_t pe;
    if (!encode_double(prev, prev_scale, &pe)) {
        st->err = 1;
    } else {
        int64_t total = old->rle_count + old->npend;
        for (int64_t k = 0; k < total && !st->err && !st->s8b.err && !st->buf.oom; k++) {
            pe += unzigzag(s8b_pending_at(old, k));
            double val = decode_double(pe, prev_scale);
            append_double(st, val, prev);
            prev = val;
        }
    }
    PyMem_RawFree(old);
    st->depth--;
}

static int append_double(State *st, double value, double previous) {
    uint64_t encoded;
    int scale;
    scale_and_encode(value, st->scale, &encoded, &scale);
    if (scale != st->scale) {
        S8b *rescaled = PyMem_RawMalloc(sizeof(S8b));
        if (!rescaled) {
            st->err = 1;
            return 1;
        }
        int ok = try_rescale_pending(st, encoded, scale, rescaled);
        if (ok) st->s8b = *rescaled;
        PyMem_RawFree(rescaled);
        if (st->err) return 1;
        if (ok) {
            st->prev_encoded = encoded;
            st->scale = scale;
            return 1;
        }
        s8b_flush(&st->s8b, write_block, st);
        st->ctrl = -1;
        int prev_scale;
        scale_and_encode(previous, scale, &st->prev_encoded, &prev_scale);
        if (scale != prev_scale) {
            scale_and_encode(value, prev_scale, &encoded, &scale);
            scale_and_encode(previous, scale, &st->prev_encoded, &prev_scale);
        }
        st->scale = scale;
    }
    size_t before = st->buf.len;
    if (!s8b_append(&st->s8b, zigzag(encoded - st->prev_encoded), write_block, st)) return 0;
    if (st->buf.len == before) {
        st->prev_encoded = encoded;
        return 1;
    }
    restart_after_block(st);
    return 1;
}

static inline uint64_t load_int(const uint8_t *p, int size) {
    if (size == 4) {
        uint32_t u = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
                     ((uint32_t)p[3] << 24);
        return (uint64_t)(int64_t)(int32_t)u;
    }
    uint64_t u = 0;
    for (int k = 7; k >= 0; k--) u = (u << 8) | p[k];
    return u;
}

static int append_delta(State *st, const uint8_t *v) {
    if (st->ptype == T_OID) {
        /* Encoder64.append_delta: another process part cannot be a delta (a literal);
         * otherwise the delta of the delta of the encodings. */
        if (memcmp(v + 4, st->pvalue + 4, 5) != 0) return 0;
        uint64_t cur = encode_object_id(v);
        uint64_t current = cur - st->prev_encoded;
        st->prev_encoded = cur;
        uint64_t value = current - st->prev_delta;
        st->prev_delta = current;
        return s8b_append(&st->s8b, zigzag(value), write_block, st);
    }
    uint64_t cur = load_int(v, st->size), prev = load_int(st->pvalue, st->size);
    switch (st->ptype) {
        case T_INT32:
        case T_INT64:
            return s8b_append(&st->s8b, zigzag(cur - prev), write_block, st);
        case T_DATE: {
            uint64_t current = cur - prev;
            uint64_t value = current - st->prev_delta;
            st->prev_delta = current;
            return s8b_append(&st->s8b, zigzag(value), write_block, st);
        }
        default:
            return append_double(st, bits_double(cur), bits_double(prev));
    }
}

static void state_append(State *st, int t, const uint8_t *v) {
    if (t != st->ptype) {
        st->ptype = t;
        memcpy(st->pvalue, v, (size_t)st->size);
        st->wtype = t;
        s8b_flush(&st->s8b, write_block, st);
        write_literal(st);
        return;
    }
    st->wtype = t;
    int compressed;
    /* delta-of-delta types (date, ObjectId) have no shortcut for a repeated value */
    if (t != T_DATE && t != T_OID && memcmp(v, st->pvalue, (size_t)st->size) == 0) {
        s8b_append(&st->s8b, 0, write_block, st);
        compressed = 1;
    } else {
        compressed = append_delta(st, v);
    }
    memcpy(st->pvalue, v, (size_t)st->size);
    if (!compressed) {
        s8b_flush(&st->s8b, write_block, st);
        write_literal(st);
    }
}

/* ---- whole-stream operations ----------------------------------------------------- */

static int type_size(int t) {
    switch (t) {
        case T_INT32:
            return 4;
        case T_INT64:
        case T_DATE:
        case T_DOUBLE:
            return 8;
        case T_OID:
            return 12;
        default:
            return 0;
    }
}

static inline int state_failed(const State *st) {
    return st->err || st->s8b.err || st->buf.oom;
}

/* A fresh stream for values of type `t` (nothing appended yet: EOO). */
static void state_init(State *st, int t) {
    memset(st, 0, sizeof(*st));
    st->ctrl = -1;
    st->size = type_size(t);
    init_from_previous(st);
}

/* Append n values: 1 on success, 0 when the encoder gave up. */
static int state_extend(State *st, int t, const uint8_t *values, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        state_append(st, t, values + i * st->size);
        if (state_failed(st)) return 0;
    }
    return 1;
}

/* Flush what is pending and end the column (st->buf then holds it): 1 on success. */
static int state_finish(State *st) {
    st->wtype = st->ptype;
    s8b_flush(&st->s8b, write_block, st);
    buf_byte(&st->buf, 0);
    return !state_failed(st);
}

/* A state to go back to. Output only grows at the end of the buffer, except for the
 * control byte being filled, so the buffer length and that byte are enough. */
typedef struct {
    State st;
    uint8_t ctrl_byte;
} Snap;

static void snap_take(Snap *snap, const State *st) {
    snap->st = *st;
    snap->ctrl_byte = st->ctrl >= 0 ? st->buf.data[st->ctrl] : 0;
}

static void snap_restore(State *st, const Snap *snap) {
    Buf buf = st->buf; /* the buffer may have moved since */
    *st = snap->st;
    st->buf.data = buf.data;
    st->buf.cap = buf.cap;
    st->buf.oom = 0;
    if (st->ctrl >= 0) st->buf.data[st->ctrl] = snap->ctrl_byte;
}

/* ---- module ------------------------------------------------------------------- */

static PyObject *Declined; /* _native.Declined */

static PyObject *encode_uniform(PyObject *self, PyObject *args) {
    int t;
    Py_buffer view;
    (void)self;
    if (!PyArg_ParseTuple(args, "iy*:encode_uniform", &t, &view)) return NULL;
    int size = type_size(t);
    if (!size) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    if (view.len == 0 || view.len % size != 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError,
                        "values must be a non-empty concatenation of fixed-size values");
        return NULL;
    }
    State *st = PyMem_RawMalloc(sizeof(State));
    if (!st) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    int ok;
    Py_BEGIN_ALLOW_THREADS
    state_init(st, t);
    ok = state_extend(st, t, (const uint8_t *)view.buf, view.len / size) && state_finish(st);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyObject *result;
    if (st->buf.oom) {
        result = PyErr_NoMemory();
    } else if (!ok) {
        result = Py_NewRef(Py_None);
    } else {
        result = PyBytes_FromStringAndSize((const char *)st->buf.data, (Py_ssize_t)st->buf.len);
    }
    PyMem_RawFree(st->buf.data);
    PyMem_RawFree(st);
    return result;
}

/* ---- UniformBuilder ------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    int type;
    Py_ssize_t count;
    State *st;  /* the encoder, its output buffer holding the column so far */
    Buf values; /* every value appended, concatenated */
} Builder;

static PyTypeObject BuilderType;

static void builder_dealloc(Builder *self) {
    if (self->st) {
        PyMem_RawFree(self->st->buf.data);
        PyMem_RawFree(self->st);
    }
    PyMem_RawFree(self->values.data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Append `len` bytes of values: 0, or -1 with an exception and the builder unchanged. */
static int builder_append(Builder *self, const uint8_t *data, Py_ssize_t len) {
    State *st = self->st;
    int size = st->size;
    if (len % size != 0) {
        PyErr_Format(PyExc_ValueError, "values must be a concatenation of %d-byte values", size);
        return -1;
    }
    if (len == 0) return 0;
    if (!buf_reserve(&self->values, (size_t)len)) {
        self->values.oom = 0;
        PyErr_NoMemory();
        return -1;
    }
    Snap snap;
    snap_take(&snap, st);
    if (!state_extend(st, self->type, data, len / size)) {
        int oom = st->buf.oom;
        snap_restore(st, &snap);
        if (oom)
            PyErr_NoMemory();
        else
            PyErr_SetString(Declined, "the native encoder cannot reproduce these values");
        return -1;
    }
    memcpy(self->values.data + self->values.len, data, (size_t)len);
    self->values.len += (size_t)len;
    self->count += len / size;
    return 0;
}

static PyObject *builder_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"type_byte", "values", NULL};
    int t;
    Py_buffer view = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "i|y*:UniformBuilder", kwlist, &t, &view))
        return NULL;
    if (!type_size(t)) {
        if (view.obj) PyBuffer_Release(&view);
        PyErr_Format(PyExc_ValueError, "UniformBuilder does not take BSON type %d", t);
        return NULL;
    }
    Builder *self = (Builder *)type->tp_alloc(type, 0);
    if (!self) {
        if (view.obj) PyBuffer_Release(&view);
        return NULL;
    }
    self->type = t;
    self->count = 0;
    memset(&self->values, 0, sizeof(Buf));
    self->st = PyMem_RawMalloc(sizeof(State));
    if (!self->st) {
        if (view.obj) PyBuffer_Release(&view);
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    state_init(self->st, t);
    if (view.obj) {
        int rc = builder_append(self, (const uint8_t *)view.buf, view.len);
        PyBuffer_Release(&view);
        if (rc < 0) {
            Py_DECREF(self);
            return NULL;
        }
    }
    return (PyObject *)self;
}

static PyObject *builder_extend(Builder *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    int rc = builder_append(self, (const uint8_t *)view.buf, view.len);
    PyBuffer_Release(&view);
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *builder_finalize(Builder *self, PyObject *unused) {
    (void)unused;
    State *st = self->st;
    Snap snap;
    snap_take(&snap, st);
    PyObject *result;
    if (state_finish(st)) {
        result = PyBytes_FromStringAndSize((const char *)st->buf.data, (Py_ssize_t)st->buf.len);
    } else if (st->buf.oom) {
        result = PyErr_NoMemory();
    } else {
        PyErr_SetString(Declined, "the native encoder cannot finish this column");
        result = NULL;
    }
    snap_restore(st, &snap);
    return result;
}

static PyObject *builder_values(Builder *self, PyObject *unused) {
    (void)unused;
    return PyBytes_FromStringAndSize((const char *)self->values.data,
                                     (Py_ssize_t)self->values.len);
}

static int buf_copy(Buf *dst, const Buf *src) {
    memset(dst, 0, sizeof(Buf));
    if (!src->len) return 1;
    if (!buf_reserve(dst, src->len)) return 0;
    memcpy(dst->data, src->data, src->len);
    dst->len = src->len;
    return 1;
}

static PyObject *builder_copy(Builder *self, PyObject *unused) {
    (void)unused;
    Builder *c = (Builder *)BuilderType.tp_alloc(&BuilderType, 0);
    if (!c) return NULL;
    c->type = self->type;
    c->count = self->count;
    memset(&c->values, 0, sizeof(Buf));
    c->st = PyMem_RawMalloc(sizeof(State));
    if (!c->st) {
        Py_DECREF(c);
        return PyErr_NoMemory();
    }
    *c->st = *self->st;
    if (!buf_copy(&c->st->buf, &self->st->buf) || !buf_copy(&c->values, &self->values)) {
        Py_DECREF(c);
        return PyErr_NoMemory();
    }
    return (PyObject *)c;
}

static PyObject *builder_sizeof(Builder *self, PyObject *unused) {
    (void)unused;
    size_t n = sizeof(Builder) + sizeof(State) + self->st->buf.cap + self->values.cap;
    return PyLong_FromSize_t(n);
}

static Py_ssize_t builder_len(Builder *self) { return self->count; }

static PyObject *builder_get_type(Builder *self, void *closure) {
    (void)closure;
    return PyLong_FromLong(self->type);
}

static PyObject *builder_get_count(Builder *self, void *closure) {
    (void)closure;
    return PyLong_FromSsize_t(self->count);
}

static PyMethodDef builder_methods[] = {
    {"extend", (PyCFunction)builder_extend, METH_O,
     "extend(values) -> None\n\n"
     "Append n values given as their concatenated little-endian bytes. Raises Declined\n"
     "(builder unchanged) when the encoder cannot reproduce the Python builder."},
    {"finalize", (PyCFunction)builder_finalize, METH_NOARGS,
     "finalize() -> bytes\n\n"
     "The column of the values appended so far (ending in 0x00); the builder stays\n"
     "usable. Raises Declined (builder unchanged) if the encoder gives up."},
    {"values", (PyCFunction)builder_values, METH_NOARGS,
     "values() -> bytes\n\nEvery value appended so far, concatenated."},
    {"copy", (PyCFunction)builder_copy, METH_NOARGS,
     "copy() -> UniformBuilder\n\nAn independent builder in the same state."},
    {"__sizeof__", (PyCFunction)builder_sizeof, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef builder_getset[] = {
    {"type_byte", (getter)builder_get_type, NULL, "BSON type of the values.", NULL},
    {"count", (getter)builder_get_count, NULL, "Number of values appended.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods builder_as_sequence = {
    .sq_length = (lenfunc)builder_len,
};

static PyTypeObject BuilderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "storage.bsoncolumn._native.UniformBuilder",
    .tp_basicsize = sizeof(Builder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "UniformBuilder(type_byte, values=b'')\n\n"
              "Incremental BSONColumn builder for values of one fixed-size type (int32,\n"
              "int64, date, double, ObjectId) without skipped rows.",
    .tp_new = builder_new,
    .tp_dealloc = (destructor)builder_dealloc,
    .tp_methods = builder_methods,
    .tp_getset = builder_getset,
    .tp_as_sequence = &builder_as_sequence,
};

/* ---- decoder of uniform columns ------------------------------------------------- */
/*
 * decode_uniform: a port of the element decoder (storage/bsoncolumn/decoder.py
 * _Stream, simple8b.py decode_block) for columns whose rows all hold one type among
 * int64, int32, date and double, without skipped rows and without interleaved
 * sections. Anything else (and any malformed input) gives None: the Python decoder
 * then produces the result or raises the proper error. Two passes: the first checks
 * the structure and every length and counts the rows, the second decodes into an
 * exactly sized buffer.
 */

typedef struct {
    uint8_t kind; /* 0 invalid selector, 1 values, 2 RLE */
    uint8_t n, width, shift, cbits, mult;
    uint64_t mask, cmask;
} DecInfo;

static DecInfo DEC_INFO[256];

static void init_dec_tables(void) {
    static const int ext7[16] = {0, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1};
    static const int ext8[16] = {0, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, -1, -1};
    static const int mults[4] = {0, 1, 4, 4};
    for (int low = 0; low < 256; low++) {
        DecInfo *d = &DEC_INFO[low];
        memset(d, 0, sizeof *d);
        int selector = low & 0xF, nibble = low >> 4, ext = 0, ext_bits = 0;
        if (selector == 0) continue;
        if (selector == RLE_SELECTOR) {
            d->kind = 2;
            continue;
        }
        if (selector == 7 || selector == 8) {
            int e = selector == 7 ? ext7[nibble] : ext8[nibble];
            if (e < 0) continue;
            ext = e;
            if (ext != 0) selector = nibble;
            ext_bits = 4;
        }
        int cbits = TZ_BITS[ext];
        int width = BITS[ext][selector] + cbits;
        int shift = 4 + ext_bits;
        if (width <= 0 || width >= 64) continue; /* not a layout the tables define */
        int n = 0, s = shift;
        do {
            n++;
            s += width;
        } while (s + width <= 64);
        d->kind = 1;
        d->n = (uint8_t)n;
        d->width = (uint8_t)width;
        d->shift = (uint8_t)shift;
        d->cbits = (uint8_t)cbits;
        d->mult = (uint8_t)mults[ext];
        d->mask = ((uint64_t)1 << width) - 1;
        d->cmask = ((uint64_t)1 << cbits) - 1;
    }
}

static const uint8_t DEC_SCALE_FOR_NIBBLE[16] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                                 0xFF, 0xFF, 5,    0,    1,    2,
                                                 3,    4,    0xFF, 0xFF};

static inline uint64_t load_u64(const uint8_t *p) {
    uint64_t u;
    memcpy(&u, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    u = __builtin_bswap64(u);
#endif
    return u;
}

static inline void store_u64(uint8_t *p, uint64_t u) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    u = __builtin_bswap64(u);
#endif
    memcpy(p, &u, 8);
}

static inline int dec_is_literal(uint8_t c) { return (c & 0xE0) == 0 || c == 0x7F || c == 0xFF; }

static inline int dec_value_size(uint8_t t) {
    switch (t) {
        case T_INT64:
        case T_DATE:
        case T_DOUBLE:
            return 8;
        case T_INT32:
            return 4;
        default:
            return 0;
    }
}

/* Pass 1: 1 with *type and *count set when the column has the supported shape. */
static int dec_scan(const uint8_t *d, Py_ssize_t end, Py_ssize_t max_values, int *type,
                    Py_ssize_t *count) {
    Py_ssize_t pos = 0, total = 0;
    int t = 0;
    for (;;) {
        if (pos >= end) return 0;
        uint8_t c = d[pos];
        if (c == 0) {
            if (pos + 1 != end) return 0;
            break;
        }
        if (dec_is_literal(c)) {
            int size = dec_value_size(c);
            if (!size || (t && c != t)) return 0;
            t = c;
            if (pos + 1 >= end || d[pos + 1] != 0) return 0;
            Py_ssize_t vs = pos + 2;
            if (vs + size > end - 1) return 0; /* the final EOO must follow */
            total += 1;
            pos = vs + size;
        } else {
            uint8_t scale = DEC_SCALE_FOR_NIBBLE[c >> 4];
            if (scale == 0xFF || !t) return 0; /* interleaved/invalid, or no value yet */
            if (scale != MEMORY_AS_INTEGER && t != T_DOUBLE) return 0;
            Py_ssize_t nb = (c & 0x0F) + 1;
            if (pos + 8 * nb + 1 >= end) return 0;
            const uint8_t *p = d + pos + 1;
            for (Py_ssize_t k = 0; k < nb; k++) {
                uint64_t block = load_u64(p + 8 * k);
                const DecInfo *info = &DEC_INFO[block & 0xFF];
                if (info->kind == 0) return 0;
                total += info->kind == 2 ? (Py_ssize_t)(((block >> 4) & 0xF) + 1) * RLE_MULTIPLIER
                                         : info->n;
            }
            pos += 8 * nb + 1;
        }
        if (total > max_values) return 0;
    }
    if (!t || total == 0) return 0;
    *type = t;
    *count = total;
    return 1;
}

typedef struct {
    int t;
    int scale;
    uint64_t enc;     /* running value (dates: running delta) */
    uint64_t dod_enc; /* dates: running value */
    double last;      /* doubles: last value */
    uint8_t *out;
    Py_ssize_t n;
} DecState;

static inline void dec_emit(DecState *s, uint64_t zz) {
    uint64_t delta = unzigzag(zz), v;
    s->enc += delta;
    switch (s->t) {
        case T_INT32:
            v = (uint64_t)(int64_t)(int32_t)(uint32_t)s->enc;
            break;
        case T_DATE:
            s->dod_enc += s->enc;
            v = s->dod_enc;
            break;
        case T_DOUBLE:
            s->last = decode_double(s->enc, s->scale);
            v = double_bits(s->last);
            break;
        default:
            v = s->enc;
    }
    store_u64(s->out + 8 * s->n, v);
    s->n++;
}

/* Pass 2: 1 when every row decoded (no skips, every double control re-encodes). */
static int dec_fill(const uint8_t *d, Py_ssize_t end, DecState *s, Py_ssize_t count) {
    Py_ssize_t pos = 0;
    uint64_t prev = 0; /* what an RLE block repeats (skips never get here) */
    while (pos < end && d[pos] != 0) {
        uint8_t c = d[pos];
        if (dec_is_literal(c)) {
            const uint8_t *v = d + pos + 2;
            uint64_t raw = load_int(v, dec_value_size(c));
            if (s->n >= count) return 0;
            store_u64(s->out + 8 * s->n, raw);
            s->n++;
            s->scale = MEMORY_AS_INTEGER;
            prev = 0;
            if (c == T_DATE) {
                s->dod_enc = raw;
                s->enc = 0;
            } else if (c == T_DOUBLE) {
                s->last = bits_double(raw);
                s->enc = 0;
            } else {
                s->enc = raw;
            }
            pos += 2 + dec_value_size(c);
            continue;
        }
        int scale = DEC_SCALE_FOR_NIBBLE[c >> 4];
        Py_ssize_t nb = (c & 0x0F) + 1;
        if (s->t == T_DOUBLE) {
            if (!encode_double(s->last, scale, &s->enc)) return 0;
        }
        s->scale = scale;
        const uint8_t *p = d + pos + 1;
        for (Py_ssize_t k = 0; k < nb; k++) {
            uint64_t block = load_u64(p + 8 * k);
            const DecInfo *info = &DEC_INFO[block & 0xFF];
            if (info->kind == 2) {
                Py_ssize_t reps = (Py_ssize_t)(((block >> 4) & 0xF) + 1) * RLE_MULTIPLIER;
                if (s->n + reps > count) return 0;
                for (Py_ssize_t r = 0; r < reps; r++) dec_emit(s, prev);
                continue;
            }
            if (s->n + info->n > count) return 0;
            int shift = info->shift;
            for (int i = 0; i < info->n; i++, shift += info->width) {
                uint64_t slot = (block >> shift) & info->mask;
                if (slot == info->mask) return 0; /* a skipped row */
                if (info->cbits) {
                    unsigned zeros = (unsigned)(((slot & info->cmask) * info->mult) & 63);
                    slot = (slot >> info->cbits) << zeros;
                }
                dec_emit(s, slot);
                prev = slot;
            }
        }
        pos += 8 * nb + 1;
    }
    return s->n == count;
}

static PyObject *decode_uniform(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t max_values = (Py_ssize_t)1 << 22;
    if (!PyArg_ParseTuple(args, "y*|n:decode_uniform", &buf, &max_values)) return NULL;
    const uint8_t *d = (const uint8_t *)buf.buf;
    Py_ssize_t end = buf.len;
    int t = 0;
    Py_ssize_t count = 0;
    if (!dec_scan(d, end, max_values, &t, &count)) {
        PyBuffer_Release(&buf);
        Py_RETURN_NONE;
    }
    PyObject *values = PyByteArray_FromStringAndSize(NULL, count * 8);
    if (!values) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    DecState s = {t, MEMORY_AS_INTEGER, 0, 0, 0.0, (uint8_t *)PyByteArray_AS_STRING(values), 0};
    int ok;
    if (count < 4096) {
        ok = dec_fill(d, end, &s, count);
    } else {
        Py_BEGIN_ALLOW_THREADS;
        ok = dec_fill(d, end, &s, count);
        Py_END_ALLOW_THREADS;
    }
    PyBuffer_Release(&buf);
    if (!ok) {
        Py_DECREF(values);
        Py_RETURN_NONE;
    }
    return Py_BuildValue("(iNn)", t, values, count);
}

/* ---- pack_values: decoded values of one field into builder input --------------- */

static PyObject *str_value;  /* "_value" (DatetimeMS) */
static PyObject *str_oid;    /* "_ObjectId__id" (ObjectId's 12 bytes) */

/* The int64 behind one decoded value of type t, or -1 with *ok = 0 (no exception left)
   when the value is not what the type needs. */
static int64_t value_int64(PyObject *v, int t, int *ok) {
    PyObject *num;
    if (t == 0x09) {
        num = PyObject_GetAttr(v, str_value);
        if (!num) {
            PyErr_Clear();
            *ok = 0;
            return 0;
        }
    } else {
        num = Py_NewRef(v);
    }
    int overflow = 0;
    long long x = 0;
    if (PyLong_Check(num)) {
        x = PyLong_AsLongLongAndOverflow(num, &overflow);
        if (x == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            *ok = 0;
        }
    } else {
        *ok = 0;
    }
    Py_DECREF(num);
    if (overflow || (t == 0x10 && (x < INT32_MIN || x > INT32_MAX))) *ok = 0;
    return (int64_t)x;
}

static PyObject *pack_values(PyObject *self, PyObject *args) {
    PyObject *docs, *name, *pytype;
    int t;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!UiO:pack_values", &PyList_Type, &docs, &name, &t, &pytype))
        return NULL;
    int size = type_size(t);
    Py_ssize_t n = PyList_GET_SIZE(docs);
    if (!size || n == 0) Py_RETURN_NONE;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * size);
    if (!out) return NULL;
    uint8_t *dst = (uint8_t *)PyBytes_AS_STRING(out);
    Py_ssize_t lo = 0, hi = 0;
    int64_t ilo = 0, ihi = 0;
    double dlo = 0, dhi = 0;
    const uint8_t *olo = NULL, *ohi = NULL;
    int nan = 0, ok = 1, seen = 0;
    for (Py_ssize_t i = 0; i < n && ok; i++) {
        PyObject *doc = PyList_GET_ITEM(docs, i);
        if (!PyDict_CheckExact(doc)) { ok = 0; break; }
        PyObject *v = PyDict_GetItemWithError(doc, name);  /* borrowed */
        if (!v) {
            if (PyErr_Occurred()) { Py_DECREF(out); return NULL; }
            ok = 0;
            break;
        }
        if ((PyObject *)Py_TYPE(v) != pytype) { ok = 0; break; }
        uint8_t *slot = dst + i * size;
        if (t == 0x01) {
            if (!PyFloat_CheckExact(v)) { ok = 0; break; }
            double d = PyFloat_AS_DOUBLE(v);
            uint64_t u;
            memcpy(&u, &d, 8);
            store_u64(slot, u);
            if (d != d) {
                nan = 1;
            } else {
                if (!seen || d < dlo) { dlo = d; lo = i; }
                if (!seen || d > dhi) { dhi = d; hi = i; }
                seen = 1;
            }
        } else if (t == 0x07) {
            PyObject *raw = PyObject_GetAttr(v, str_oid);
            if (!raw) { PyErr_Clear(); ok = 0; break; }
            if (!PyBytes_Check(raw) || PyBytes_GET_SIZE(raw) != 12) {
                Py_DECREF(raw);
                ok = 0;
                break;
            }
            memcpy(slot, PyBytes_AS_STRING(raw), 12);
            Py_DECREF(raw);
            if (i == 0 || memcmp(slot, olo, 12) < 0) { olo = slot; lo = i; }
            if (i == 0 || memcmp(slot, ohi, 12) > 0) { ohi = slot; hi = i; }
        } else {
            int64_t x = value_int64(v, t, &ok);
            if (!ok) break;
            if (t == 0x10) {
                uint32_t y = (uint32_t)(int32_t)x;
                slot[0] = (uint8_t)y;
                slot[1] = (uint8_t)(y >> 8);
                slot[2] = (uint8_t)(y >> 16);
                slot[3] = (uint8_t)(y >> 24);
            } else {
                store_u64(slot, (uint64_t)x);
            }
            if (i == 0 || x < ilo) { ilo = x; lo = i; }
            if (i == 0 || x > ihi) { ihi = x; hi = i; }
        }
    }
    if (!ok) {
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    if (nan) lo = hi = -1;  /* NaN orders below every number: the caller decides */
    return Py_BuildValue("(Nnn)", out, lo, hi);
}

static PyMethodDef methods[] = {
    {"encode_uniform", encode_uniform, METH_VARARGS,
     "encode_uniform(type_byte, values) -> bytes | None\n\n"
     "The finalized BSONColumn of n values of one type (int32, int64, date, double,\n"
     "ObjectId) given as their concatenated little-endian bytes; None for another type\n"
     "or when the encoder cannot reproduce the Python builder."},
    {"decode_uniform", decode_uniform, METH_VARARGS,
     "decode_uniform(column, max_values=2**22) -> (type_byte, values, count) | None\n\n"
     "Rows of a column holding only int64, int32, date or double values of one type\n"
     "without skips: the type, their little-endian 8-byte values in a bytearray (int32\n"
     "widened to int64; writable, so numpy arrays over it are too) and their number.\n"
     "None for any other column, or a malformed one."},
    {"pack_values", pack_values, METH_VARARGS,
     "pack_values(docs, name, type_byte, pytype) -> (values, lo, hi) | None\n\n"
     "The values of field `name` of every dict in `docs`, all exactly of Python type\n"
     "`pytype` (Int64, int as int32, float, DatetimeMS, ObjectId for type_byte 0x12,\n"
     "0x10, 0x01, 0x09, 0x07), packed as UniformBuilder.extend takes them, with the\n"
     "positions of the first smallest and first largest (-1, -1 when a double is NaN).\n"
     "None when a dict lacks the field or a value is not of that type or range."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native", "Native BSONColumn encoder for uniform columns.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) {
    init_tables();
    init_dec_tables();
    str_value = PyUnicode_InternFromString("_value");
    str_oid = PyUnicode_InternFromString("_ObjectId__id");
    if (!str_value || !str_oid) return NULL;
    if (PyType_Ready(&BuilderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Declined = PyErr_NewExceptionWithDoc(
        "storage.bsoncolumn._native.Declined",
        "The native encoder cannot reproduce the Python builder for these values.", NULL,
        NULL);
    if (!Declined || PyModule_AddObjectRef(m, "Declined", Declined) < 0 ||
        PyModule_AddObjectRef(m, "UniformBuilder", (PyObject *)&BuilderType) < 0) {
        Py_XDECREF(Declined);
        Declined = NULL;
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
