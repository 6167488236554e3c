/*
 * x11_input_echo: an X client that reports the input it receives, so tests can check what a
 * VNC client's keys, clicks and wheel turns became on the server's display.
 *
 * It covers the screen with one window, takes the keyboard focus and prints one line per event
 * on stdout (flushed at once):
 *   ready                             the window is mapped and focused
 *   key KEYSYM HEX                    a key press: its keysym and the UTF-8 it types, in hex
 *                                     ("-" when it types nothing), as Xlib's input method
 *                                     converts it — independent of farcast's own tables
 *   keyup KEYSYM                      a key release (unshifted keysym of the key)
 *   button N X Y                      a button press at window coordinates
 *   release N                         a button release
 *
 * Build: gcc -O1 -o x11_input_echo x11_input_echo.c -lX11
 */
#include <X11/Xlib.h>
#include <X11/Xutil.h>
#include <X11/XKBlib.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
    setlocale(LC_ALL, "C.UTF-8");
    XSetLocaleModifiers("@im=none");
    /* Xlib's keyboard through the core protocol, not XKB. VNC servers add keysyms to the keymap
       on the fly, on keycodes that had none; Xlib's XKB side refreshes only the symbols named
       by a core MappingNotify, not the key's new group count, so the first such key pressed
       after a fresh server started read as NoSymbol about one run in four. The core keymap
       (what XRefreshKeyboardMapping reloads) has every added keysym. */
    XkbIgnoreExtension(True);
    Display *display = XOpenDisplay(NULL);
    if (!display) {
        fprintf(stderr, "x11_input_echo: cannot open display %s\n", getenv("DISPLAY") ? getenv("DISPLAY") : "(unset)");
        return 1;
    }
    int screen = DefaultScreen(display);
    Window window = XCreateSimpleWindow(display, RootWindow(display, screen), 0, 0, DisplayWidth(display, screen),
                                        DisplayHeight(display, screen), 0, 0, WhitePixel(display, screen));
    XSelectInput(display, window, KeyPressMask | KeyReleaseMask | ButtonPressMask | ButtonReleaseMask | StructureNotifyMask);
    XMapRaised(display, window);

    XIM im = XOpenIM(display, NULL, NULL, NULL);
    XIC ic = im ? XCreateIC(im, XNInputStyle, XIMPreeditNothing | XIMStatusNothing, XNClientWindow, window,
                            XNFocusWindow, window, NULL) : NULL;
    if (!ic) {
        fprintf(stderr, "x11_input_echo: no input context (locale C.UTF-8 missing?)\n");
        return 1;
    }

    for (;;) {
        XEvent event;
        XNextEvent(display, &event);
        if (XFilterEvent(&event, None)) continue;
        switch (event.type) {
        case MappingNotify:
            /* VNC servers add keysyms to the keymap on the fly: fetch the new mapping. */
            XRefreshKeyboardMapping(&event.xmapping);
            break;
        case MapNotify:
            XSetInputFocus(display, window, RevertToParent, CurrentTime);
            XSync(display, False);
            printf("ready\n");
            break;
        case KeyPress: {
            char text[64];
            KeySym keysym = NoSymbol;
            Status status;
            int n = Xutf8LookupString(ic, &event.xkey, text, sizeof text - 1, &keysym, &status);
            printf("key 0x%lx ", (unsigned long)keysym);
            if (n <= 0 || (status != XLookupChars && status != XLookupBoth)) {
                printf("-");
            } else {
                for (int i = 0; i < n; i++) printf("%02x", (unsigned char)text[i]);
            }
            printf("\n");
            break;
        }
        case KeyRelease:
            printf("keyup 0x%lx\n", (unsigned long)XLookupKeysym(&event.xkey, 0));
            break;
        case ButtonPress:
            printf("button %u %d %d\n", event.xbutton.button, event.xbutton.x, event.xbutton.y);
            break;
        case ButtonRelease:
            printf("release %u\n", event.xbutton.button);
            break;
        }
        fflush(stdout);
    }
}
