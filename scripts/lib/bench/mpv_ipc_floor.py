#!/usr/bin/env python3
"""The floor for `farcast jellyfin play`'s start: mpv started as farcast starts it (paused, with a
JSON IPC socket), unpaused when it reports the file ready (playback-restart), until it reports the
end of the file after its first frame (--frames=1) — where farcast, too, stops waiting for mpv
(it reports Stopped and exits; mpv's own shutdown is not waited for) — the same player work
without the server's negotiation.

    mpv_ipc_floor.py URL

Standard library only. Called by scripts/lib/bench/jellyfin_download.sh."""
import json, os, socket, subprocess, sys, tempfile, time

url = sys.argv[1]
folder = tempfile.mkdtemp(prefix="farcast-mpv-floor-")
path = os.path.join(folder, "ipc")
mpv = subprocess.Popen(["mpv", "--idle=no", "--pause", f"--input-ipc-server={path}", "--no-input-terminal",
                        "--msg-level=all=error", "--start=0.000", "--vo=null", "--ao=null", "--frames=1", "--", url],
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
sock = socket.socket(socket.AF_UNIX)
deadline = time.monotonic() + 10
while True:
    try:
        sock.connect(path)
        break
    except OSError:
        if time.monotonic() > deadline or mpv.poll() is not None:
            sys.exit("mpv made no IPC socket")
        time.sleep(0.02)
pending = b""
done = False
while not done:
    data = sock.recv(65536)
    if not data:
        break
    pending += data
    *lines, pending = pending.split(b"\n")
    for line in lines:
        event = json.loads(line).get("event")
        if event == "playback-restart":
            sock.sendall(b'{"command":["set_property","pause",false]}\n')
        elif event == "end-file":
            done = True
mpv.terminate()
