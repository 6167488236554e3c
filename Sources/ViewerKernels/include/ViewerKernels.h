// The viewer's one copy loop that Swift cannot express: rows into the window's shared-memory
// surface with streaming (non-temporal) stores. The surface is read next by the display server,
// in another process, not by us: ordinary stores would first fetch every destination line into
// this core's cache (and take it back from the server's), which is most of what the copy costs.
#ifndef VIEWER_KERNELS_H
#define VIEWER_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Copies `rows` rows of `count` 32-bit pixels from `src` (rows `src_stride` pixels apart) to
/// `dst` (rows `dst_pitch` bytes apart), storing around the cache where the CPU can, and
/// fencing before it returns so the stores are visible to whoever reads `dst` next.
void viewer_copy_rows_streaming(void *dst, size_t dst_pitch, const uint32_t *src, size_t src_stride,
                                size_t count, size_t rows);

#ifdef __cplusplus
}
#endif

#endif
