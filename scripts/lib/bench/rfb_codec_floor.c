/*
 * rfb_codec_floor.c - what the shared codec libraries alone cost on a capture's data, for
 * scripts/bench vnc: the part of an RFB client's work no client can do faster except by
 * calling a faster library.
 *
 * Build: gcc -O2 -o rfb_codec_floor rfb_codec_floor.c -lisal -lz -lturbojpeg
 * Usage: rfb_codec_floor STREAMS RUNS     (STREAMS from rfb_codec_streams.py)
 *
 * Times, in CPU seconds of this process (median of RUNS passes, each from fresh state):
 *   isal_s  the zlib data inflated by Intel ISA-L as farcast inflates it: the 2-byte zlib
 *           header taken off and the raw deflate data decoded without a checksum;
 *   zlib_s  the same data through zlib's inflate() with its zlib wrapper and adler-32, as
 *           libvncclient inflates it;
 *   jpeg_s  Tight's JPEG images decoded by libjpeg-turbo (tjDecompress2, BGRX, default
 *           flags), as farcast decodes them; libvncclient calls the same library.
 * Both inflaters write into a 256 KiB window, one call per filled window, with a separate
 * stream per Tight stream number and a fresh stream after each reset. The two inflaters'
 * output sizes are compared; a mismatch or a library error exits 1.
 * Prints one line of JSON: {"isal_s","zlib_s","jpeg_s","inflated_bytes","zlib_chunks","jpeg_images"}.
 */
#include <isa-l/igzip_lib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <turbojpeg.h>
#include <zlib.h>

typedef struct {
    uint8_t kind, stream;
    uint32_t length;
    const uint8_t *bytes;
} Record;

static Record *records;
static size_t record_count;
#define WINDOW (256 * 1024)
static uint8_t window[WINDOW];

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void fail(const char *what) {
    fprintf(stderr, "rfb_codec_floor: %s\n", what);
    exit(1);
}

static size_t run_isal(void) {
    struct inflate_state state[4];
    int header_left[4];
    size_t produced = 0;
    for (int s = 0; s < 4; s++) {
        isal_inflate_init(&state[s]);
        state[s].crc_flag = ISAL_DEFLATE;
        header_left[s] = 2;
    }
    for (size_t i = 0; i < record_count; i++) {
        Record *r = &records[i];
        struct inflate_state *st = &state[r->stream];
        if (r->kind == 1) {
            isal_inflate_reset(st);
            st->crc_flag = ISAL_DEFLATE;
            header_left[r->stream] = 2;
            continue;
        }
        if (r->kind != 0) continue;
        uint32_t skip = r->length < (uint32_t)header_left[r->stream] ? r->length : (uint32_t)header_left[r->stream];
        header_left[r->stream] -= skip;
        st->next_in = (uint8_t *)r->bytes + skip;
        st->avail_in = r->length - skip;
        for (;;) {
            st->next_out = window;
            st->avail_out = WINDOW;
            if (isal_inflate(st) != ISAL_DECOMP_OK) fail("ISA-L refused the data");
            size_t got = WINDOW - st->avail_out;
            produced += got;
            if (st->avail_in == 0 && got < WINDOW) break;
        }
    }
    return produced;
}

static size_t run_zlib(void) {
    z_stream z[4];
    size_t produced = 0;
    memset(z, 0, sizeof z);
    for (int s = 0; s < 4; s++)
        if (inflateInit(&z[s]) != Z_OK) fail("zlib could not start");
    for (size_t i = 0; i < record_count; i++) {
        Record *r = &records[i];
        z_stream *st = &z[r->stream];
        if (r->kind == 1) {
            inflateReset(st);
            continue;
        }
        if (r->kind != 0) continue;
        st->next_in = (Bytef *)r->bytes;
        st->avail_in = r->length;
        for (;;) {
            st->next_out = window;
            st->avail_out = WINDOW;
            int result = inflate(st, Z_SYNC_FLUSH);
            if (result != Z_OK && result != Z_BUF_ERROR && result != Z_STREAM_END) fail("zlib refused the data");
            size_t got = WINDOW - st->avail_out;
            produced += got;
            if (st->avail_in == 0 && got < WINDOW) break;
        }
    }
    for (int s = 0; s < 4; s++) inflateEnd(&z[s]);
    return produced;
}

static uint8_t *pixels;
static const size_t pixel_bytes = 4096 * 4096 * 4;

static size_t run_jpeg(void) {
    tjhandle handle = tjInitDecompress();
    size_t images = 0;
    if (!handle) fail("libjpeg-turbo could not start");
    for (size_t i = 0; i < record_count; i++) {
        Record *r = &records[i];
        if (r->kind != 2) continue;
        int w, h, subsampling, colourspace;
        if (tjDecompressHeader3(handle, r->bytes, r->length, &w, &h, &subsampling, &colourspace) != 0) fail("a JPEG header was refused");
        if ((size_t)w * h * 4 > pixel_bytes) fail("a JPEG image larger than 4096x4096");
        if (tjDecompress2(handle, r->bytes, r->length, pixels, w, w * 4, h, TJPF_BGRX, 0) != 0) fail("a JPEG image was refused");
        images++;
    }
    tjDestroy(handle);
    return images;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: rfb_codec_floor STREAMS RUNS\n");
        return 2;
    }
    int runs = atoi(argv[2]);
    if (runs < 1 || runs > 99) fail("RUNS must be 1-99");
    FILE *f = fopen(argv[1], "rb");
    if (!f) fail("cannot open the streams file");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    uint8_t *data = malloc(size + 1);
    if (!data || fread(data, 1, size, f) != (size_t)size) fail("cannot read the streams file");
    fclose(f);
    size_t capacity = 1024, chunks = 0, images = 0;
    records = malloc(capacity * sizeof *records);
    for (long at = 0; at < size;) {
        if (size - at < 6) fail("a truncated record");
        Record r = {data[at], data[at + 1], 0, NULL};
        memcpy(&r.length, data + at + 2, 4);
        at += 6;
        if (r.stream > 3 || r.kind > 2 || r.length > (uint64_t)(size - at)) fail("a malformed record");
        r.bytes = data + at;
        at += r.length;
        if (record_count == capacity) records = realloc(records, (capacity *= 2) * sizeof *records);
        records[record_count++] = r;
        chunks += r.kind == 0;
        images += r.kind == 2;
    }
    pixels = malloc(pixel_bytes);
    double isal[99], zlib[99], jpeg[99];
    size_t isal_bytes = 0, zlib_bytes = 0;
    for (int i = 0; i < runs; i++) {
        double t0 = cpu_now();
        isal_bytes = run_isal();
        double t1 = cpu_now();
        zlib_bytes = run_zlib();
        double t2 = cpu_now();
        run_jpeg();
        double t3 = cpu_now();
        isal[i] = t1 - t0, zlib[i] = t2 - t1, jpeg[i] = t3 - t2;
    }
    if (isal_bytes != zlib_bytes) fail("ISA-L and zlib inflated different amounts");
    qsort(isal, runs, sizeof(double), by_value);
    qsort(zlib, runs, sizeof(double), by_value);
    qsort(jpeg, runs, sizeof(double), by_value);
    printf("{\"isal_s\":%.4f,\"zlib_s\":%.4f,\"jpeg_s\":%.4f,\"inflated_bytes\":%zu,\"zlib_chunks\":%zu,\"jpeg_images\":%zu}\n",
           isal[runs / 2], zlib[runs / 2], jpeg[runs / 2], isal_bytes, chunks, images);
    return 0;
}
