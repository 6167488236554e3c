#include <opus/opus.h>
#include <opus/opus_multistream.h>

// opus_decoder_ctl is variadic, which Swift cannot call; wrap the requests Farcast uses.
static inline int copus_decoder_reset(OpusDecoder *decoder) {
    return opus_decoder_ctl(decoder, OPUS_RESET_STATE);
}

static inline int copus_multistream_decoder_reset(OpusMSDecoder *decoder) {
    return opus_multistream_decoder_ctl(decoder, OPUS_RESET_STATE);
}
