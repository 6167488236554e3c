/*
 * libvncclient_replay.c - decode a Farcast RFB capture with libvncclient, with no network.
 *
 * Build (outside the repository, e.g. into /tmp):
 *   gcc -O2 -Wall -o /tmp/libvncclient_replay scripts/lib/bench/libvncclient_replay.c \
 *       $(pkg-config --cflags --libs libvncclient) -lcrypto -lpthread
 *
 * Usage:
 *   libvncclient_replay CAPTURE [--runs N] [--feed vncrec|socket|tcp:PORT] [--verbose]
 *
 * Decodes the capture once as a warm-up and then N more times (default 1), re-initialising
 * the client every time, and prints one line of JSON:
 *   {"capture","feed","bytes","width","height","updates","rectangles","pixels",
 *    "cpu_seconds":[per timed run],"median_cpu_seconds","mpx_per_s","sha256","peak_rss_bytes",
 *    "libvncclient_log_lines"}
 * cpu_seconds is the decoding thread's CPU time (user+sys, CLOCK_THREAD_CPUTIME_ID) from just
 * after ServerInit to the end of the stream. sha256 is over the final framebuffer as RGB bytes:
 * rows top to bottom, R, G, B per pixel (channels scaled to 8 bits as (v*255+max/2)/max).
 * libvncclient_log_lines counts what libvncclient logged while decoding (the first line goes to
 * stderr): it carries on past some damage, e.g. "Warning: possible ZRLE corruption", where a
 * strict decoder stops. (It also logs harmless things: ServerIdentity, desktop resizes.)
 * Exits 1 with a one-line message on malformed input or a libvncclient failure, 2 on bad usage.
 *
 * Capture format (written by `farcast vnc record`): the line "FARCAST-RFB-CAPTURE 1\n", one
 * line of JSON metadata (pixel_format: 32 hex chars = the 16-byte PIXEL_FORMAT the recording
 * client asked for; encodings; server; recorded_at), then every byte the server sent from its
 * "RFB 003.008\n" banner on.
 *
 * How the bytes reach libvncclient (0.9.14):
 *
 *  --feed vncrec (default): libvncclient's own playback mode. With client->serverPort == -1,
 *    ReadFromRFBServer() freads from client->vncRec->file, WriteToRFBServer() discards what the
 *    client sends, WaitForMessage() returns at once and HandleVncAuth() skips the password.
 *    Two things make the stock mode unusable on a plain byte stream, and both are handled here:
 *      - ConnectToRFBServer() fopen()s client->serverHost and insists on a "vncLog0.0" magic.
 *        We skip it (listenSpecified = TRUE: "already connected") and install our own vncRec.
 *      - HandleRFBServerMessage() sets vncRec->readTimestamp before every server message, and
 *        ReadFromRFBServer() then freads a raw struct timeval (16 bytes on LP64) before the
 *        message: vncLog files interleave timestamps with the messages; a capture has none.
 *        Our FILE is a buffered fopencookie() stream over the capture in memory. Before each
 *        HandleRFBServerMessage() call (a message boundary only this loop knows) we drop stdio's
 *        read-ahead (__fpurge) and have the cookie serve 16 zero bytes, then the stream again;
 *        doNotSleep is set too. Reads are memcpy()s from memory: no syscalls, no thread.
 *        (Unbuffered, as libvncclient's own fopen path has it, a cookie stream is read one byte
 *        per call, and a real file costs a read() per ReadFromRFBServer call.) glibc only:
 *        fopencookie, __fpurge, and FILE's _IO_read_ptr/_IO_read_end to find the boundary.
 *  --feed socket: the ordinary network code path. client->sock is one end of an AF_UNIX
 *    socketpair; a writer thread pushes the stream into the other end and discards what the
 *    client writes back (version, security choice, VncAuth response, SetPixelFormat, ...).
 *    Only the decoding thread's CPU time is measured, so the writer is excluded; the reader's
 *    read() syscalls (8 KiB at a time, libvncclient's RFB_BUF_SIZE) are included.
 *  --feed tcp:PORT: what a user's libvncclient program pays, for end-to-end comparisons: it
 *    connects to 127.0.0.1:PORT (a replay server such as scripts/lib/rfb_replay_server.py
 *    serving the same capture) and decodes until the server closes. Only the capture's first
 *    MiB is read (its metadata and handshake), so the process holds no copy of the stream;
 *    one run, no warm-up. Time the whole process from outside (GNU time) for CPU and RSS.
 *
 * In every mode the client's pixel format is the one in the metadata (the SetPixelFormat it
 * "sends" goes nowhere, but its decoders use client->format), every encoding libvncclient can
 * decode is listed in appData.encodingsString (JPEG enabled), and the security type is pinned to
 * the one the recorded stream shows was chosen (None or VncAuth; libvncclient would otherwise
 * pick the first acceptable type in the server's list). Messages and pseudo-encodings that
 * libvncclient 0.9.14 does not know are consumed by a small protocol extension: Fence (248),
 * EndOfContinuousUpdates (150) and DesktopName (-307); they are not counted as rectangles.
 * The framebuffer starts black, and a resize keeps the overlapping top-left area, as Farcast's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <rfb/rfbclient.h>

/* libvncclient exports its bundled TurboJPEG wrapper; rfbClientCleanup() never frees the
 * handle tight.c creates, so each run would leak one. */
extern int tjDestroy(void *handle);

#define PROG "libvncclient_replay"
#define ENC_DESKTOP_NAME 0xFFFFFECDu /* -307 */
#define MSG_END_OF_CONTINUOUS_UPDATES 150
#define MSG_FENCE 248

/* ------------------------------------------------------------------ errors and logging */

static int verbose = 0;
static char last_log[512];
static int counting_log = 0;       /* set while decoding (after ServerInit) */
static unsigned long decode_log_lines = 0;
static char first_decode_log[512];

static void fail(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, PROG ": error: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

/* Replaces rfbClientLog and rfbClientErr: keeps the last message for error reports. */
static void client_log(const char *fmt, ...)
{
    va_list ap;
    char line[512];
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = 0;
    if (n > 0)
        memcpy(last_log, line, n + 1);
    if (counting_log && n > 0 && decode_log_lines++ == 0)
        memcpy(first_decode_log, line, n + 1);
    if (verbose)
        fprintf(stderr, PROG ": libvncclient: %s\n", line);
}

/* ------------------------------------------------------------------ capture parsing */

typedef struct {
    uint8_t *file;        /* whole file */
    const uint8_t *stream;/* server bytes */
    size_t len;
    rfbPixelFormat format;
    uint32_t auth_scheme; /* 0: let libvncclient choose */
} capture_t;

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static uint16_t be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

static void parse_pixel_format(const char *meta, size_t meta_len, rfbPixelFormat *pf)
{
    static const char key[] = "\"pixel_format\"";
    const char *end = meta + meta_len;
    const char *p = memmem(meta, meta_len, key, sizeof key - 1);
    if (!p) fail("metadata has no pixel_format");
    p += sizeof key - 1;
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    if (p >= end || *p++ != ':') fail("metadata pixel_format is malformed");
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    if (p >= end || *p++ != '"') fail("metadata pixel_format is not a string");
    uint8_t b[16];
    for (int i = 0; i < 16; i++) {
        if (end - p < 2) fail("metadata pixel_format is shorter than 32 hex digits");
        int hi = hexval(p[0]), lo = hexval(p[1]);
        if (hi < 0 || lo < 0) fail("metadata pixel_format is not 32 hex digits");
        b[i] = (uint8_t)(hi << 4 | lo);
        p += 2;
    }
    if (p >= end || *p != '"') fail("metadata pixel_format is not exactly 32 hex digits");

    memset(pf, 0, sizeof *pf);
    pf->bitsPerPixel = b[0];
    pf->depth = b[1];
    pf->bigEndian = b[2] ? 1 : 0;
    pf->trueColour = b[3] ? 1 : 0;
    pf->redMax = be16(b + 4);
    pf->greenMax = be16(b + 6);
    pf->blueMax = be16(b + 8);
    pf->redShift = b[10];
    pf->greenShift = b[11];
    pf->blueShift = b[12];

    if (pf->bitsPerPixel != 8 && pf->bitsPerPixel != 16 && pf->bitsPerPixel != 32)
        fail("pixel format has %d bits per pixel; libvncclient decodes 8, 16 or 32", pf->bitsPerPixel);
    if (!pf->trueColour)
        fail("pixel format is colour-mapped; libvncclient 0.9.14 ignores SetColourMapEntries");
    if (!pf->redMax || !pf->greenMax || !pf->blueMax)
        fail("pixel format has a zero channel maximum");
    if (pf->redShift >= pf->bitsPerPixel || pf->greenShift >= pf->bitsPerPixel || pf->blueShift >= pf->bitsPerPixel)
        fail("pixel format has a shift beyond its bits per pixel");
    uint16_t probe = 1;
    int host_big = *(uint8_t *)&probe == 0;
    if (pf->bitsPerPixel > 8 && pf->bigEndian != host_big)
        fprintf(stderr, PROG ": warning: pixel format byte order differs from the host's; "
                        "libvncclient's decoders assume host order\n");
}

/* Is there a plausible SecurityResult(OK) + ServerInit at offset o? */
static int plausible_server_init(const uint8_t *s, size_t len, size_t o, int with_result)
{
    if (with_result) {
        if (o + 4 > len || be32(s + o) != 0) return 0;
        o += 4;
    }
    if (o + 24 > len) return 0;
    const uint8_t *si = s + o;
    int bpp = si[4], depth = si[5];
    uint32_t name_len = be32(si + 20);
    if (!be16(si) || !be16(si + 2)) return 0;
    if (bpp != 8 && bpp != 16 && bpp != 24 && bpp != 32) return 0;
    if (depth == 0 || depth > 32 || si[6] > 1 || si[7] > 1) return 0;
    if (name_len > (1u << 20) || o + 24 + name_len > len) return 0;
    return 1;
}

/* Works out which security type the recording client chose, so libvncclient chooses it too. */
static uint32_t infer_security(const uint8_t *s, size_t len)
{
    int major, minor;
    char banner[13];
    if (len < 12) fail("stream is shorter than the RFB version banner");
    memcpy(banner, s, 12);
    banner[12] = 0;
    if (memcmp(banner, "RFB ", 4) != 0 || sscanf(banner, "RFB %03d.%03d\n", &major, &minor) != 2)
        fail("stream does not start with an RFB version banner");
    /* The version libvncclient will settle on (see InitialiseRFBConnection). */
    if (major == 3 && (minor == 14 || minor == 16)) minor -= 10;
    if ((major == 3 && minor > 8) || major > 3) { major = 3; minor = 8; }
    if (!(major == 3 && minor >= 7)) return 0; /* RFB 3.3: the server decides */

    size_t o = 12;
    if (o >= len) fail("stream ends before the security types");
    int count = s[o++];
    if (count == 0) return 0; /* connection failed: libvncclient reports the reason */
    if (o + (size_t)count > len) fail("stream ends inside the security types");
    int has_none = 0, has_vnc = 0;
    for (int i = 0; i < count; i++) {
        if (s[o + i] == rfbNoAuth) has_none = 1;
        if (s[o + i] == rfbVncAuth) has_vnc = 1;
    }
    o += count;
    if (!has_none && !has_vnc) {
        char list[256] = "";
        for (int i = 0; i < count && strlen(list) < sizeof list - 8; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), i ? ",%d" : "%d", s[o - count + i]);
        fail("server offered security types [%s]; only None (1) or VncAuth (2) can be replayed "
             "(TLS-based types cannot: the capture holds decrypted bytes)", list);
    }
    int none_ok = has_none && plausible_server_init(s, len, o, minor >= 8);
    int vnc_ok = has_vnc && plausible_server_init(s, len, o + 16, 1);
    if (none_ok && !vnc_ok) return rfbNoAuth;
    if (vnc_ok && !none_ok) return rfbVncAuth;
    if (has_none && !has_vnc) return rfbNoAuth;
    if (has_vnc && !has_none) return rfbVncAuth;
    return 0;
}

static void load_capture(const char *path, capture_t *cap, size_t limit)
{
    static const char magic[] = "FARCAST-RFB-CAPTURE 1\n";
    FILE *f = fopen(path, "rb");
    if (!f) fail("cannot open %s: %s", path, strerror(errno));
    size_t cap_bytes = 1 << 20, n = 0;
    uint8_t *buf = malloc(cap_bytes);
    if (!buf) fail("out of memory");
    for (;;) {
        if (n >= limit) break;
        if (n == cap_bytes) {
            cap_bytes *= 2;
            buf = realloc(buf, cap_bytes);
            if (!buf) fail("out of memory reading %s", path);
        }
        size_t r = fread(buf + n, 1, cap_bytes - n, f);
        n += r;
        if (r == 0) break;
    }
    if (ferror(f)) fail("cannot read %s", path);
    fclose(f);

    if (n < sizeof magic - 1 || memcmp(buf, magic, sizeof magic - 1) != 0)
        fail("%s is not a Farcast RFB capture (missing the FARCAST-RFB-CAPTURE 1 line)", path);
    const uint8_t *meta = buf + sizeof magic - 1;
    size_t rest = n - (sizeof magic - 1);
    const uint8_t *nl = memchr(meta, '\n', rest < 65536 ? rest : 65536);
    if (!nl) fail("%s: the metadata line is missing", path);
    size_t meta_len = (size_t)(nl - meta);
    if (meta_len < 2 || meta[0] != '{' || meta[meta_len - 1] != '}')
        fail("%s: the metadata line is not a JSON object", path);

    memset(cap, 0, sizeof *cap);
    cap->file = buf;
    parse_pixel_format((const char *)meta, meta_len, &cap->format);
    cap->stream = nl + 1;
    cap->len = n - (size_t)(cap->stream - buf);
    cap->auth_scheme = infer_security(cap->stream, cap->len);
}

/* ------------------------------------------------------------------ per-run state */

typedef struct {
    uint64_t updates, rects, pixels;
    int skip_next_rect;     /* the last "rectangle" was a pseudo-encoding we consumed */
    const char *ext_error;  /* why an extension handler gave up */
    int fb_w, fb_h;         /* dimensions of client->frameBuffer as allocated */
} run_state_t;

static int state_tag;

static run_state_t *state_of(rfbClient *cl) { return rfbClientGetClientData(cl, &state_tag); }

static char *get_password(rfbClient *cl)
{
    (void)cl;
    return strdup("replay"); /* the recorded server already checked the real answer */
}

/* Black on first allocation; a resize keeps the overlapping top-left area (as Farcast does). */
static rfbBool alloc_framebuffer(rfbClient *cl)
{
    run_state_t *st = state_of(cl);
    size_t bpp = cl->format.bitsPerPixel / 8;
    uint64_t size = (uint64_t)cl->width * (uint64_t)cl->height * bpp;
    if (size > (uint64_t)1 << 34) {
        client_log("framebuffer %dx%d is too large\n", cl->width, cl->height);
        return FALSE;
    }
    uint8_t *fb = malloc(size ? (size_t)size : 1);
    if (!fb) return FALSE;
    memset(fb, 0, (size_t)size); /* also faults the pages in before the timed decode */
    if (cl->frameBuffer) {
        int w = st->fb_w < cl->width ? st->fb_w : cl->width;
        int h = st->fb_h < cl->height ? st->fb_h : cl->height;
        for (int y = 0; y < h; y++)
            memcpy(fb + (size_t)y * cl->width * bpp, cl->frameBuffer + (size_t)y * st->fb_w * bpp, (size_t)w * bpp);
        free(cl->frameBuffer);
    }
    cl->frameBuffer = fb;
    st->fb_w = cl->width;
    st->fb_h = cl->height;
    return TRUE;
}

static void got_rect(rfbClient *cl, int x, int y, int w, int h)
{
    (void)x; (void)y;
    run_state_t *st = state_of(cl);
    if (st->skip_next_rect) {
        st->skip_next_rect = 0;
        return;
    }
    st->rects++;
    st->pixels += (uint64_t)w * (uint64_t)h;
}

static void finished_update(rfbClient *cl) { state_of(cl)->updates++; }

/* ------------------------------------------------------------------ protocol extension */

static rfbBool ext_encoding(rfbClient *cl, rfbFramebufferUpdateRectHeader *rect)
{
    run_state_t *st = state_of(cl);
    if (rect->encoding != ENC_DESKTOP_NAME) return FALSE;
    uint8_t lenbuf[4];
    if (!ReadFromRFBServer(cl, (char *)lenbuf, 4)) {
        st->ext_error = "stream ends inside a DesktopName rectangle";
        return FALSE;
    }
    uint32_t n = be32(lenbuf);
    if (n > (1u << 20)) {
        st->ext_error = "DesktopName longer than 1 MiB";
        return FALSE;
    }
    char *name = malloc(n + 1);
    if (!name || !ReadFromRFBServer(cl, name, n)) {
        free(name);
        st->ext_error = "stream ends inside a DesktopName rectangle";
        return FALSE;
    }
    free(name);
    st->skip_next_rect = 1; /* GotFrameBufferUpdate follows for handled extension encodings */
    return TRUE;
}

static rfbBool ext_message(rfbClient *cl, rfbServerToClientMsg *msg)
{
    run_state_t *st = state_of(cl);
    switch (msg->type) {
    case MSG_END_OF_CONTINUOUS_UPDATES:
        return TRUE;
    case MSG_FENCE: {
        uint8_t hdr[8]; /* padding(3) flags(4) length(1) */
        char payload[255];
        if (!ReadFromRFBServer(cl, (char *)hdr, sizeof hdr)) {
            st->ext_error = "stream ends inside a Fence message";
            return FALSE;
        }
        if (hdr[7] > 64) {
            st->ext_error = "Fence payload longer than 64 bytes";
            return FALSE;
        }
        if (!ReadFromRFBServer(cl, payload, hdr[7])) {
            st->ext_error = "stream ends inside a Fence message";
            return FALSE;
        }
        return TRUE; /* in playback nobody is waiting for the answer */
    }
    default:
        return FALSE;
    }
}

static rfbClientProtocolExtension replay_extension = {
    .encodings = NULL,
    .handleEncoding = ext_encoding,
    .handleMessage = ext_message,
};

/* ------------------------------------------------------------------ feed: vncrec playback */

/* A read-only stdio stream over the capture in memory that can put a zero timestamp in front
 * of the next server message. */
typedef struct {
    const uint8_t *data;
    size_t len, pos;      /* pos: next stream byte this cookie hands to stdio */
    size_t ts_pending;    /* zero timestamp bytes to hand out before data[pos] */
    FILE *file;
} mem_feed_t;

static ssize_t mem_feed_read(void *cookie, char *buf, size_t size)
{
    mem_feed_t *f = cookie;
    size_t out = 0;
    if (f->ts_pending) {
        out = f->ts_pending < size ? f->ts_pending : size;
        memset(buf, 0, out);
        f->ts_pending -= out;
    }
    size_t n = f->len - f->pos;
    if (n > size - out) n = size - out;
    memcpy(buf + out, f->data + f->pos, n);
    f->pos += n;
    return (ssize_t)(out + n);
}

/* Stream bytes that the client has consumed (stdio's read-ahead excluded). Only meaningful at
 * a message boundary, where no timestamp bytes are left unread. glibc keeps unread input
 * between _IO_read_ptr and _IO_read_end (the same test gnulib's freadahead() uses). */
static size_t mem_feed_consumed(const mem_feed_t *f)
{
    size_t ahead = (size_t)(f->file->_IO_read_end - f->file->_IO_read_ptr);
    return f->pos - ahead;
}

/* Called just before HandleRFBServerMessage(), which will first fread a struct timeval (it sets
 * vncRec->readTimestamp): drop stdio's read-ahead and serve zeros, then the message. */
static void mem_feed_mark_message(mem_feed_t *f)
{
    size_t consumed = mem_feed_consumed(f);
    __fpurge(f->file);
    clearerr(f->file);
    f->pos = consumed;
    f->ts_pending = sizeof(struct timeval);
}

/* ------------------------------------------------------------------ feed: socketpair */

typedef struct {
    int fd;
    const uint8_t *data;
    size_t len;
    atomic_int all_written;
    pthread_t thread;
} sock_feed_t;

static void *sock_writer(void *arg)
{
    sock_feed_t *f = arg;
    size_t off = 0;
    char sink[4096];
    if (f->len == 0) {
        atomic_store(&f->all_written, 1);
        shutdown(f->fd, SHUT_WR);
    }
    for (;;) {
        struct pollfd p = {.fd = f->fd, .events = POLLIN | (off < f->len ? POLLOUT : 0)};
        if (poll(&p, 1, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t r = read(f->fd, sink, sizeof sink); /* what the client sends: discarded */
            if (r == 0) break;                          /* the client closed its end */
            if (r < 0 && errno != EINTR && errno != EAGAIN) break;
        }
        if (off < f->len && (p.revents & POLLOUT)) {
            size_t chunk = f->len - off;
            if (chunk > (1u << 20)) chunk = 1u << 20;
            ssize_t w = write(f->fd, f->data + off, chunk);
            if (w > 0) {
                off += (size_t)w;
                if (off == f->len) {
                    atomic_store(&f->all_written, 1);
                    shutdown(f->fd, SHUT_WR);
                }
            } else if (w < 0 && errno != EINTR && errno != EAGAIN) {
                break;
            }
        }
    }
    return NULL;
}

/* ------------------------------------------------------------------ one decode */

enum feed_kind { FEED_VNCREC, FEED_SOCKET, FEED_TCP };
static int tcp_port;

typedef struct {
    int width, height;
    uint64_t updates, rects, pixels;
    unsigned long log_lines;
    double cpu;
    char sha256[65];
} result_t;

static double thread_cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint8_t scale_channel(uint32_t v, uint32_t max)
{
    if (max == 255) return (uint8_t)v;
    return (uint8_t)((v * 255 + max / 2) / max);
}

static void framebuffer_sha256(rfbClient *cl, char out[65])
{
    const rfbPixelFormat *pf = &cl->format;
    int bpp = pf->bitsPerPixel / 8;
    size_t row_bytes = (size_t)cl->width * 3;
    uint8_t *row = malloc(row_bytes ? row_bytes : 1);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!row || !ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) fail("SHA-256 setup failed");
    for (int y = 0; y < cl->height; y++) {
        const uint8_t *src = cl->frameBuffer + (size_t)y * cl->width * bpp;
        for (int x = 0; x < cl->width; x++, src += bpp) {
            uint32_t p;
            if (bpp == 4)
                p = pf->bigEndian ? be32(src) : (uint32_t)src[0] | (uint32_t)src[1] << 8 | (uint32_t)src[2] << 16 | (uint32_t)src[3] << 24;
            else if (bpp == 2)
                p = pf->bigEndian ? be16(src) : (uint32_t)(src[0] | src[1] << 8);
            else
                p = src[0];
            row[3 * x] = scale_channel((p >> pf->redShift) & pf->redMax, pf->redMax);
            row[3 * x + 1] = scale_channel((p >> pf->greenShift) & pf->greenMax, pf->greenMax);
            row[3 * x + 2] = scale_channel((p >> pf->blueShift) & pf->blueMax, pf->blueMax);
        }
        EVP_DigestUpdate(ctx, row, row_bytes);
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    EVP_DigestFinal_ex(ctx, md, &md_len);
    EVP_MD_CTX_free(ctx);
    free(row);
    for (unsigned i = 0; i < 32; i++) sprintf(out + 2 * i, "%02x", md[i]);
    out[64] = 0;
}

static const char *all_encodings =
    "tight zrle zywrle trle ultra copyrect hextile zlib zlibhex corre rre raw";

static void decode_once(const capture_t *cap, enum feed_kind feed, result_t *res)
{
    run_state_t st;
    memset(&st, 0, sizeof st);
    last_log[0] = 0;

    rfbClient *cl = rfbGetClient(8, 3, 4);
    if (!cl) fail("rfbGetClient failed");
    cl->format = cap->format; /* what the recorded stream is encoded in */
    cl->appData.requestedDepth = cap->format.depth;
    cl->appData.encodingsString = all_encodings;
    cl->appData.enableJPEG = TRUE;
    cl->appData.useRemoteCursor = TRUE;
    cl->canHandleNewFBSize = TRUE;
    cl->GetPassword = get_password;
    cl->MallocFrameBuffer = alloc_framebuffer;
    cl->GotFrameBufferUpdate = got_rect;
    cl->FinishedFrameBufferUpdate = finished_update;
    rfbClientSetClientData(cl, &state_tag, &st);
    if (cap->auth_scheme) SetClientAuthSchemes(cl, &cap->auth_scheme, 1);
    cl->listenSpecified = TRUE; /* "already connected": rfbInitClient skips ConnectToRFBServer */

    mem_feed_t mem = {.data = cap->stream, .len = cap->len};
    FILE *rec_file = NULL;
    sock_feed_t sock = {.fd = -1, .data = cap->stream, .len = cap->len};
    int sv[2] = {-1, -1};

    if (feed == FEED_VNCREC) {
        static const cookie_io_functions_t io = {.read = mem_feed_read};
        rec_file = fopencookie(&mem, "rb", io);
        if (!rec_file) fail("fopencookie failed: %s", strerror(errno));
        /* Buffered (libvncclient's own fopen path calls setbuf(NULL): a read() per fread). An
         * unbuffered cookie stream would reach mem_feed_read one byte at a time. */
        if (setvbuf(rec_file, NULL, _IOFBF, 1 << 16) != 0) fail("setvbuf failed");
        __fsetlocking(rec_file, FSETLOCKING_BYCALLER);
        mem.file = rec_file;
        rfbVNCRec *rec = calloc(1, sizeof *rec); /* freed by rfbClientCleanup */
        if (!rec) fail("out of memory");
        rec->file = rec_file;
        rec->readTimestamp = FALSE;
        rec->doNotSleep = TRUE;
        cl->vncRec = rec;
        cl->serverPort = -1;
    } else if (feed == FEED_TCP) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)tcp_port)};
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd < 0 || connect(fd, (struct sockaddr *)&to, sizeof to) != 0)
            fail("cannot connect to 127.0.0.1:%d: %s", tcp_port, strerror(errno));
        cl->sock = fd; /* closed by rfbClientCleanup */
    } else {
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) fail("socketpair failed: %s", strerror(errno));
        int big = 4 << 20;
        setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
        setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
        fcntl(sv[1], F_SETFL, fcntl(sv[1], F_GETFL) | O_NONBLOCK);
        sock.fd = sv[1];
        atomic_init(&sock.all_written, 0);
        if (pthread_create(&sock.thread, NULL, sock_writer, &sock) != 0) fail("pthread_create failed");
        cl->sock = sv[0]; /* closed by rfbClientCleanup */
    }

    /* Handshake, security, ClientInit/ServerInit, framebuffer, SetPixelFormat/SetEncodings. */
    if (!rfbInitClient(cl, NULL, NULL)) { /* it has already called rfbClientCleanup(cl) */
        if (feed == FEED_VNCREC) {
            fclose(rec_file);
        } else if (feed == FEED_SOCKET) {
            pthread_join(sock.thread, NULL);
            close(sv[1]);
        }
        fail("libvncclient could not complete the handshake: %s", last_log[0] ? last_log : "(no message)");
    }

    decode_log_lines = 0;
    first_decode_log[0] = 0;
    counting_log = 1;
    double t0 = thread_cpu_seconds();
    for (;;) {
        if (feed == FEED_VNCREC) {
            if (mem_feed_consumed(&mem) == mem.len) break; /* clean end: at a message boundary */
            mem_feed_mark_message(&mem);
        } else if (cl->buffered == 0) {
            /* Wait until the next message has started to arrive or the writer has shut down. */
            struct pollfd p = {.fd = cl->sock, .events = POLLIN};
            int pending = -1;
            while (poll(&p, 1, -1) < 0 && errno == EINTR) {}
            if (ioctl(cl->sock, FIONREAD, &pending) == 0 && pending == 0) break; /* EOF */
        }
        rfbBool ok = HandleRFBServerMessage(cl);
        if (ok && feed == FEED_VNCREC && (cl->vncRec->readTimestamp || mem.ts_pending))
            fail("libvncclient did not read the per-message timestamp playback mode expects");
        if (!ok) {
            int at_end;
            if (feed == FEED_VNCREC) {
                at_end = mem.pos == mem.len && mem_feed_consumed(&mem) == mem.len;
            } else {
                int pending = -1;
                at_end = (feed == FEED_TCP || atomic_load(&sock.all_written)) && cl->buffered == 0 &&
                         ioctl(cl->sock, FIONREAD, &pending) == 0 && pending == 0;
            }
            if (st.ext_error)
                fail("%s", st.ext_error);
            if (at_end)
                fail("the stream ends inside a message (after %llu complete updates)",
                     (unsigned long long)st.updates);
            fail("libvncclient failed after %llu updates: %s", (unsigned long long)st.updates,
                 last_log[0] ? last_log : "(no message)");
        }
    }
    double t1 = thread_cpu_seconds();
    counting_log = 0;

    res->cpu = t1 - t0;
    res->width = cl->width;
    res->height = cl->height;
    res->updates = st.updates;
    res->rects = st.rects;
    res->pixels = st.pixels;
    res->log_lines = decode_log_lines;
    framebuffer_sha256(cl, res->sha256);

    free(cl->frameBuffer); /* rfbClientCleanup leaves it to the application */
    cl->frameBuffer = NULL;
    if (cl->tjhnd) {
        tjDestroy(cl->tjhnd);
        cl->tjhnd = NULL;
    }
    free(cl->rcSource); /* cursor shape buffers: not freed by rfbClientCleanup either */
    free(cl->rcMask);
    cl->rcSource = cl->rcMask = NULL;
    if (feed == FEED_VNCREC) {
        rfbClientCleanup(cl); /* frees vncRec, not its FILE */
        fclose(rec_file);
    } else if (feed == FEED_TCP) {
        rfbClientCleanup(cl);
    } else {
        rfbClientCleanup(cl); /* closes sv[0]: the writer sees EOF and ends */
        pthread_join(sock.thread, NULL);
        close(sv[1]);
    }
}

/* ------------------------------------------------------------------ main */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
        else if (c < 0x20) fprintf(out, "\\u%04x", c);
        else fputc(c, out);
    }
    fputc('"', out);
}

static void usage(void)
{
    fprintf(stderr, "usage: " PROG " CAPTURE [--runs N] [--feed vncrec|socket|tcp:PORT] [--verbose]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    long runs = 1;
    enum feed_kind feed = FEED_VNCREC;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
            char *end;
            runs = strtol(argv[++i], &end, 10);
            if (*end || runs < 1 || runs > 100000) usage();
        } else if (strcmp(argv[i], "--feed") == 0 && i + 1 < argc) {
            i++;
            if (strcmp(argv[i], "vncrec") == 0) feed = FEED_VNCREC;
            else if (strcmp(argv[i], "socket") == 0) feed = FEED_SOCKET;
            else if (strncmp(argv[i], "tcp:", 4) == 0 && (tcp_port = atoi(argv[i] + 4)) > 0 && tcp_port < 65536) feed = FEED_TCP;
            else usage();
        } else if (strcmp(argv[i], "--verbose") == 0 || strcmp(argv[i], "-v") == 0) {
            verbose = 1;
        } else if (argv[i][0] == '-' || path) {
            usage();
        } else {
            path = argv[i];
        }
    }
    if (!path) usage();

    signal(SIGPIPE, SIG_IGN);
    rfbClientLog = client_log;
    rfbClientErr = client_log;
    rfbClientRegisterExtension(&replay_extension);

    capture_t cap;
    load_capture(path, &cap, feed == FEED_TCP ? (size_t)1 << 20 : SIZE_MAX);

    result_t first, r;
    double *cpu = calloc((size_t)runs, sizeof *cpu);
    if (!cpu) fail("out of memory");
    if (feed == FEED_TCP) runs = 1;
    decode_once(&cap, feed, &first); /* warm-up (tcp: the one run) */
    r = first;
    for (long i = 0; i < runs && feed != FEED_TCP; i++) {
        decode_once(&cap, feed, &r);
        if (r.width != first.width || r.height != first.height || r.updates != first.updates ||
            r.rects != first.rects || r.pixels != first.pixels || strcmp(r.sha256, first.sha256) != 0)
            fail("run %ld decoded differently from the warm-up run", i + 1);
        cpu[i] = r.cpu;
    }
    if (feed == FEED_TCP) cpu[0] = first.cpu;

    if (r.log_lines)
        fprintf(stderr, PROG ": note: libvncclient logged %lu line(s) while decoding, the first: %s\n",
                r.log_lines, first_decode_log);

    double *sorted = malloc((size_t)runs * sizeof *sorted);
    if (!sorted) fail("out of memory");
    memcpy(sorted, cpu, (size_t)runs * sizeof *sorted);
    qsort(sorted, (size_t)runs, sizeof *sorted, cmp_double);
    double median = runs % 2 ? sorted[runs / 2] : (sorted[runs / 2 - 1] + sorted[runs / 2]) / 2;

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);

    printf("{\"capture\":");
    json_string(stdout, path);
    printf(",\"feed\":\"%s\",\"bytes\":%zu,\"width\":%d,\"height\":%d,\"updates\":%llu,\"rectangles\":%llu,\"pixels\":%llu,\"cpu_seconds\":[",
           feed == FEED_VNCREC ? "vncrec" : feed == FEED_TCP ? "tcp" : "socket", cap.len, r.width, r.height, (unsigned long long)r.updates,
           (unsigned long long)r.rects, (unsigned long long)r.pixels);
    for (long i = 0; i < runs; i++) printf(i ? ",%.6f" : "%.6f", cpu[i]);
    printf("],\"median_cpu_seconds\":%.6f,\"mpx_per_s\":%.3f,\"sha256\":\"%s\",\"peak_rss_bytes\":%lld,\"libvncclient_log_lines\":%lu}\n",
           median, median > 0 ? (double)r.pixels / median / 1e6 : 0.0, r.sha256, (long long)ru.ru_maxrss * 1024,
           r.log_lines);

    free(sorted);
    free(cpu);
    free(cap.file);
    return 0;
}
