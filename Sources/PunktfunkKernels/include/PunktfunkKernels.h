// The punktfunk data plane's SIMD inner loops: region arithmetic over GF(2^16) in the Leopard
// shard layout (each 64-byte block holds 32 field elements as 32 low bytes then 32 high bytes).
// Swift has no portable byte-shuffle, which is what makes table multiplication fast, so these
// few loops are C with AVX2 / SSSE3 (chosen at run time) and a portable fallback. Everything
// else about the code (tables, transforms, decoding) is Swift in Sources/Punktfunk/DataPlane.
#ifndef PUNKTFUNK_KERNELS_H
#define PUNKTFUNK_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Multiplication by one constant c, as nibble tables: lo[i][x] and hi[i][x] are the low and
/// high bytes of (x << 4i) * c, for the four nibbles i of a 16-bit element. 128 bytes.
typedef struct pk_gf16_lut {
    uint8_t lo[4][16];
    uint8_t hi[4][16];
} pk_gf16_lut;

/// Kernel levels: 0 portable, 1 SSSE3, 2 AVX2.
int pk_kernel_level_supported(void);
/// The level in use (the best supported one unless pk_kernel_set_level lowered it).
int pk_kernel_level(void);
/// Forces a level no higher than the supported one (tests compare every level); returns the level set.
int pk_kernel_set_level(int level);

/// x[0..<bytes] *= c. bytes is a multiple of 64.
void pk_gf16_mul(uint8_t *x, size_t bytes, const pk_gf16_lut *lut);
/// x[0..<bytes] ^= y * c. bytes is a multiple of 64; x and y do not overlap.
void pk_gf16_muladd(uint8_t *x, const uint8_t *y, size_t bytes, const pk_gf16_lut *lut);
/// x[0..<bytes] ^= y. bytes is a multiple of 64.
void pk_xor(uint8_t *x, const uint8_t *y, size_t bytes);
/// The FFT butterfly: x ^= y * c, then y ^= x.
void pk_gf16_fft_butterfly(uint8_t *x, uint8_t *y, size_t bytes, const pk_gf16_lut *lut);
/// The inverse-FFT butterfly: y ^= x, then x ^= y * c.
void pk_gf16_ifft_butterfly(uint8_t *x, uint8_t *y, size_t bytes, const pk_gf16_lut *lut);

#ifdef __cplusplus
}
#endif

#endif
