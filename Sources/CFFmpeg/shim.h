// FFmpeg's libavcodec and libavutil for punktfunk's video decoder (Debian: libavcodec-dev,
// libavutil-dev). Declarations only: nothing links the libraries; CFFmpegLoader opens them when
// the first decoder is made, so the commands that never decode video do not load them (and the
// codec libraries they pull in: dav1d, x265, VA-API, ...).
#pragma once
#include <errno.h>
#include <libavcodec/avcodec.h>
#include <libavutil/avutil.h>
#include <libavutil/error.h>
#include <libavutil/hwcontext.h>
#include <libavutil/log.h>
#include <libavutil/pixdesc.h>
#include <libavutil/pixfmt.h>

// Macros Swift cannot import.
static inline int cffmpeg_error_again(void) { return AVERROR(EAGAIN); }
static inline int cffmpeg_error_eof(void) { return AVERROR_EOF; }
static inline int cffmpeg_error_invalid_data(void) { return AVERROR_INVALIDDATA; }

/// The message for an FFmpeg error code, into `buffer`.
static inline const char *cffmpeg_describe(int code, char *buffer, size_t size) {
    if (av_strerror(code, buffer, size) < 0) snprintf(buffer, size, "error %d", code);
    return buffer;
}

/// libavcodec logs to stderr by itself; farcast reports decode errors once, as typed errors.
static inline void cffmpeg_quiet(void) { av_log_set_level(AV_LOG_QUIET); }
