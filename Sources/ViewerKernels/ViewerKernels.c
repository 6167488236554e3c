#include "ViewerKernels.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>

void viewer_copy_rows_streaming(void *dst, size_t dst_pitch, const uint32_t *src, size_t src_stride,
                                size_t count, size_t rows) {
    for (size_t r = 0; r < rows; r++) {
        uint32_t *d = (uint32_t *)((uint8_t *)dst + r * dst_pitch);
        const uint32_t *s = src + r * src_stride;
        size_t i = 0;
        // Single pixels up to a 16-byte boundary of the destination (streaming stores need it).
        while (i < count && ((uintptr_t)(d + i) & 15) != 0) {
            d[i] = s[i];
            i++;
        }
        for (; i + 16 <= count; i += 16) {
            __m128i a = _mm_loadu_si128((const __m128i *)(s + i));
            __m128i b = _mm_loadu_si128((const __m128i *)(s + i + 4));
            __m128i c = _mm_loadu_si128((const __m128i *)(s + i + 8));
            __m128i e = _mm_loadu_si128((const __m128i *)(s + i + 12));
            _mm_stream_si128((__m128i *)(d + i), a);
            _mm_stream_si128((__m128i *)(d + i + 4), b);
            _mm_stream_si128((__m128i *)(d + i + 8), c);
            _mm_stream_si128((__m128i *)(d + i + 12), e);
        }
        for (; i + 4 <= count; i += 4) {
            _mm_stream_si128((__m128i *)(d + i), _mm_loadu_si128((const __m128i *)(s + i)));
        }
        for (; i < count; i++) d[i] = s[i];
    }
    _mm_sfence();
}

#else

void viewer_copy_rows_streaming(void *dst, size_t dst_pitch, const uint32_t *src, size_t src_stride,
                                size_t count, size_t rows) {
    for (size_t r = 0; r < rows; r++) {
        memcpy((uint8_t *)dst + r * dst_pitch, src + r * src_stride, count * 4);
    }
}

#endif
