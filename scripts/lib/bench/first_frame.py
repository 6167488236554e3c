#!/usr/bin/env python3
"""Time from starting a command to the moment the mpv it runs has its first frame ready.

    first_frame.py COMMAND [ARG…]

Any ARG containing {fifo} or {script} has them replaced by a FIFO this harness waits on and by
first_frame.lua beside it, which mpv loads (`--script={script}
--script-opts=first_frame-fifo={fifo}` for mpv itself; through `--mpv-option` for farcast). The
clock starts just before the process is spawned and stops when the script writes into the FIFO
(mpv's first playback-restart), so the same moment is measured however mpv was started and
whatever happens after (shutdown, reports) is not. Prints `FIRST_FRAME_MS WALL_MS`, the second
to the command's exit, for reference. Exits non-zero if the command fails or no frame comes in
20 s. Standard library only; called by scripts/lib/bench/jellyfin_download.sh."""
import os, select, subprocess, sys, tempfile, time

folder = tempfile.mkdtemp(prefix="farcast-first-frame-")
fifo = os.path.join(folder, "ready")
os.mkfifo(fifo)
script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "first_frame.lua")
command = [a.replace("{fifo}", fifo).replace("{script}", script) for a in sys.argv[1:]]
# Opened before the command starts (non-blocking, so no writer is needed yet); a second,
# write-side descriptor of our own keeps the FIFO from reading as ended before mpv writes.
reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
keeper = os.open(fifo, os.O_WRONLY)
start = time.monotonic()
child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
first = None
deadline = start + 20
while first is None and time.monotonic() < deadline:
    ready, _, _ = select.select([reader], [], [], 0.05)
    if ready and os.read(reader, 64):
        first = time.monotonic()
    elif child.poll() is not None and not select.select([reader], [], [], 0)[0]:
        break
_, err = child.communicate(timeout=30)
end = time.monotonic()
os.close(keeper); os.close(reader); os.unlink(fifo); os.rmdir(folder)
if child.returncode != 0:
    sys.exit(f"first_frame.py: {command[0]} exited {child.returncode}: {err.decode(errors='replace').strip()}")
if first is None:
    sys.exit(f"first_frame.py: mpv under {command[0]} never had a first frame (did it load {script}?)")
print(f"{(first - start) * 1000:.1f} {(end - start) * 1000:.1f}")
