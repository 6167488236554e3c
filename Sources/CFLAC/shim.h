#include <FLAC/stream_decoder.h>
#include <FLAC/stream_encoder.h>   // used by the tests to make FLAC streams

// Swift 6 refuses to read C globals such as FLAC__VERSION_STRING ("not concurrency-safe").
static inline const char *cflac_version_string(void) { return FLAC__VERSION_STRING; }
