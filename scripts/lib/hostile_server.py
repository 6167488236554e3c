#!/usr/bin/env python3
"""A misbehaving server for fault-injection tests: accepts TCP connections on 127.0.0.1 and
behaves badly in one chosen way, so a test can check that farcast ends in bounded time with the
right exit code and a one-line message naming the cause.

    hostile_server.py --port PORT --mode MODE

Modes (any protocol):
  silent              accept, read, never answer
  garbage             answer with random bytes, then stay silent
  http                answer like a web server: wait for a request line, reply 404
  ssh                 send an SSH banner first, as sshd does
  close               accept and close at once
  slowloris           send the RFB banner one byte per second, then stay silent
RFB:
  rfb-banner-silent   send "RFB 003.008\\n", then nothing
  rfb-banner-unasked  as rfb-banner-silent, but a client that speaks within 0.2 s gets no
                      banner and no answer (what an HTTP client sees when it loses the
                      banner that arrived before its request)
  rfb-close-mid       send the banner, read the client's version, close
  rfb-none-close-mid-stream
                      complete a handshake with security None and a 64x64 ServerInit, send half a
                      FramebufferUpdate, then close
  rfb-empty-updates   complete a handshake with security None and a 0x0 ServerInit, then send empty
                      FramebufferUpdates (no rectangles) as fast as the socket takes them, never
                      reading what the client sends
  rfb-reason-garbage  offer no security types with a reason length of 1970170232 bytes (what
                      x11vnc -unixpw sends on a failure)
  rfb-flood-at-prompt offer VNC authentication, send the challenge, then 64 MiB of zeros while
                      the client is still getting the password, printing "sent N MiB" after each
  rfb-resize-forwarded
                      a 64x64 desktop with ExtendedDesktopSize that answers SetDesktopSize with
                      status 4 ("forwarded") and makes the change 0.5 s later
  rfb-resize-forwarded-never
                      the same, but the forwarded change never comes
WebSocket (Sendspin):
  ws-silent-upgrade   read the HTTP upgrade request, never answer
  ws-404              answer the upgrade with 404 Not Found
  ws-no-init-answer   complete the WebSocket upgrade, read client/init, never answer

Prints "ready" once it accepts connections. Stops on SIGTERM/SIGINT.
"""
import argparse
import base64
import hashlib
import os
import select
import signal
import socket
import struct
import sys
import threading
import time

WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def read_http_head(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            return None
        data += chunk
        if len(data) > 65536:
            return None
    return data


def hold(conn):
    """Reads and discards until the peer closes: a silent server."""
    try:
        while conn.recv(65536):
            pass
    except OSError:
        pass


def rfb_none_handshake(conn, width, height):
    """An RFB 3.8 handshake with security None, ending with a ServerInit of the given size."""
    conn.sendall(b"RFB 003.008\n")
    conn.recv(12)
    conn.sendall(bytes([1, 1]))            # one security type: None
    conn.recv(1)
    conn.sendall(struct.pack(">I", 0))     # SecurityResult OK
    conn.recv(1)                           # ClientInit
    pixel_format = struct.pack(">BBBBHHHBBB3x", 32, 24, 0, 1, 255, 255, 255, 16, 8, 0)
    name = b"hostile"
    conn.sendall(struct.pack(">HH", width, height) + pixel_format + struct.pack(">I", len(name)) + name)


def extended_desktop_size(reason, status, width, height):
    """One ExtendedDesktopSize rectangle (x: reason, y: status) with a single screen."""
    return (struct.pack(">HHHHi", reason, status, width, height, -308) + struct.pack(">B3x", 1)
            + struct.pack(">IHHHHI", 1, 0, 0, width, height, 0))


def serve_resizable(conn, change_comes):
    """A 64x64 desktop that knows ExtendedDesktopSize: SetDesktopSize gets status 4, and the
    change itself follows 0.5 s later when `change_comes`. A full update request gets the whole
    screen in Raw; other client messages are read past."""
    width, height = 64, 64
    rfb_none_handshake(conn, width, height)
    lock = threading.Lock()

    def send_update(rects):
        with lock:
            conn.sendall(struct.pack(">BxH", 0, len(rects)) + b"".join(rects))

    def raw(w, h):
        return struct.pack(">HHHHi", 0, 0, w, h, 0) + bytes(w * h * 4)

    send_update([extended_desktop_size(0, 0, width, height)])
    stream = conn.makefile("rb")

    def read(n):
        data = stream.read(n)
        if len(data) < n:
            raise OSError("client closed")
        return data

    while True:
        kind = read(1)[0]
        if kind == 0:
            read(19)
        elif kind == 2:
            count = struct.unpack(">xH", read(3))[0]
            read(4 * count)
        elif kind == 3:
            incremental = read(9)[0]
            if not incremental:  # nothing ever changes on its own: incremental requests wait
                send_update([raw(width, height)])
        elif kind == 4:
            read(7)
        elif kind == 5:
            read(5)
        elif kind == 6:
            length = struct.unpack(">3xi", read(7))[0]
            read(abs(length))
        elif kind == 150:
            read(9)
        elif kind == 248:
            read(7)
            read(read(1)[0])
        elif kind == 251:
            w, h, screens = struct.unpack(">xHHBx", read(7))
            read(16 * screens)
            send_update([extended_desktop_size(1, 4, width, height)])
            if change_comes:
                def later(w=w, h=h):
                    nonlocal width, height
                    time.sleep(0.5)
                    width, height = w, h
                    send_update([extended_desktop_size(0, 0, w, h), raw(w, h)])
                threading.Thread(target=later, daemon=True).start()
        else:
            raise OSError(f"client message type {kind}")


def handle(conn, mode):
    try:
        if mode == "silent":
            hold(conn)
        elif mode == "garbage":
            conn.sendall(os.urandom(4096))
            hold(conn)
        elif mode == "http":
            conn.settimeout(30)
            read_http_head(conn)
            conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot found")
        elif mode == "ssh":
            conn.sendall(b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n")
            hold(conn)
        elif mode == "close":
            pass
        elif mode == "slowloris":
            for b in b"RFB 003.008\n":
                conn.sendall(bytes([b]))
                time.sleep(1)
            hold(conn)
        elif mode == "rfb-banner-silent":
            conn.sendall(b"RFB 003.008\n")
            hold(conn)
        elif mode == "rfb-banner-unasked":
            readable, _, _ = select.select([conn], [], [], 0.2)
            if not readable:
                conn.sendall(b"RFB 003.008\n")
            hold(conn)
        elif mode == "rfb-close-mid":
            conn.sendall(b"RFB 003.008\n")
            conn.recv(12)
        elif mode == "rfb-none-close-mid-stream":
            rfb_none_handshake(conn, 64, 64)
            time.sleep(0.3)
            # FramebufferUpdate: one 64x64 Raw rectangle, of which only half the pixels come.
            conn.sendall(struct.pack(">BxH", 0, 1) + struct.pack(">HHHHi", 0, 0, 64, 64, 0) + bytes(64 * 32 * 4))
            time.sleep(0.3)
        elif mode == "rfb-flood-at-prompt":
            conn.sendall(b"RFB 003.008\n")
            conn.recv(12)
            conn.sendall(bytes([1, 2]))            # one security type: VNC authentication
            conn.recv(1)
            conn.sendall(os.urandom(16))           # the challenge
            chunk = bytes(1 << 20)
            for sent in range(1, 65):
                conn.sendall(chunk)
                print(f"sent {sent} MiB", flush=True)   # how far the client let it get
            hold(conn)
        elif mode == "rfb-empty-updates":
            rfb_none_handshake(conn, 0, 0)
            chunk = struct.pack(">BxH", 0, 0) * (1 << 16)
            while True:
                conn.sendall(chunk)
        elif mode in ("rfb-resize-forwarded", "rfb-resize-forwarded-never"):
            serve_resizable(conn, mode == "rfb-resize-forwarded")
        elif mode == "rfb-reason-garbage":
            conn.sendall(b"RFB 003.008\n")
            conn.recv(12)
            conn.sendall(bytes([0]) + b"unix")     # count 0, then "unix" read as a 4-byte length
            time.sleep(0.5)
        elif mode in ("ws-silent-upgrade", "ws-404", "ws-no-init-answer"):
            conn.settimeout(30)
            head = read_http_head(conn)
            if head is None or mode == "ws-silent-upgrade":
                hold(conn)
                return
            if mode == "ws-404":
                conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            key = b""
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"sec-websocket-key:"):
                    key = line.split(b":", 1)[1].strip()
            accept = base64.b64encode(hashlib.sha1(key + WS_GUID).digest())
            conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n")
            conn.settimeout(None)
            hold(conn)
        else:
            raise SystemExit(f"unknown mode {mode}")
    except OSError:
        pass
    finally:
        try:
            conn.close()
        except OSError:
            pass


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mode", required=True)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, lambda *_: os._exit(0))
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", args.port))
    listener.listen(16)
    print("ready", flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=handle, args=(conn, args.mode), daemon=True).start()


if __name__ == "__main__":
    main()
