/*
 * Deterministic desktop workloads for the RFB decode benchmark: draws on an X display at a
 * fixed frame rate for a fixed number of frames, so every recording sees the same content.
 *
 *   rfb_workload KIND SECONDS [FPS]      (DISPLAY from the environment)
 *   KIND: text   scrolling lines of text (palette / RLE / Hextile territory)
 *         photo  moving photographic content (what Tight sends as JPEG)
 *         fill   random solid rectangles (Tight fill, RRE, solid tiles)
 *         mixed  all three side by side, like a busy desktop
 *
 * Build: gcc -O2 -o rfb_workload rfb_workload.c -lX11 -lm
 */
#include <X11/Xlib.h>
#include <X11/Xutil.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint32_t rng = 12345;
static uint32_t next_random(void) {
    rng = rng * 1664525u + 1013904223u;
    return rng >> 8;
}

static const char *words[] = {"remote", "frame", "buffer", "rectangle", "encoding", "pixel", "tight", "zlib",
                              "stream", "update", "client", "server", "cursor", "palette", "gradient", "tile"};

static void sleep_until(struct timespec *deadline) {
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, deadline, NULL) != 0) {}
}

typedef struct {
    Display *dpy;
    Window root;
    GC gc;
    int width, height;
    XImage *photo;
    char *photo_data;
    XFontStruct *font;
} Desk;

/* A smooth, noisy picture that shifts with the frame number. */
static void paint_photo(Desk *d, int frame, int pw, int ph) {
    uint32_t *px = (uint32_t *)d->photo_data;
    for (int y = 0; y < ph; y++) {
        for (int x = 0; x < pw; x++) {
            double fx = (x + frame * 7) * 0.011, fy = (y + frame * 3) * 0.013;
            int r = (int)(128 + 100 * sin(fx) * cos(fy * 0.7)) + (int)(next_random() % 13) - 6;
            int g = (int)(128 + 100 * sin(fx * 0.6 + fy)) + (int)(next_random() % 13) - 6;
            int b = (int)(128 + 100 * cos(fy * 1.3 - fx * 0.4)) + (int)(next_random() % 13) - 6;
            r = r < 0 ? 0 : r > 255 ? 255 : r;
            g = g < 0 ? 0 : g > 255 ? 255 : g;
            b = b < 0 ? 0 : b > 255 ? 255 : b;
            px[y * pw + x] = (uint32_t)r << 16 | (uint32_t)g << 8 | (uint32_t)b;
        }
    }
}

static void draw_text(Desk *d, int frame, int x0, int y0, int w, int h) {
    int line = d->font->ascent + d->font->descent + 2;
    int lines = h / line;
    XSetForeground(d->dpy, d->gc, 0xF8F8F8);
    XFillRectangle(d->dpy, d->root, d->gc, x0, y0, w, h);
    for (int i = 0; i < lines; i++) {
        /* Line i shows text number (frame + i): the block scrolls up one line per frame. */
        uint32_t seed = (uint32_t)(frame + i) * 2654435761u;
        char buffer[512];
        int n = 0;
        while (n < (int)sizeof(buffer) - 16 && XTextWidth(d->font, buffer, n) < w - 60) {
            seed = seed * 1103515245u + 12345u;
            n += snprintf(buffer + n, sizeof(buffer) - n, "%s ", words[(seed >> 16) % 16]);
        }
        XSetForeground(d->dpy, d->gc, (seed >> 8) % 5 == 0 ? 0x2040C0 : 0x101010);
        XDrawString(d->dpy, d->root, d->gc, x0 + 8, y0 + (i + 1) * line - d->font->descent, buffer, n);
    }
}

static void draw_fills(Desk *d, int x0, int y0, int w, int h, int count) {
    for (int i = 0; i < count; i++) {
        int rw = 20 + next_random() % (w / 4), rh = 20 + next_random() % (h / 4);
        int rx = x0 + next_random() % (w - rw), ry = y0 + next_random() % (h - rh);
        XSetForeground(d->dpy, d->gc, next_random() & 0xFFFFFF);
        XFillRectangle(d->dpy, d->root, d->gc, rx, ry, rw, rh);
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: rfb_workload text|photo|fill|mixed SECONDS [FPS]\n");
        return 2;
    }
    const char *kind = argv[1];
    double seconds = atof(argv[2]);
    int fps = argc > 3 ? atoi(argv[3]) : 20;
    Desk d;
    d.dpy = XOpenDisplay(NULL);
    if (!d.dpy) {
        fprintf(stderr, "rfb_workload: cannot open display %s\n", getenv("DISPLAY") ? getenv("DISPLAY") : "(unset)");
        return 1;
    }
    int screen = DefaultScreen(d.dpy);
    d.root = RootWindow(d.dpy, screen);
    d.width = DisplayWidth(d.dpy, screen);
    d.height = DisplayHeight(d.dpy, screen);
    d.gc = XCreateGC(d.dpy, d.root, 0, NULL);
    d.font = XLoadQueryFont(d.dpy, "fixed");
    if (!d.font) {
        fprintf(stderr, "rfb_workload: no 'fixed' font on this X server\n");
        return 1;
    }
    XSetFont(d.dpy, d.gc, d.font->fid);

    int pw = strcmp(kind, "photo") == 0 ? d.width * 3 / 4 : d.width / 3;
    int ph = strcmp(kind, "photo") == 0 ? d.height * 3 / 4 : d.height / 2;
    d.photo_data = malloc((size_t)pw * ph * 4);
    d.photo = XCreateImage(d.dpy, DefaultVisual(d.dpy, screen), 24, ZPixmap, 0, d.photo_data, pw, ph, 32, 0);

    /* A neutral desktop to start from. */
    XSetForeground(d.dpy, d.gc, 0x4682B4);
    XFillRectangle(d.dpy, d.root, d.gc, 0, 0, d.width, d.height);
    XSync(d.dpy, False);

    int frames = (int)(seconds * fps);
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    for (int f = 0; f < frames; f++) {
        if (strcmp(kind, "text") == 0) {
            draw_text(&d, f, 0, 0, d.width, d.height);
        } else if (strcmp(kind, "photo") == 0) {
            paint_photo(&d, f, pw, ph);
            int x = (d.width - pw) / 2 + (int)(60 * sin(f * 0.1)), y = (d.height - ph) / 2 + (int)(40 * cos(f * 0.07));
            XSetForeground(d.dpy, d.gc, 0x4682B4);
            XFillRectangle(d.dpy, d.root, d.gc, 0, 0, d.width, d.height);
            XPutImage(d.dpy, d.root, d.gc, d.photo, 0, 0, x, y, pw, ph);
        } else if (strcmp(kind, "fill") == 0) {
            draw_fills(&d, 0, 0, d.width, d.height, 40);
        } else {
            draw_text(&d, f, 0, 0, d.width / 3, d.height);
            paint_photo(&d, f, pw, ph);
            XPutImage(d.dpy, d.root, d.gc, d.photo, 0, 0, d.width / 3 + (f * 5) % (d.width / 3), d.height / 4, pw, ph);
            draw_fills(&d, d.width * 2 / 3, 0, d.width / 3, d.height, 10);
        }
        XSync(d.dpy, False);
        deadline.tv_nsec += 1000000000L / fps;
        while (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_nsec -= 1000000000L;
            deadline.tv_sec += 1;
        }
        sleep_until(&deadline);
    }
    XCloseDisplay(d.dpy);
    return 0;
}
