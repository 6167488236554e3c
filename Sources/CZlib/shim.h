#include <zlib.h>

// inflateInit/deflateInit are macros Swift cannot import; these wrap them.
static inline int czlib_inflate_init(z_streamp strm) {
    return inflateInit_(strm, ZLIB_VERSION, (int)sizeof(z_stream));
}
static inline int czlib_deflate_init(z_streamp strm, int level) {
    return deflateInit_(strm, level, ZLIB_VERSION, (int)sizeof(z_stream));
}
/// Raw inflate (no zlib header or adler-32 trailer): the caller strips the header itself, so
/// zlib need not checksum every byte.
static inline int czlib_inflate_init_raw(z_streamp strm) {
    return inflateInit2_(strm, -15, ZLIB_VERSION, (int)sizeof(z_stream));
}
