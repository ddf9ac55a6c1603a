/* codec.c - gradient compression codecs: see codec.h.
 *
 * The 2-bit and 1-bit loops work on whole words (16 or 32 elements) with no
 * branch per element, so that the compiler vectorises them; they are built
 * for AVX2 and for the baseline ISA, picked at load time (target_clones). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "kvs.h"
#include "reduce/codec.h"
#include "reduce/reduce.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CODEC_X86 1
#endif

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static void putf(uint8_t *p, float v) { memcpy(p, &v, 4); }
static float getf(const uint8_t *p) { float v; memcpy(&v, p, 4); return v; }

const char *red_codec_name(int id)
{
    static const char *const names[] = {"none", "2bit", "1bit", "topk", "fp16"};
    return id >= 0 && id <= RED_CODEC_MAX ? names[id] : "?";
}

/* ---- specs ---- */

/* One "name=value" setting of word w (len bytes) as a float in (lo, hi]. */
static int parse_setting(const char *w, size_t len, const char *name, double lo, double hi,
                         float *out, char *why, size_t whylen)
{
    size_t nl = strlen(name);
    char buf[64], *end;
    if (len <= nl + 1 || strncmp(w, name, nl) != 0 || w[nl] != '=' || len >= sizeof buf)
        return err_why(why, whylen, KVS_EINVAL, "gradient compression: '%.*s': expected %s=X",
                       (int)len, w, name);
    memcpy(buf, w + nl + 1, len - nl - 1);
    buf[len - nl - 1] = '\0';
    double v = strtod(buf, &end);
    if (*end != '\0' || !isfinite(v) || v <= lo || v > hi || (float)v <= (float)lo)
        return err_why(why, whylen, KVS_EINVAL, "gradient compression: %s='%s': expected a "
                       "number in (%g, %g]", name, buf, lo, hi);
    *out = (float)v;
    return 0;
}

int red_codec_parse(const char *spec, red_codec *out, char *why, size_t whylen)
{
    red_codec c = {RED_CODEC_NONE, 0, 0};
    const char *p = spec ? spec : "";
    int nword = 0;
    bool have_param = false, have_pull = false;
    while (*p) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p)
            break;
        const char *w = p;
        while (*p && *p != ' ' && *p != '\t')
            p++;
        size_t len = (size_t)(p - w);
        if (nword++ == 0) {
            int id = -1;
            for (int i = 0; i <= RED_CODEC_MAX; i++)
                if (strlen(red_codec_name(i)) == len && strncmp(w, red_codec_name(i), len) == 0)
                    id = i;
            if (id < 0)
                return err_why(why, whylen, KVS_EINVAL, "gradient compression: unknown type "
                               "'%.*s' (expected none, 2bit, 1bit, topk or fp16)", (int)len, w);
            c.id = id;
            c.pull = id != RED_CODEC_NONE; /* replies compressed unless pull=0 */
            if (id == RED_CODEC_2BIT)
                c.param = 0.5f; /* MXNet's default threshold */
            continue;
        }
        if (c.id != RED_CODEC_NONE && !have_pull && len > 5 && strncmp(w, "pull=", 5) == 0) {
            if (len != 6 || (w[5] != '0' && w[5] != '1'))
                return err_why(why, whylen, KVS_EINVAL, "gradient compression: '%.*s': "
                               "expected pull=0 (replies in float32) or pull=1 (replies "
                               "compressed too)", (int)len, w);
            c.pull = w[5] == '1';
            have_pull = true;
            continue;
        }
        if (have_param || (c.id != RED_CODEC_2BIT && c.id != RED_CODEC_TOPK))
            return err_why(why, whylen, KVS_EINVAL, "gradient compression: '%.*s': %s takes "
                           "%s", (int)len, w, red_codec_name(c.id),
                           c.id == RED_CODEC_2BIT   ? "threshold=T and pull=0|1, once each"
                           : c.id == RED_CODEC_TOPK ? "ratio=R and pull=0|1, once each"
                           : c.id == RED_CODEC_NONE ? "no settings"
                                                    : "one setting, pull=0|1");
        int rc = c.id == RED_CODEC_2BIT
                     ? parse_setting(w, len, "threshold", 0, 3.4e38, &c.param, why, whylen)
                     : parse_setting(w, len, "ratio", 0, 1, &c.param, why, whylen);
        if (rc)
            return rc;
        have_param = true;
    }
    if (c.id == RED_CODEC_TOPK && !have_param)
        return err_why(why, whylen, KVS_EINVAL, "gradient compression: topk needs ratio=R "
                       "(a fraction in (0, 1])");
    *out = c;
    return 0;
}

void red_codec_spec(const red_codec *c, char *buf, size_t len)
{
    const char *pull = c->id != RED_CODEC_NONE && !c->pull ? " pull=0" : "";
    if (c->id == RED_CODEC_2BIT)
        snprintf(buf, len, "2bit threshold=%.9g%s", (double)c->param, pull);
    else if (c->id == RED_CODEC_TOPK)
        snprintf(buf, len, "topk ratio=%.9g%s", (double)c->param, pull);
    else
        snprintf(buf, len, "%s%s", red_codec_name(c->id), pull);
}

int red_codec_has_residual(const red_codec *c)
{
    return c->id == RED_CODEC_2BIT || c->id == RED_CODEC_1BIT || c->id == RED_CODEC_TOPK;
}

uint64_t red_codec_topk_k(float ratio, uint64_t n)
{
    if (n == 0)
        return 0;
    /* the float ratio is the nearest to a decimal one (0.1f is 0.1000000015):
     * a product within float precision above an integer is that integer */
    double k = ceil((double)ratio * (double)n * (1.0 - 0x1p-23));
    if (k < 1)
        return 1;
    return k >= (double)n ? n : (uint64_t)k;
}

uint64_t red_codec_bytes(const red_codec *c, uint64_t n)
{
    switch (c->id) {
    case RED_CODEC_2BIT: return 4 + 4 * ((n + 15) / 16);
    case RED_CODEC_1BIT: return 4 + 4 * ((n + 31) / 32);
    case RED_CODEC_TOPK: return 8 + 8 * red_codec_topk_k(c->param, n);
    case RED_CODEC_FP16: return 2 * n;
    default: return 4 * n;
    }
}

/* ---- 2 bits ---- */

/* The shift of element j (0..15) of a word: byte j/4, bits from the top. */
#define SHIFT2(j) (8 * ((j) / 4) + 6 - 2 * ((j) % 4))

/* One word of up to 16 elements (cnt); the rest of the word stays 0. */
/* dec (NULL: none) gets the decoded values; it may be g itself. */
static inline uint32_t enc2_word(const float *g, float *r, unsigned cnt, float t, float *dec)
{
    uint32_t w = 0;
    for (unsigned j = 0; j < cnt; j++) {
        float v = r[j] + g[j];
        uint32_t pos = v >= t, neg = v <= -t;
        float sub = pos ? t : neg ? -t : 0.0f;
        r[j] = pos | neg ? v - sub : v;
        w |= (pos ? 3u : neg ? 2u : 0u) << SHIFT2(j);
        if (dec)
            dec[j] = sub; /* what dec2_word writes for the code */
    }
    return w;
}

static void enc2(const float *g, float *r, uint64_t n, float t, uint32_t *words, float *dec)
{
    uint64_t nw = n / 16;
    for (uint64_t i = 0; i < nw; i++)
        words[i] = enc2_word(g + 16 * i, r + 16 * i, 16, t, dec ? dec + 16 * i : NULL);
    if (n % 16)
        words[nw] = enc2_word(g + 16 * nw, r + 16 * nw, (unsigned)(n % 16), t,
                              dec ? dec + 16 * nw : NULL);
}

static inline void dec2_word(uint32_t w, float *dst, unsigned cnt, float t)
{
    for (unsigned j = 0; j < cnt; j++) {
        uint32_t code = (w >> SHIFT2(j)) & 3u;
        dst[j] = code == 3u ? t : code == 2u ? -t : 0.0f;
    }
}

static void dec2(const uint8_t *body, float *dst, uint64_t n, float t)
{
    uint64_t nw = n / 16;
    for (uint64_t i = 0; i < nw; i++)
        dec2_word(get32(body + 4 * i), dst + 16 * i, 16, t);
    if (n % 16)
        dec2_word(get32(body + 4 * nw), dst + 16 * nw, (unsigned)(n % 16), t);
}

/* The words of a 2-bit body of n elements hold only codes 00, 10 and 11,
 * and 00 past element n in the last word?  (Encoders write nothing else: a
 * 01 or a set bit past the end says the body is not what it claims.) */
static bool codes2_ok(const uint8_t *body, uint64_t n)
{
    uint64_t nw = (n + 15) / 16;
    uint32_t bad = 0;
    for (uint64_t i = 0; i < nw; i++) {
        uint32_t w = get32(body + 4 * i);
        bad |= w & ~(w >> 1) & 0x55555555u; /* 01: low bit set, high clear */
    }
    if (n % 16) {
        uint32_t used = 0;
        for (unsigned j = 0; j < n % 16; j++)
            used |= 3u << SHIFT2(j);
        bad |= get32(body + 4 * (nw - 1)) & ~used;
    }
    return bad == 0;
}

/* The last word of a 1-bit body of n elements has no bit set past n. */
static bool codes1_ok(const uint8_t *body, uint64_t n)
{
    return n % 32 == 0 || (get32(body + 4 * (n / 32)) >> (n % 32)) == 0;
}

/* ---- 1 bit: scaled sign, scale = mean |residual + gradient| ---- */

static float add_abs_mean(const float *g, float *r, uint64_t n)
{
    double s = 0;
    for (uint64_t i = 0; i < n; i++) {
        r[i] += g[i];
        s += fabsf(r[i]);
    }
    return n ? (float)(s / (double)n) : 0.0f;
}

static inline uint32_t enc1_word(float *r, unsigned cnt, float s, float *dec)
{
    uint32_t w = 0;
    for (unsigned j = 0; j < cnt; j++) {
        uint32_t neg = r[j] < 0.0f;
        r[j] -= neg ? -s : s;
        w |= neg << j;
        if (dec)
            dec[j] = neg ? -s : s; /* what dec1_word writes for the bit */
    }
    return w;
}

static void enc1(float *r, uint64_t n, float s, uint32_t *words, float *dec)
{
    uint64_t nw = n / 32;
    for (uint64_t i = 0; i < nw; i++)
        words[i] = enc1_word(r + 32 * i, 32, s, dec ? dec + 32 * i : NULL);
    if (n % 32)
        words[nw] = enc1_word(r + 32 * nw, (unsigned)(n % 32), s, dec ? dec + 32 * nw : NULL);
}

static inline void dec1_word(uint32_t w, float *dst, unsigned cnt, float s)
{
    for (unsigned j = 0; j < cnt; j++)
        dst[j] = (w >> j) & 1u ? -s : s;
}

static void dec1(const uint8_t *body, float *dst, uint64_t n, float s)
{
    uint64_t nw = n / 32;
    for (uint64_t i = 0; i < nw; i++)
        dec1_word(get32(body + 4 * i), dst + 32 * i, 32, s);
    if (n % 32)
        dec1_word(get32(body + 4 * nw), dst + 32 * nw, (unsigned)(n % 32), s);
}

/* ---- top-k ---- */

/* The k-th largest (1-based, 1 <= k <= n) of a[0..n), which holds no NaN
 * (reorders a): quickselect with a three-way partition. */
static float kth_largest(float *a, uint64_t n, uint64_t k)
{
    uint64_t lo = 0, hi = n, want = k - 1;
    for (;;) {
        if (hi - lo <= 1)
            return a[lo];
        float x = a[lo], y = a[lo + (hi - lo) / 2], z = a[hi - 1];
        float pv = (x > y) == (y > z) ? y : (x > y) == (x > z) ? z : x;
        uint64_t lt = lo, i = lo, gt = hi;
        while (i < gt) { /* [lo, lt) > pv, [lt, i) == pv, [gt, hi) < pv */
            float v = a[i];
            if (v > pv) {
                a[i++] = a[lt];
                a[lt++] = v;
            } else if (v < pv) {
                a[i] = a[--gt];
                a[gt] = v;
            } else {
                i++;
            }
        }
        if (want < lt)
            hi = lt;
        else if (want >= gt)
            lo = gt;
        else
            return pv;
    }
}

static int64_t enc_topk(const float *g, float *r, uint64_t n, float ratio, uint8_t *out,
                        float *scratch)
{
    uint64_t k = red_codec_topk_k(ratio, n), got = 0;
    putf(out, ratio);
    put32(out + 4, (uint32_t)k);
    if (n == 0)
        return 8;
    float *a = scratch ? scratch : malloc(n * sizeof *a);
    if (a == NULL)
        return -1;
    for (uint64_t i = 0; i < n; i++) {
        r[i] += g[i];
        a[i] = isnan(r[i]) ? -1.0f : fabsf(r[i]); /* NaNs last */
    }
    float thr = kth_largest(a, n, k);
    uint64_t above = 0;
    for (uint64_t i = 0; i < n; i++)
        above += fabsf(r[i]) > thr;
    uint64_t ties = k > above ? k - above : 0;
    uint8_t *idx = out + 8, *val = out + 8 + 4 * k;
    for (uint64_t i = 0; i < n && got < k; i++) {
        float m = fabsf(r[i]);
        if (m > thr || (m == thr && ties > 0)) {
            if (!(m > thr))
                ties--;
            put32(idx + 4 * got, (uint32_t)i);
            putf(val + 4 * got, r[i]);
            r[i] = 0.0f; /* all of it was sent */
            got++;
        }
    }
    if (got < k) /* NaNs took places: send them as they are to keep the size */
        for (uint64_t i = 0; i < n && got < k; i++)
            if (isnan(r[i])) {
                put32(idx + 4 * got, (uint32_t)i);
                putf(val + 4 * got, r[i]);
                r[i] = 0.0f;
                got++;
            }
    if (a != scratch)
        free(a);
    if (got < k) { /* still short (cannot happen): not a valid body */
        return -1;
    }
    /* indices were emitted in increasing order, except NaNs added last:
     * sort those pairs in (insertion sort; they are few) */
    for (uint64_t i = 1; i < k; i++) {
        uint32_t xi = get32(idx + 4 * i);
        float xv = getf(val + 4 * i);
        uint64_t j = i;
        while (j > 0 && get32(idx + 4 * (j - 1)) > xi) {
            put32(idx + 4 * j, get32(idx + 4 * (j - 1)));
            putf(val + 4 * j, getf(val + 4 * (j - 1)));
            j--;
        }
        put32(idx + 4 * j, xi);
        putf(val + 4 * j, xv);
    }
    return (int64_t)(8 + 8 * k);
}

/* ---- AVX2 (+F16C) kernels: the same results, element for element ---- */

#ifdef CODEC_X86
/* Lane j of an 8-lane mask -> its 2-bit slot's low bit in 16 bits of a
 * 2bit word: byte j/4, bit 6 - 2 * (j % 4). */
static const uint16_t spread8[256] = {
    0x0000, 0x0040, 0x0010, 0x0050, 0x0004, 0x0044, 0x0014, 0x0054,
    0x0001, 0x0041, 0x0011, 0x0051, 0x0005, 0x0045, 0x0015, 0x0055,
    0x4000, 0x4040, 0x4010, 0x4050, 0x4004, 0x4044, 0x4014, 0x4054,
    0x4001, 0x4041, 0x4011, 0x4051, 0x4005, 0x4045, 0x4015, 0x4055,
    0x1000, 0x1040, 0x1010, 0x1050, 0x1004, 0x1044, 0x1014, 0x1054,
    0x1001, 0x1041, 0x1011, 0x1051, 0x1005, 0x1045, 0x1015, 0x1055,
    0x5000, 0x5040, 0x5010, 0x5050, 0x5004, 0x5044, 0x5014, 0x5054,
    0x5001, 0x5041, 0x5011, 0x5051, 0x5005, 0x5045, 0x5015, 0x5055,
    0x0400, 0x0440, 0x0410, 0x0450, 0x0404, 0x0444, 0x0414, 0x0454,
    0x0401, 0x0441, 0x0411, 0x0451, 0x0405, 0x0445, 0x0415, 0x0455,
    0x4400, 0x4440, 0x4410, 0x4450, 0x4404, 0x4444, 0x4414, 0x4454,
    0x4401, 0x4441, 0x4411, 0x4451, 0x4405, 0x4445, 0x4415, 0x4455,
    0x1400, 0x1440, 0x1410, 0x1450, 0x1404, 0x1444, 0x1414, 0x1454,
    0x1401, 0x1441, 0x1411, 0x1451, 0x1405, 0x1445, 0x1415, 0x1455,
    0x5400, 0x5440, 0x5410, 0x5450, 0x5404, 0x5444, 0x5414, 0x5454,
    0x5401, 0x5441, 0x5411, 0x5451, 0x5405, 0x5445, 0x5415, 0x5455,
    0x0100, 0x0140, 0x0110, 0x0150, 0x0104, 0x0144, 0x0114, 0x0154,
    0x0101, 0x0141, 0x0111, 0x0151, 0x0105, 0x0145, 0x0115, 0x0155,
    0x4100, 0x4140, 0x4110, 0x4150, 0x4104, 0x4144, 0x4114, 0x4154,
    0x4101, 0x4141, 0x4111, 0x4151, 0x4105, 0x4145, 0x4115, 0x4155,
    0x1100, 0x1140, 0x1110, 0x1150, 0x1104, 0x1144, 0x1114, 0x1154,
    0x1101, 0x1141, 0x1111, 0x1151, 0x1105, 0x1145, 0x1115, 0x1155,
    0x5100, 0x5140, 0x5110, 0x5150, 0x5104, 0x5144, 0x5114, 0x5154,
    0x5101, 0x5141, 0x5111, 0x5151, 0x5105, 0x5145, 0x5115, 0x5155,
    0x0500, 0x0540, 0x0510, 0x0550, 0x0504, 0x0544, 0x0514, 0x0554,
    0x0501, 0x0541, 0x0511, 0x0551, 0x0505, 0x0545, 0x0515, 0x0555,
    0x4500, 0x4540, 0x4510, 0x4550, 0x4504, 0x4544, 0x4514, 0x4554,
    0x4501, 0x4541, 0x4511, 0x4551, 0x4505, 0x4545, 0x4515, 0x4555,
    0x1500, 0x1540, 0x1510, 0x1550, 0x1504, 0x1544, 0x1514, 0x1554,
    0x1501, 0x1541, 0x1511, 0x1551, 0x1505, 0x1545, 0x1515, 0x1555,
    0x5500, 0x5540, 0x5510, 0x5550, 0x5504, 0x5544, 0x5514, 0x5554,
    0x5501, 0x5541, 0x5511, 0x5551, 0x5505, 0x5545, 0x5515, 0x5555,
};

static inline uint32_t spread16(unsigned m)
{
    return (uint32_t)spread8[m & 0xffu] | (uint32_t)spread8[(m >> 8) & 0xffu] << 16;
}

__attribute__((target("avx2")))
static void enc2_avx2(const float *g, float *r, uint64_t nw, float t, uint32_t *words,
                      float *dec)
{
    const __m256 tp = _mm256_set1_ps(t), tn = _mm256_set1_ps(-t);
    for (uint64_t i = 0; i < nw; i++) {
        unsigned pm = 0, am = 0;
        for (int h = 0; h < 2; h++) {
            float *rp = r + 16 * i + 8 * h;
            __m256 v = _mm256_add_ps(_mm256_loadu_ps(rp), _mm256_loadu_ps(g + 16 * i + 8 * h));
            __m256 p = _mm256_cmp_ps(v, tp, _CMP_GE_OQ), n = _mm256_cmp_ps(v, tn, _CMP_LE_OQ);
            __m256 sub = _mm256_or_ps(_mm256_and_ps(p, tp), _mm256_and_ps(n, tn));
            _mm256_storeu_ps(rp, _mm256_sub_ps(v, sub));
            if (dec) /* after g's load: dec may be g */
                _mm256_storeu_ps(dec + 16 * i + 8 * h, sub);
            pm |= (unsigned)_mm256_movemask_ps(p) << (8 * h);
            am |= (unsigned)_mm256_movemask_ps(_mm256_or_ps(p, n)) << (8 * h);
        }
        words[i] = spread16(pm) | spread16(am) << 1; /* 11 = +t, 10 = -t */
    }
}

__attribute__((target("avx2")))
static void dec2_avx2(const uint8_t *body, float *dst, uint64_t nw, float t)
{
    const __m256 tp = _mm256_set1_ps(t), tn = _mm256_set1_ps(-t);
    const __m256i sh0 = _mm256_setr_epi32(SHIFT2(0), SHIFT2(1), SHIFT2(2), SHIFT2(3),
                                          SHIFT2(4), SHIFT2(5), SHIFT2(6), SHIFT2(7));
    const __m256i sh1 = _mm256_setr_epi32(SHIFT2(8), SHIFT2(9), SHIFT2(10), SHIFT2(11),
                                          SHIFT2(12), SHIFT2(13), SHIFT2(14), SHIFT2(15));
    const __m256i three = _mm256_set1_epi32(3), two = _mm256_set1_epi32(2);
    for (uint64_t i = 0; i < nw; i++) {
        __m256i w = _mm256_set1_epi32((int)get32(body + 4 * i));
        for (int h = 0; h < 2; h++) {
            __m256i c = _mm256_and_si256(_mm256_srlv_epi32(w, h ? sh1 : sh0), three);
            __m256 pos = _mm256_castsi256_ps(_mm256_cmpeq_epi32(c, three));
            __m256 neg = _mm256_castsi256_ps(_mm256_cmpeq_epi32(c, two));
            _mm256_storeu_ps(dst + 16 * i + 8 * h,
                             _mm256_or_ps(_mm256_and_ps(pos, tp), _mm256_and_ps(neg, tn)));
        }
    }
}

__attribute__((target("avx2")))
static float add_abs_mean_avx2(const float *g, float *r, uint64_t n)
{
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
                      _mm256_setzero_pd()};
    uint64_t i = 0;
    double s = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 v0 = _mm256_add_ps(_mm256_loadu_ps(r + i), _mm256_loadu_ps(g + i));
        __m256 v1 = _mm256_add_ps(_mm256_loadu_ps(r + i + 8), _mm256_loadu_ps(g + i + 8));
        _mm256_storeu_ps(r + i, v0);
        _mm256_storeu_ps(r + i + 8, v1);
        __m256 a0 = _mm256_and_ps(v0, absm), a1 = _mm256_and_ps(v1, absm);
        /* pairs summed in float (exact to 2^-24 relative), then in double */
        __m256 a = _mm256_add_ps(a0, a1);
        acc[0] = _mm256_add_pd(acc[0], _mm256_cvtps_pd(_mm256_castps256_ps128(a)));
        acc[1] = _mm256_add_pd(acc[1], _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)));
    }
    __m256d t = _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3]));
    double lanes[4];
    _mm256_storeu_pd(lanes, t);
    s = lanes[0] + lanes[1] + lanes[2] + lanes[3];
    for (; i < n; i++) {
        r[i] += g[i];
        s += fabsf(r[i]);
    }
    return n ? (float)(s / (double)n) : 0.0f;
}

__attribute__((target("avx2")))
static void enc1_avx2(float *r, uint64_t nw, float s, uint32_t *words, float *dec)
{
    const __m256 sp = _mm256_set1_ps(s), sn = _mm256_set1_ps(-s), z = _mm256_setzero_ps();
    for (uint64_t i = 0; i < nw; i++) {
        uint32_t w = 0;
        for (int q = 0; q < 4; q++) {
            float *rp = r + 32 * i + 8 * q;
            __m256 v = _mm256_loadu_ps(rp);
            __m256 neg = _mm256_cmp_ps(v, z, _CMP_LT_OQ);
            __m256 d = _mm256_blendv_ps(sp, sn, neg);
            _mm256_storeu_ps(rp, _mm256_sub_ps(v, d));
            if (dec)
                _mm256_storeu_ps(dec + 32 * i + 8 * q, d);
            w |= (uint32_t)_mm256_movemask_ps(neg) << (8 * q);
        }
        words[i] = w;
    }
}

__attribute__((target("avx2")))
static void dec1_avx2(const uint8_t *body, float *dst, uint64_t nw, float s)
{
    const __m256 sp = _mm256_set1_ps(s), sn = _mm256_set1_ps(-s);
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    for (uint64_t i = 0; i < nw; i++) {
        uint32_t w = get32(body + 4 * i);
        for (int q = 0; q < 4; q++) {
            __m256i b = _mm256_set1_epi32((int)((w >> (8 * q)) & 0xffu));
            __m256i on = _mm256_cmpeq_epi32(_mm256_and_si256(b, bit), bit);
            _mm256_storeu_ps(dst + 32 * i + 8 * q,
                             _mm256_blendv_ps(sp, sn, _mm256_castsi256_ps(on)));
        }
    }
}

__attribute__((target("avx2,f16c")))
static void to_f16_avx2(uint16_t *dst, const float *src, uint64_t n)
{
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    if (i < n)
        red_from_f32(KVS_FLOAT16, dst + i, src + i, n - i);
}

__attribute__((target("avx2,f16c")))
static void from_f16_avx2(float *dst, const uint16_t *src, uint64_t n)
{
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i,
                         _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(src + i))));
    if (i < n)
        red_to_f32(KVS_FLOAT16, dst + i, src + i, n - i);
}

static int portable_only;

static int have_avx2(void)
{
    static int v = -1;
    if (v < 0)
        v = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    return v && !portable_only;
}
#else
static int portable_only;
static int have_avx2(void) { return 0; }
#endif

int red_codec_portable(int on)
{
    portable_only = on;
    return have_avx2() ? 0 : 1;
}

/* ---- the codec interface ---- */

static int encode(const red_codec *c, const float *grad, float *residual, uint64_t n,
                  uint8_t *out, float *scratch, float *dec)
{
    float s;
    if (n > UINT32_MAX)
        return -1;
    switch (c->id) {
    case RED_CODEC_2BIT:
        putf(out, c->param);
        memset(out + 4, 0, 4 * ((n + 15) / 16));
#ifdef CODEC_X86
        if (have_avx2() && n >= 16) { /* whole words here, the last one below */
            uint64_t nw = n / 16;
            enc2_avx2(grad, residual, nw, c->param, (uint32_t *)(void *)(out + 4), dec);
            if (n % 16)
                enc2(grad + 16 * nw, residual + 16 * nw, n % 16, c->param,
                     (uint32_t *)(void *)(out + 4 + 4 * nw), dec ? dec + 16 * nw : NULL);
            return 0;
        }
#endif
        enc2(grad, residual, n, c->param, (uint32_t *)(void *)(out + 4), dec);
        return 0;
    case RED_CODEC_1BIT:
#ifdef CODEC_X86
        if (have_avx2()) {
            uint64_t nw = n / 32;
            s = add_abs_mean_avx2(grad, residual, n);
            putf(out, s);
            enc1_avx2(residual, nw, s, (uint32_t *)(void *)(out + 4), dec);
            if (n % 32)
                enc1(residual + 32 * nw, n % 32, s, (uint32_t *)(void *)(out + 4 + 4 * nw),
                     dec ? dec + 32 * nw : NULL);
            return 0;
        }
#endif
        s = add_abs_mean(grad, residual, n);
        putf(out, s);
        enc1(residual, n, s, (uint32_t *)(void *)(out + 4), dec);
        return 0;
    case RED_CODEC_TOPK:
        return enc_topk(grad, residual, n, c->param, out, scratch) < 0 ? -1 : 0;
    case RED_CODEC_FP16:
#ifdef CODEC_X86
        if (have_avx2()) {
            to_f16_avx2((uint16_t *)(void *)out, grad, n);
            return 0;
        }
#endif
        red_from_f32(KVS_FLOAT16, (uint16_t *)(void *)out, grad, n);
        return 0;
    default:
        memcpy(out, grad, 4 * n);
        return 0;
    }
}

int red_codec_encode(const red_codec *c, const float *grad, float *residual, uint64_t n,
                     uint8_t *out, float *scratch)
{
    return encode(c, grad, residual, n, out, scratch, NULL);
}

int red_codec_encode_decoded(const red_codec *c, const float *grad, float *residual,
                             uint64_t n, uint8_t *out, float *scratch, float *dec)
{
    float param;
    char why[200];
    if (c->id == RED_CODEC_2BIT || c->id == RED_CODEC_1BIT)
        return encode(c, grad, residual, n, out, scratch, dec);
    if (encode(c, grad, residual, n, out, scratch, NULL) != 0)
        return -1;
    if (c->id == RED_CODEC_NONE) {
        if (dec != grad)
            memmove(dec, grad, 4 * n);
        return 0;
    }
    return red_codec_decode(c->id, out, red_codec_bytes(c, n), dec, n, &param, why,
                            sizeof why) == 0 ? 0 : -1;
}

int red_codec_decode(int id, const uint8_t *body, uint64_t len, float *dst, uint64_t n,
                     float *param, char *why, size_t whylen)
{
    red_codec c = {id, 0, 0};
    uint64_t want;
    float p;
    *param = 0;
    if (id < RED_CODEC_2BIT || id > RED_CODEC_MAX)
        return err_why(why, whylen, KVS_EPROTO, "unknown gradient compression %d", id);
    if (n > UINT32_MAX)
        return err_why(why, whylen, KVS_EPROTO, "%s part of %llu elements (at most %u)",
                       red_codec_name(id), (unsigned long long)n, UINT32_MAX);
    if (id == RED_CODEC_TOPK) {
        if (len < 8)
            return err_why(why, whylen, KVS_EPROTO, "topk body of %llu bytes",
                           (unsigned long long)len);
        c.param = getf(body);
        if (!(c.param > 0.0f && c.param <= 1.0f))
            return err_why(why, whylen, KVS_EPROTO, "topk body with ratio %g",
                           (double)c.param);
    }
    want = red_codec_bytes(&c, n);
    if (len != want)
        return err_why(why, whylen, KVS_EPROTO, "%s body of %llu bytes for %llu elements "
                       "(expected %llu)", red_codec_name(id), (unsigned long long)len,
                       (unsigned long long)n, (unsigned long long)want);
    switch (id) {
    case RED_CODEC_2BIT:
        p = getf(body);
        if (!(p > 0.0f) || !isfinite(p))
            return err_why(why, whylen, KVS_EPROTO, "2bit body with threshold %g", (double)p);
        if (!codes2_ok(body + 4, n))
            return err_why(why, whylen, KVS_EPROTO, "2bit body with a code 01 or bits past "
                           "its %llu elements", (unsigned long long)n);
#ifdef CODEC_X86
        if (have_avx2()) {
            uint64_t nw = n / 16;
            dec2_avx2(body + 4, dst, nw, p);
            if (n % 16)
                dec2(body + 4 + 4 * nw, dst + 16 * nw, n % 16, p);
            *param = p;
            return 0;
        }
#endif
        dec2(body + 4, dst, n, p);
        *param = p;
        return 0;
    case RED_CODEC_1BIT:
        p = getf(body);
        if (!(p >= 0.0f) || !isfinite(p))
            return err_why(why, whylen, KVS_EPROTO, "1bit body with scale %g", (double)p);
        if (!codes1_ok(body + 4, n))
            return err_why(why, whylen, KVS_EPROTO, "1bit body with bits past its %llu "
                           "elements", (unsigned long long)n);
#ifdef CODEC_X86
        if (have_avx2()) {
            uint64_t nw = n / 32;
            dec1_avx2(body + 4, dst, nw, p);
            if (n % 32)
                dec1(body + 4 + 4 * nw, dst + 32 * nw, n % 32, p);
            return 0;
        }
#endif
        dec1(body + 4, dst, n, p);
        return 0;
    case RED_CODEC_TOPK: {
        uint64_t k = get32(body + 4);
        if (k != red_codec_topk_k(c.param, n))
            return err_why(why, whylen, KVS_EPROTO, "topk body of %llu values for %llu "
                           "elements at ratio %g", (unsigned long long)k,
                           (unsigned long long)n, (double)c.param);
        const uint8_t *idx = body + 8, *val = body + 8 + 4 * k;
        memset(dst, 0, 4 * n);
        for (uint64_t i = 0; i < k; i++) {
            uint32_t x = get32(idx + 4 * i);
            if (x >= n || (i > 0 && x <= get32(idx + 4 * (i - 1))))
                return err_why(why, whylen, KVS_EPROTO, "topk index %u at %llu: out of range "
                               "or not increasing", x, (unsigned long long)i);
            dst[x] = getf(val + 4 * i);
        }
        *param = c.param;
        return 0;
    }
    case RED_CODEC_FP16:
#ifdef CODEC_X86
        if (have_avx2()) {
            from_f16_avx2(dst, (const uint16_t *)(const void *)body, n);
            return 0;
        }
#endif
        red_to_f32(KVS_FLOAT16, dst, (const uint16_t *)(const void *)body, n);
        return 0;
    }
    return 0;
}
