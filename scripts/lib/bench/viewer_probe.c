/*
 * The two ends of `scripts/bench viewer`'s outside measurement, the same for every viewer.
 *
 *   viewer_probe probe SECONDS X Y     on the VNC server's display: a 32x32 override-redirect
 *                                      window at (X, Y) above the workload, refilled every 200 ms
 *                                      with a new solid colour 0xC0GGBB (GGBB = sequence number);
 *                                      prints "probe SEQ NANOSECONDS" once the server has it
 *   viewer_probe watch SECONDS         on a viewer's display: counts presented frames from XDamage
 *                                      on the root window (notifications closer than 4 ms are one
 *                                      frame), finds the probe square on the screen, and prints
 *                                      "seen SEQ NANOSECONDS" the first time each colour shows;
 *                                      at the end "frames N" and "damage_events N"
 *
 * Times are CLOCK_MONOTONIC, so probe and watchers on one machine line up.
 * Build: gcc -O2 -o viewer_probe viewer_probe.c -lX11 -lXdamage -lXfixes
 */
#include <X11/Xlib.h>
#include <X11/Xutil.h>
#include <X11/extensions/Xdamage.h>
#include <X11/extensions/Xfixes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static Display *open_display(void) {
    Display *d = XOpenDisplay(NULL);
    if (!d) {
        fprintf(stderr, "viewer_probe: cannot open display %s\n", getenv("DISPLAY") ? getenv("DISPLAY") : "(unset)");
        exit(1);
    }
    return d;
}

static int probe(double seconds, int x, int y) {
    Display *d = open_display();
    int screen = DefaultScreen(d);
    XSetWindowAttributes a;
    a.override_redirect = True;
    a.background_pixel = 0xC00000;
    Window w = XCreateWindow(d, RootWindow(d, screen), x, y, 32, 32, 0, CopyFromParent, InputOutput, CopyFromParent,
                             CWOverrideRedirect | CWBackPixel, &a);
    XMapRaised(d, w);
    GC gc = XCreateGC(d, w, 0, NULL);
    int64_t end = now_ns() + (int64_t)(seconds * 1e9);
    for (unsigned seq = 0; now_ns() < end; seq++) {
        XRaiseWindow(d, w);
        XSetForeground(d, gc, 0xC00000 | (seq & 0xFFFF));
        XFillRectangle(d, w, gc, 0, 0, 32, 32);
        XSync(d, False);
        printf("probe %u %lld\n", seq, (long long)now_ns());
        fflush(stdout);
        struct timespec pause = {0, 200000000};
        nanosleep(&pause, NULL);
    }
    return 0;
}

/* The probe's first colour as a 32x32 block on the root window: where the viewer shows it. */
static int find_probe(Display *d, Window root, int width, int height, int *px, int *py) {
    XImage *img = XGetImage(d, root, 0, 0, width, height, AllPlanes, ZPixmap);
    if (!img) return 0;
    int found = 0;
    for (int y = 0; y + 31 < height && !found; y++) {
        for (int x = 0; x + 31 < width; x++) {
            unsigned long p = XGetPixel(img, x, y) & 0xFFFFFF;
            if ((p & 0xFF0000) != 0xC00000) continue;
            if ((XGetPixel(img, x + 31, y + 31) & 0xFFFFFF) != p || (XGetPixel(img, x + 16, y + 16) & 0xFFFFFF) != p) continue;
            if (x > 0 && (XGetPixel(img, x - 1, y + 16) & 0xFFFFFF) == p) continue;
            if (y > 0 && (XGetPixel(img, x + 16, y - 1) & 0xFFFFFF) == p) continue;
            *px = x + 16;
            *py = y + 16;
            found = 1;
            break;
        }
    }
    XDestroyImage(img);
    return found;
}

static int watch(double seconds) {
    Display *d = open_display();
    int screen = DefaultScreen(d);
    Window root = RootWindow(d, screen);
    int width = DisplayWidth(d, screen), height = DisplayHeight(d, screen);
    int event_base, error_base;
    if (!XDamageQueryExtension(d, &event_base, &error_base)) {
        fprintf(stderr, "viewer_probe: the X server has no DAMAGE extension\n");
        return 1;
    }
    Damage damage = XDamageCreate(d, root, XDamageReportNonEmpty);
    XSync(d, False);
    int px = -1, py = -1;
    long frames = 0, events = 0;
    int64_t last_damage = 0;
    unsigned long last_colour = 0xFFFFFFFF;
    int64_t start = now_ns(), end = start + (int64_t)(seconds * 1e9);
    int64_t next_search = start;
    int fd = ConnectionNumber(d);
    while (now_ns() < end) {
        if (px < 0 && now_ns() >= next_search) {
            find_probe(d, root, width, height, &px, &py);
            next_search = now_ns() + 100000000;
        }
        if (!XPending(d)) {
            fd_set fds;
            FD_ZERO(&fds);
            FD_SET(fd, &fds);
            struct timeval tv = {0, 20000};
            select(fd + 1, &fds, NULL, NULL, &tv);
            continue;
        }
        XEvent e;
        XNextEvent(d, &e);
        if (e.type != event_base + XDamageNotify) continue;
        int64_t t = now_ns();
        events++;
        if (t - last_damage >= 4000000) frames++;
        last_damage = t;
        XDamageSubtract(d, damage, None, None);
        if (px >= 0) {
            XImage *one = XGetImage(d, root, px, py, 1, 1, AllPlanes, ZPixmap);
            if (one) {
                unsigned long c = XGetPixel(one, 0, 0) & 0xFFFFFF;
                XDestroyImage(one);
                if (c != last_colour && (c & 0xFF0000) == 0xC00000) {
                    printf("seen %lu %lld\n", c & 0xFFFF, (long long)t);
                    last_colour = c;
                }
            }
        }
    }
    printf("frames %ld\ndamage_events %ld\nprobe_found %d\n", frames, events, px >= 0);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 5 && strcmp(argv[1], "probe") == 0) return probe(atof(argv[2]), atoi(argv[3]), atoi(argv[4]));
    if (argc >= 3 && strcmp(argv[1], "watch") == 0) return watch(atof(argv[2]));
    fprintf(stderr, "usage: viewer_probe probe SECONDS X Y | viewer_probe watch SECONDS\n");
    return 2;
}
