"""scripts/bench punktfunk-client: what a user pays to watch a punktfunk/1 stream in farcast's window.

For each mode (1920x1080x60 and 3840x2160x60 unless PUNKTFUNK_CLIENT_MODES says otherwise), in the
namespace scripts/bench makes:
  * the stand-in host (scripts/punktfunk-host, Python) streams its numbered HEVC test pattern at
    50 Mbit/s with 20 % FEC, and `farcast punktfunk connect` (release build) shows it for SECONDS
    on an Xvfb of its own. Reported: frames presented vs frames the host sent (its own numbering),
    capture->present latency p50/p95 (host pts, skew-corrected with the clock offset, to the
    window's present), decode errors, and farcast's whole-process CPU (user+sys from wait4) per
    presented frame and per sent frame;
  * the peer in the same run: Debian's ffplay decodes and shows the same elementary stream (the
    file the host sends from) for the same number of frames on an Xvfb of its own; its
    whole-process CPU per shown frame (frames shown = frames played − what its -stats line says
    it dropped), with SDL's software renderer as farcast uses here. ffplay reads a file (no network, no FEC, no decryption): farcast's figure
    includes receiving the stream, so the ratio is what a user pays over playing a local file.
  * each display server's CPU over the same run (what showing the frames cost the X side).
Called by scripts/bench; do not run directly.
"""
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time

FARCAST, AS_JSON, WORK, SECONDS = sys.argv[1], sys.argv[2] == "1", sys.argv[3], float(sys.argv[4])
MODES = os.environ.get("PUNKTFUNK_CLIENT_MODES", "1920x1080x60 3840x2160x60").split()
BITRATE_KBPS = 50000
TICK = os.sysconf("SC_CLK_TCK")
sys.path.insert(0, "scripts/punktfunk-host")
import media  # noqa: E402  (the host's own pattern files and their names)


def say(text):
    if not AS_JSON:
        print(text, file=sys.stderr, flush=True)


def proc_cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def free_display(start):
    n = start
    while os.path.exists("/tmp/.X%d-lock" % n):
        n += 1
    return n


def xvfb(start, size):
    n = free_display(start)
    proc = subprocess.Popen(["Xvfb", ":%d" % n, "-screen", "0", "%sx24" % size, "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        if subprocess.run(["xdpyinfo"], env=dict(os.environ, DISPLAY=":%d" % n), capture_output=True).returncode == 0:
            return n, proc
        time.sleep(0.1)
    raise SystemExit("Xvfb :%d did not start" % n)


def timed(argv, env):
    """Runs argv to its end; (exit status, CPU seconds user+sys, wall seconds, stderr)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = []
    # stderr drained as it comes (ffplay's -stats line is rewritten many times a second).
    for chunk in iter(lambda: proc.stderr.read(65536), b""):
        err.append(chunk)
    _, status, usage = os.wait4(proc.pid, 0)
    return status, usage.ru_utime + usage.ru_stime, time.monotonic() - t0, b"".join(err).decode(errors="replace")


def run(mode):
    w, h, hz = (int(x) for x in mode.split("x"))
    say("%s: the stand-in's pattern at %d Mbit/s (encoded once into .media/punktfunk; 4K takes minutes)…" % (mode, BITRATE_KBPS // 1000))
    path = media.encode(os.path.abspath(".media/punktfunk"), w, h, hz, BITRATE_KBPS)
    state = tempfile.mkdtemp(dir=WORK)
    screen = "%dx%d" % (max(w, 1280) + 64, max(h, 720) + 64)
    ours_display, ours_x = xvfb(40, screen)
    theirs_display, theirs_x = xvfb(ours_display + 1, screen)
    try:
        host = subprocess.Popen(["scripts/punktfunk-host/run", "--port", "0", "--state-dir", state + "/host", "--mode", mode,
                                 "--fec", "20", "--bitrate-kbps", str(BITRATE_KBPS), "--log", state + "/events.jsonl"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        port = None
        while port is None:
            line = host.stdout.readline()
            if not line:
                raise SystemExit("stand-in host did not start")
            if line.startswith("listening "):
                port = line.rsplit(":", 1)[1].strip()
        say("%s: farcast punktfunk connect for %.0f s…" % (mode, SECONDS))
        stats_path = state + "/stats.json"
        env = dict(os.environ, XDG_STATE_HOME=state + "/client", DISPLAY=":%d" % ours_display)
        x0, host0 = proc_cpu(ours_x.pid), proc_cpu(host.pid)
        status, cpu, wall, err = timed([FARCAST, "punktfunk", "connect", "127.0.0.1:" + port, "--tofu", "--mode", mode,
                                        "--duration", str(SECONDS), "--stats-json", stats_path, "--audio-device", "none",
                                        "--quiet"], env)
        ours_xcpu, host_cpu = proc_cpu(ours_x.pid) - x0, proc_cpu(host.pid) - host0
        host.terminate()
        host.wait()
        if status != 0:
            raise SystemExit("farcast punktfunk connect failed: " + err)
        s = json.load(open(stats_path))

        frames = int(SECONDS * hz)
        say("%s: ffplay shows the same stream from its file, %d frames…" % (mode, frames))
        # SDL's software renderer, as farcast chooses on a machine without a GPU (ffplay would take
        # OpenGL on llvmpipe, which costs it more). A raw HEVC file cannot loop in ffplay (it cannot
        # seek): the pattern is repeated in a file instead (each copy starts at its IDR).
        env = dict(os.environ, DISPLAY=":%d" % theirs_display, SDL_AUDIODRIVER="dummy", SDL_RENDER_DRIVER="software")
        long_path = state + "/repeated.h265"
        with open(long_path, "wb") as out:
            data = open(path, "rb").read()
            for _ in range(math.ceil(SECONDS / media.SECONDS)):
                out.write(data)
        x0 = proc_cpu(theirs_x.pid)
        status, ffplay_cpu, ffplay_wall, err = timed(["ffplay", "-hide_banner", "-loglevel", "error", "-stats", "-autoexit", "-an",
                                                      "-framerate", str(hz), "-t", str(SECONDS), long_path], env)
        os.unlink(long_path)
        theirs_xcpu = proc_cpu(theirs_x.pid) - x0
        if status != 0:
            raise SystemExit("ffplay failed: " + err[-2000:])
        dropped = [int(m) for m in re.findall(r"fd=\s*(\d+)", err)]
        ffplay_shown = frames - (dropped[-1] if dropped else 0)
    finally:
        for p in (ours_x, theirs_x):
            p.terminate()
            p.wait()

    presented = s["frames_presented"]
    row = {
        "mode": mode, "bitrate_mbps": BITRATE_KBPS // 1000, "seconds": SECONDS,
        "farcast": {
            "frames_sent_by_host": s["frames_sent_by_host"], "frames_presented": presented,
            "frames_decoded": s["frames_decoded"], "frames_replaced": s["frames_replaced"], "decode_errors": s["decode_errors"],
            "capture_to_present_ms_p50": s["capture_to_present_ms_p50"], "capture_to_present_ms_p95": s["capture_to_present_ms_p95"],
            "capture_to_receipt_ms_p50": s["capture_to_receipt_ms_p50"], "decoder": s["decoder"], "renderer": s["renderer"],
            "cpu_seconds": round(cpu, 2), "cpu_ms_per_presented_frame": round(cpu * 1000 / max(1, presented), 2),
            "xvfb_cpu_seconds": round(ours_xcpu, 2), "host_cpu_seconds": round(host_cpu, 2),
        },
        "ffplay": {
            "frames_shown": ffplay_shown, "wall_seconds": round(ffplay_wall, 1), "cpu_seconds": round(ffplay_cpu, 2),
            "cpu_ms_per_shown_frame": round(ffplay_cpu * 1000 / max(1, ffplay_shown), 2), "xvfb_cpu_seconds": round(theirs_xcpu, 2),
        },
    }
    row["cpu_per_frame_ratio"] = round(row["farcast"]["cpu_ms_per_presented_frame"] / max(1e-9, row["ffplay"]["cpu_ms_per_shown_frame"]), 2)
    frame_ms = 1000 / hz
    row["goal"] = {
        "every_frame_presented": presented >= s["frames_sent_by_host"],
        "p95_under_two_frame_times": (s["capture_to_present_ms_p95"] or 1e9) < 2 * frame_ms,
        "cpu_per_frame_at_most_ffplay": row["cpu_per_frame_ratio"] <= 1.0,
    }
    return row


rows = [run(m) for m in MODES]
load = open("/proc/loadavg").read().split()[:3]
if AS_JSON:
    print(json.dumps({"runs": rows, "load": load}, indent=1))
else:
    print("punktfunk-client: %.0f s per mode, %d Mbit/s, stand-in host on loopback; load %s" % (SECONDS, BITRATE_KBPS // 1000, " ".join(load)))
    print("%-13s %9s %9s %9s %9s %11s %11s %7s %9s" % ("mode", "sent", "shown", "p50 ms", "p95 ms", "ms CPU/fr", "ffplay", "ratio", "ffplay fr"))
    for r in rows:
        f, p = r["farcast"], r["ffplay"]
        print("%-13s %9d %9d %9s %9s %11.2f %11.2f %6.2fx %9d" % (
            r["mode"], f["frames_sent_by_host"], f["frames_presented"],
            "%.1f" % f["capture_to_present_ms_p50"] if f["capture_to_present_ms_p50"] is not None else "-",
            "%.1f" % f["capture_to_present_ms_p95"] if f["capture_to_present_ms_p95"] is not None else "-",
            f["cpu_ms_per_presented_frame"], p["cpu_ms_per_shown_frame"], r["cpu_per_frame_ratio"], p["frames_shown"]))
        print("    decoder %s, renderer %s; Xvfb CPU %.1f s (ffplay's %.1f s); host CPU %.1f s; goals %s" % (
            f["decoder"], f["renderer"], f["xvfb_cpu_seconds"], p["xvfb_cpu_seconds"], f["host_cpu_seconds"], r["goal"]))
