// GF(2^16) region kernels for Leopard-layout shards. See include/PunktfunkKernels.h.
#include "PunktfunkKernels.h"

#include <stdatomic.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#define PK_X86 1
#include <immintrin.h>
#endif

// ---------------------------------------------------------------------------------------------
// Portable: one element at a time through the nibble tables.

static inline void mul_block_portable(uint8_t *out, const uint8_t *in, const pk_gf16_lut *t, int accumulate) {
    for (int i = 0; i < 32; i++) {
        unsigned lo = in[i], hi = in[i + 32];
        uint8_t plo = t->lo[0][lo & 15] ^ t->lo[1][lo >> 4] ^ t->lo[2][hi & 15] ^ t->lo[3][hi >> 4];
        uint8_t phi = t->hi[0][lo & 15] ^ t->hi[1][lo >> 4] ^ t->hi[2][hi & 15] ^ t->hi[3][hi >> 4];
        if (accumulate) {
            out[i] ^= plo;
            out[i + 32] ^= phi;
        } else {
            out[i] = plo;
            out[i + 32] = phi;
        }
    }
}

static void mul_portable(uint8_t *x, size_t bytes, const pk_gf16_lut *t) {
    for (size_t o = 0; o < bytes; o += 64) mul_block_portable(x + o, x + o, t, 0);
}

static void muladd_portable(uint8_t *x, const uint8_t *y, size_t bytes, const pk_gf16_lut *t) {
    for (size_t o = 0; o < bytes; o += 64) mul_block_portable(x + o, y + o, t, 1);
}

static void xor_portable(uint8_t *x, const uint8_t *y, size_t bytes) {
    // 8 bytes at a time through memcpy, which compilers turn into plain loads and stores.
    size_t o = 0;
    for (; o + 8 <= bytes; o += 8) {
        uint64_t a, b;
        memcpy(&a, x + o, 8);
        memcpy(&b, y + o, 8);
        a ^= b;
        memcpy(x + o, &a, 8);
    }
    for (; o < bytes; o++) x[o] ^= y[o];
}

static void fft_portable(uint8_t *x, uint8_t *y, size_t bytes, const pk_gf16_lut *t) {
    for (size_t o = 0; o < bytes; o += 64) {
        mul_block_portable(x + o, y + o, t, 1);
        xor_portable(y + o, x + o, 64);
    }
}

static void ifft_portable(uint8_t *x, uint8_t *y, size_t bytes, const pk_gf16_lut *t) {
    for (size_t o = 0; o < bytes; o += 64) {
        xor_portable(y + o, x + o, 64);
        mul_block_portable(x + o, y + o, t, 1);
    }
}

#ifdef PK_X86
// ---------------------------------------------------------------------------------------------
// SSSE3: pshufb looks up 16 nibbles at once; a 64-byte block is two 16-element halves.

__attribute__((target("ssse3")))
static inline void prod_ssse3(__m128i lo, __m128i hi, const pk_gf16_lut *t, __m128i *plo, __m128i *phi) {
    const __m128i mask = _mm_set1_epi8(0x0f);
    __m128i n0 = _mm_and_si128(lo, mask);
    __m128i n1 = _mm_and_si128(_mm_srli_epi16(lo, 4), mask);
    __m128i n2 = _mm_and_si128(hi, mask);
    __m128i n3 = _mm_and_si128(_mm_srli_epi16(hi, 4), mask);
    const __m128i *tl = (const __m128i *)t->lo, *th = (const __m128i *)t->hi;
    __m128i l = _mm_shuffle_epi8(_mm_loadu_si128(tl + 0), n0);
    l = _mm_xor_si128(l, _mm_shuffle_epi8(_mm_loadu_si128(tl + 1), n1));
    l = _mm_xor_si128(l, _mm_shuffle_epi8(_mm_loadu_si128(tl + 2), n2));
    l = _mm_xor_si128(l, _mm_shuffle_epi8(_mm_loadu_si128(tl + 3), n3));
    __m128i h = _mm_shuffle_epi8(_mm_loadu_si128(th + 0), n0);
    h = _mm_xor_si128(h, _mm_shuffle_epi8(_mm_loadu_si128(th + 1), n1));
    h = _mm_xor_si128(h, _mm_shuffle_epi8(_mm_loadu_si128(th + 2), n2));
    h = _mm_xor_si128(h, _mm_shuffle_epi8(_mm_loadu_si128(th + 3), n3));
    *plo = l;
    *phi = h;
}

// mode 0: x = x*c; 1: x ^= y*c; 2: fft (x ^= y*c; y ^= x); 3: ifft (y ^= x; x ^= y*c)
__attribute__((target("ssse3")))
static void run_ssse3(uint8_t *x, uint8_t *y, size_t bytes, const pk_gf16_lut *t, int mode) {
    for (size_t o = 0; o < bytes; o += 64) {
        for (int half = 0; half < 2; half++) {
            uint8_t *xl = x + o + 16 * half, *xh = xl + 32;
            __m128i x_lo = _mm_loadu_si128((const __m128i *)xl), x_hi = _mm_loadu_si128((const __m128i *)xh);
            __m128i plo, phi;
            if (mode == 0) {
                prod_ssse3(x_lo, x_hi, t, &plo, &phi);
                _mm_storeu_si128((__m128i *)xl, plo);
                _mm_storeu_si128((__m128i *)xh, phi);
                continue;
            }
            uint8_t *yl = y + o + 16 * half, *yh = yl + 32;
            __m128i y_lo = _mm_loadu_si128((const __m128i *)yl), y_hi = _mm_loadu_si128((const __m128i *)yh);
            if (mode == 3) {
                y_lo = _mm_xor_si128(y_lo, x_lo);
                y_hi = _mm_xor_si128(y_hi, x_hi);
                _mm_storeu_si128((__m128i *)yl, y_lo);
                _mm_storeu_si128((__m128i *)yh, y_hi);
            }
            prod_ssse3(y_lo, y_hi, t, &plo, &phi);
            x_lo = _mm_xor_si128(x_lo, plo);
            x_hi = _mm_xor_si128(x_hi, phi);
            _mm_storeu_si128((__m128i *)xl, x_lo);
            _mm_storeu_si128((__m128i *)xh, x_hi);
            if (mode == 2) {
                _mm_storeu_si128((__m128i *)yl, _mm_xor_si128(y_lo, x_lo));
                _mm_storeu_si128((__m128i *)yh, _mm_xor_si128(y_hi, x_hi));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// AVX2: one 64-byte block is one register of low bytes and one of high bytes.

__attribute__((target("avx2")))
static inline void tables_avx2(const pk_gf16_lut *t, __m256i tl[4], __m256i th[4]) {
    for (int i = 0; i < 4; i++) {
        tl[i] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)t->lo[i]));
        th[i] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)t->hi[i]));
    }
}

__attribute__((target("avx2")))
static inline void prod_avx2(__m256i lo, __m256i hi, const __m256i tl[4], const __m256i th[4], __m256i *plo, __m256i *phi) {
    const __m256i mask = _mm256_set1_epi8(0x0f);
    __m256i n0 = _mm256_and_si256(lo, mask);
    __m256i n1 = _mm256_and_si256(_mm256_srli_epi16(lo, 4), mask);
    __m256i n2 = _mm256_and_si256(hi, mask);
    __m256i n3 = _mm256_and_si256(_mm256_srli_epi16(hi, 4), mask);
    __m256i l = _mm256_xor_si256(_mm256_shuffle_epi8(tl[0], n0), _mm256_shuffle_epi8(tl[1], n1));
    l = _mm256_xor_si256(l, _mm256_xor_si256(_mm256_shuffle_epi8(tl[2], n2), _mm256_shuffle_epi8(tl[3], n3)));
    __m256i h = _mm256_xor_si256(_mm256_shuffle_epi8(th[0], n0), _mm256_shuffle_epi8(th[1], n1));
    h = _mm256_xor_si256(h, _mm256_xor_si256(_mm256_shuffle_epi8(th[2], n2), _mm256_shuffle_epi8(th[3], n3)));
    *plo = l;
    *phi = h;
}

__attribute__((target("avx2")))
static void run_avx2(uint8_t *x, uint8_t *y, size_t bytes, const pk_gf16_lut *t, int mode) {
    __m256i tl[4], th[4];
    tables_avx2(t, tl, th);
    for (size_t o = 0; o < bytes; o += 64) {
        __m256i *xl = (__m256i *)(x + o), *xh = (__m256i *)(x + o + 32);
        __m256i x_lo = _mm256_loadu_si256(xl), x_hi = _mm256_loadu_si256(xh);
        __m256i plo, phi;
        if (mode == 0) {
            prod_avx2(x_lo, x_hi, tl, th, &plo, &phi);
            _mm256_storeu_si256(xl, plo);
            _mm256_storeu_si256(xh, phi);
            continue;
        }
        __m256i *yl = (__m256i *)(y + o), *yh = (__m256i *)(y + o + 32);
        __m256i y_lo = _mm256_loadu_si256(yl), y_hi = _mm256_loadu_si256(yh);
        if (mode == 3) {
            y_lo = _mm256_xor_si256(y_lo, x_lo);
            y_hi = _mm256_xor_si256(y_hi, x_hi);
            _mm256_storeu_si256(yl, y_lo);
            _mm256_storeu_si256(yh, y_hi);
        }
        prod_avx2(y_lo, y_hi, tl, th, &plo, &phi);
        x_lo = _mm256_xor_si256(x_lo, plo);
        x_hi = _mm256_xor_si256(x_hi, phi);
        _mm256_storeu_si256(xl, x_lo);
        _mm256_storeu_si256(xh, x_hi);
        if (mode == 2) {
            _mm256_storeu_si256(yl, _mm256_xor_si256(y_lo, x_lo));
            _mm256_storeu_si256(yh, _mm256_xor_si256(y_hi, x_hi));
        }
    }
}

__attribute__((target("avx2")))
static void xor_avx2(uint8_t *x, const uint8_t *y, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 32) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(x + o));
        __m256i b = _mm256_loadu_si256((const __m256i *)(y + o));
        _mm256_storeu_si256((__m256i *)(x + o), _mm256_xor_si256(a, b));
    }
}
#endif

// ---------------------------------------------------------------------------------------------
// Dispatch. The level is an atomic read (relaxed) on every call: detection or a test's
// pk_kernel_set_level stores a valid level, so any reader sees some valid level.

static int detect_level(void) {
#ifdef PK_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) return 2;
    if (__builtin_cpu_supports("ssse3")) return 1;
#endif
    return 0;
}

static _Atomic int current_level = -1;

int pk_kernel_level_supported(void) { return detect_level(); }

int pk_kernel_level(void) {
    int level = atomic_load_explicit(&current_level, memory_order_relaxed);
    if (level < 0) {
        level = detect_level();
        atomic_store_explicit(&current_level, level, memory_order_relaxed);
    }
    return level;
}

int pk_kernel_set_level(int level) {
    int supported = detect_level();
    if (level > supported) level = supported;
    if (level < 0) level = 0;
    atomic_store_explicit(&current_level, level, memory_order_relaxed);
    return level;
}

void pk_gf16_mul(uint8_t *x, size_t bytes, const pk_gf16_lut *lut) {
#ifdef PK_X86
    switch (pk_kernel_level()) {
    case 2: run_avx2(x, NULL, bytes, lut, 0); return;
    case 1: run_ssse3(x, NULL, bytes, lut, 0); return;
    default: break;
    }
#endif
    mul_portable(x, bytes, lut);
}

void pk_gf16_muladd(uint8_t *x, const uint8_t *y, size_t bytes, const pk_gf16_lut *lut) {
#ifdef PK_X86
    switch (pk_kernel_level()) {
    case 2: run_avx2(x, (uint8_t *)y, bytes, lut, 1); return;
    case 1: run_ssse3(x, (uint8_t *)y, bytes, lut, 1); return;
    default: break;
    }
#endif
    muladd_portable(x, y, bytes, lut);
}

void pk_xor(uint8_t *x, const uint8_t *y, size_t bytes) {
#ifdef PK_X86
    if (pk_kernel_level() == 2 && bytes % 32 == 0) {
        xor_avx2(x, y, bytes);
        return;
    }
#endif
    xor_portable(x, y, bytes);
}

void pk_gf16_fft_butterfly(uint8_t *x, uint8_t *y, size_t bytes, const pk_gf16_lut *lut) {
#ifdef PK_X86
    switch (pk_kernel_level()) {
    case 2: run_avx2(x, y, bytes, lut, 2); return;
    case 1: run_ssse3(x, y, bytes, lut, 2); return;
    default: break;
    }
#endif
    fft_portable(x, y, bytes, lut);
}

void pk_gf16_ifft_butterfly(uint8_t *x, uint8_t *y, size_t bytes, const pk_gf16_lut *lut) {
#ifdef PK_X86
    switch (pk_kernel_level()) {
    case 2: run_avx2(x, y, bytes, lut, 3); return;
    case 1: run_ssse3(x, y, bytes, lut, 3); return;
    default: break;
    }
#endif
    ifft_portable(x, y, bytes, lut);
}
