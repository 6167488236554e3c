#!/usr/bin/env bash
# farcast's viewer window beside TigerVNC's vncviewer (Debian tigervnc-viewer 1.12), watching the
# same Xvnc at the same time. Called by scripts/bench; do not run directly.
#   1. Xvnc 1920x1080 on 127.0.0.1; two Xvfb 2048x1200 (no window manager), one per viewer
#   2. per phase (Tight lossless; Tight JPEG quality 6), both viewers connect at 1:1, then for
#      SECONDS the deterministic workload draws (text, photos, fills, mixed; 20 fps) while
#      scripts/lib/bench/viewer_probe.c measures from outside, the same way for both:
#      - frames presented: XDamage on each viewer's screen (notifications < 4 ms apart = 1 frame)
#      - latency: a 32x32 probe square on the server changes colour every 200 ms; the time from
#        the server having it to the viewer's screen showing it, per change
#      - CPU: user + system seconds of the viewer process over the same window (/proc), and of
#        its own Xvfb (what showing its frames cost the display side), reported beside it
set -euo pipefail
FARCAST=$1 JSON=$2 WORK=$3 SECONDS_PER=${SECONDS_PER:-20}
say() { [ "$JSON" = 1 ] || echo "$*" >&2; }

command -v vncviewer >/dev/null || { echo "scripts/bench viewer: TigerVNC's vncviewer is missing (apt install tigervnc-viewer; scripts/setup installs it)" >&2; exit 1; }
gcc -O2 -o "$WORK/rfb_workload" scripts/lib/bench/rfb_workload.c -lX11 -lm
gcc -O2 -o "$WORK/viewer_probe" scripts/lib/bench/viewer_probe.c -lX11 -lXdamage -lXfixes

free_display() { local n=$1; while [ -e "/tmp/.X$n-lock" ]; do n=$((n + 1)); done; echo "$n"; }
wait_port() { for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 never opened" >&2; return 1; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

XVNC=$(free_display 70)
Xvnc ":$XVNC" -rfbport $((5900 + XVNC)) -localhost -interface 127.0.0.1 -SecurityTypes None -AlwaysShared \
     -geometry 1920x1080 -depth 24 -nolisten tcp > "$WORK/xvnc.log" 2>&1 &
PIDS+=($!)
OURS=$(free_display $((XVNC + 1)))
Xvfb ":$OURS" -screen 0 2048x1200x24 -nolisten tcp > "$WORK/xvfb-ours.log" 2>&1 &
XVFB_OURS=$!
PIDS+=($XVFB_OURS)
sleep 0.5
THEIRS=$(free_display $((OURS + 1)))
Xvfb ":$THEIRS" -screen 0 2048x1200x24 -nolisten tcp > "$WORK/xvfb-theirs.log" 2>&1 &
XVFB_THEIRS=$!
PIDS+=($XVFB_THEIRS)
PORT=$((5900 + XVNC))
wait_port "$PORT"
sleep 1
TICK=$(getconf CLK_TCK)

# phase name, farcast options, vncviewer options
run_phase() {
  local name=$1 ours_opts=$2 theirs_opts=$3
  local total=$((SECONDS_PER + 120))
  say "phase $name: both viewers watch ${SECONDS_PER} s of text, photos, fills and a mixed desktop…"
  DISPLAY=":$XVNC" "$WORK/viewer_probe" probe "$total" 1860 20 > "$WORK/$name.probe" &
  local probe=$!
  # shellcheck disable=SC2086
  DISPLAY=":$OURS" "$FARCAST" vnc view "127.0.0.1::$PORT" --security none --scale 1:1 --no-clipboard --json --duration "$total" $ours_opts \
      > "$WORK/$name.ours.json" 2> "$WORK/$name.ours.log" &
  local ours=$!
  # shellcheck disable=SC2086
  DISPLAY=":$THEIRS" vncviewer "127.0.0.1::$PORT" -SecurityTypes None -Shared -AcceptClipboard=0 -SendClipboard=0 -SetPrimary=0 $theirs_opts \
      > "$WORK/$name.theirs.log" 2>&1 &
  local theirs=$!
  PIDS+=($probe $ours $theirs)
  sleep 5
  DISPLAY=":$OURS" "$WORK/viewer_probe" watch "$SECONDS_PER" > "$WORK/$name.ours.watch" &
  local w1=$!
  DISPLAY=":$THEIRS" "$WORK/viewer_probe" watch "$SECONDS_PER" > "$WORK/$name.theirs.watch" &
  local w2=$!
  local ours0 theirs0 ours1 theirs1 xours0 xtheirs0 xours1 xtheirs1
  ours0=$(cpu_ticks "$ours"); theirs0=$(cpu_ticks "$theirs")
  xours0=$(cpu_ticks "$XVFB_OURS"); xtheirs0=$(cpu_ticks "$XVFB_THEIRS")
  # The workload paces itself by frames; on a busy machine it runs late, so the window is the
  # watchers' SECONDS_PER and whatever is still drawing then is stopped.
  local quarter=$((SECONDS_PER / 4))
  ( for kind in text photo fill mixed; do DISPLAY=":$XVNC" "$WORK/rfb_workload" "$kind" "$quarter" 20; done ) &
  local workload=$!
  wait "$w1" "$w2"
  ours1=$(cpu_ticks "$ours"); theirs1=$(cpu_ticks "$theirs")
  xours1=$(cpu_ticks "$XVFB_OURS"); xtheirs1=$(cpu_ticks "$XVFB_THEIRS")
  pkill -P "$workload" 2>/dev/null || true
  kill "$workload" 2>/dev/null || true
  kill "$theirs" "$probe" 2>/dev/null || true
  kill -TERM "$ours" 2>/dev/null || true
  wait "$ours" "$theirs" "$probe" "$workload" 2>/dev/null || true
  echo "$(( ours1 - ours0 )) $(( theirs1 - theirs0 )) $TICK $(( xours1 - xours0 )) $(( xtheirs1 - xtheirs0 ))" > "$WORK/$name.cpu"
}

run_phase lossless "--encodings tight --quality auto" "-AutoSelect=0 -PreferredEncoding=Tight -FullColor -NoJPEG -CompressLevel=2"
run_phase jpeg6 "--encodings tight --quality 6" "-AutoSelect=0 -PreferredEncoding=Tight -FullColor -QualityLevel=6 -CompressLevel=2"

LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$WORK" "$JSON" "$SECONDS_PER" "$LOAD" <<'PY'
import json, statistics, sys
work, as_json, seconds, load = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3]), sys.argv[4]

def watch(path):
    seen, out = {}, {}
    for line in open(path):
        f = line.split()
        if f[0] == "seen": seen.setdefault(int(f[1]), int(f[2]))
        elif len(f) == 2: out[f[0]] = int(f[1])
    return seen, out

def quantile(values, q):
    if not values: return None
    v = sorted(values)
    return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))]

phases = []
for name in ("lossless", "jpeg6"):
    probes = {}
    for line in open(f"{work}/{name}.probe"):
        f = line.split()
        probes[int(f[1])] = int(f[2])
    ours_ticks, theirs_ticks, tick, xours_ticks, xtheirs_ticks = map(int, open(f"{work}/{name}.cpu").read().split())
    row = {"phase": name, "seconds": seconds}
    for who, ticks, xticks in (("farcast", ours_ticks, xours_ticks), ("tigervnc", theirs_ticks, xtheirs_ticks)):
        seen, counts = watch(f"{work}/{name}.{'ours' if who == 'farcast' else 'theirs'}.watch")
        lat = [(t - probes[s]) / 1e6 for s, t in seen.items() if s in probes and t >= probes[s]]
        cpu = ticks / tick
        frames = counts.get("frames", 0)
        row[who] = {
            "cpu_seconds": round(cpu, 2), "frames": frames,
            "cpu_ms_per_frame": round(cpu * 1000 / frames, 2) if frames else None,
            "latency_p50_ms": round(quantile(lat, 0.5), 1) if lat else None,
            "latency_p95_ms": round(quantile(lat, 0.95), 1) if lat else None,
            "probe_changes_seen": len(lat), "probe_found": bool(counts.get("probe_found", 0)),
            # The viewer's own X server (each viewer has one), over the same window: what
            # putting its frames on the screen cost the display side.
            "display_server_cpu_seconds": round(xticks / tick, 2),
        }
    try:
        row["farcast_report"] = json.load(open(f"{work}/{name}.ours.json"))
    except Exception:
        row["farcast_report"] = None
    o, t = row["farcast"], row["tigervnc"]
    row["cpu_per_frame_ratio"] = round(o["cpu_ms_per_frame"] / t["cpu_ms_per_frame"], 2) if o["cpu_ms_per_frame"] and t["cpu_ms_per_frame"] else None
    row["frames_ratio"] = round(o["frames"] / t["frames"], 2) if t["frames"] else None
    both = lambda v: v["cpu_seconds"] + v["display_server_cpu_seconds"]
    row["with_display_server_cpu_per_frame_ratio"] = (round((both(o) / o["frames"]) / (both(t) / t["frames"]), 2)
                                                      if o["frames"] and t["frames"] and both(t) else None)
    phases.append(row)

if as_json:
    print(json.dumps({"load_average": load, "phases": phases}))
else:
    print(f"viewer window vs TigerVNC vncviewer 1.12, Xvnc 1920x1080, {seconds} s of workload per phase (load average {load})")
    print(f"{'phase':<10}{'viewer':<10}{'CPU s':>7}{'frames':>8}{'CPU ms/frame':>14}{'p50 ms':>8}{'p95 ms':>8}{'probe seen':>12}{'its Xvfb CPU s':>16}")
    for r in phases:
        for who in ("farcast", "tigervnc"):
            v = r[who]
            fmt = lambda x: "–" if x is None else x
            print(f"{r['phase']:<10}{who:<10}{v['cpu_seconds']:>7}{v['frames']:>8}{fmt(v['cpu_ms_per_frame']):>14}"
                  f"{fmt(v['latency_p50_ms']):>8}{fmt(v['latency_p95_ms']):>8}{v['probe_changes_seen']:>12}{v['display_server_cpu_seconds']:>16}")
        print(f"{'':<10}farcast/TigerVNC: CPU per frame {r['cpu_per_frame_ratio']}×, frames {r['frames_ratio']}×; "
              f"with each one's display server: {r['with_display_server_cpu_per_frame_ratio']}× per frame")
        rep = r["farcast_report"]
        if rep:
            print(f"{'':<10}farcast's own view: {rep.get('frames_presented')} presents of {rep.get('updates')} updates, "
                  f"update→present p50 {rep.get('latency_p50_milliseconds') and round(rep['latency_p50_milliseconds'], 1)} ms, "
                  f"quality {rep.get('quality')}, renderer {rep.get('renderer')}")
PY
