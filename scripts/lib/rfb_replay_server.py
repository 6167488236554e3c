#!/usr/bin/env python3
"""Serves a Farcast RFB capture to one client, as a replay server for any VNC client.

Listens on 127.0.0.1:PORT, accepts one connection, writes the capture's server stream verbatim
while reading and discarding what the client sends, then half-closes (shutdown(SHUT_WR)) and
waits for the client to close: closing outright would let the kernel reset the connection and
drop the stream's unread tail at the client.

Usage: rfb_replay_server.py CAPTURE PORT
"""
import socket
import sys
import threading


def stream_of(path):
    data = open(path, "rb").read()
    if not data.startswith(b"FARCAST-RFB-CAPTURE 1\n"):
        sys.exit(f"{path}: not a Farcast RFB capture")
    first = data.index(b"\n") + 1
    return data[data.index(b"\n", first) + 1:]


def main():
    stream = stream_of(sys.argv[1])
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", int(sys.argv[2])))
    listener.listen(1)
    print("ready", flush=True)
    connection, _ = listener.accept()

    def drain():
        try:
            while connection.recv(65536):
                pass
        except OSError:
            pass

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    connection.sendall(stream)
    connection.shutdown(socket.SHUT_WR)
    reader.join(timeout=60)
    connection.close()


if __name__ == "__main__":
    main()
