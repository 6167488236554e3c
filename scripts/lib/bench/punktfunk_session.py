"""scripts/bench punktfunk: what a user pays to receive punktfunk/1 video with farcast.

For each rate (50, 200, 1000 Mbit/s) one run on loopback, in the namespace scripts/bench makes:
the stand-in host (scripts/punktfunk-host, Python) streams filler access units at that rate at
1920x1080x60 with 20 % FEC, sealed and packetized by the host's rules, and
`farcast punktfunk receive` (release build) takes them for N seconds. Reported per run:
  * capture->receipt latency p50/p95/p99 (host CLOCK_REALTIME pts -> completed AU, same clock);
  * farcast's whole-process CPU seconds (user+sys from wait4) per received Gbit, and its share
    of one core;
  * the peer's figure from the same run: the stand-in host's CPU per sent Gbit (from /proc), and
    the rate it actually managed (a Python host may not reach the target; the received rate is
    what the receiver was measured at).
Called by scripts/bench; do not run directly.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

FARCAST, AS_JSON, WORK, SECONDS = sys.argv[1], sys.argv[2] == "1", sys.argv[3], float(sys.argv[4])
RATES = [50, 200, 1000]
TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def run(rate):
    state = tempfile.mkdtemp(dir=WORK)
    host = subprocess.Popen(["scripts/punktfunk-host/run", "--port", "0", "--state-dir", state + "/host",
                             "--mode", "1920x1080x60", "--fec", "20", "--filler-mbps", str(rate)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    port = None
    while port is None:
        line = host.stdout.readline()
        if not line:
            raise SystemExit("stand-in host did not start")
        if line.startswith("listening "):
            port = line.rsplit(":", 1)[1].strip()
    stats = state + "/stats.json"
    env = dict(os.environ, XDG_STATE_HOME=state + "/client")
    host_cpu0 = proc_cpu(host.pid)
    t0 = time.monotonic()
    client = subprocess.Popen([FARCAST, "punktfunk", "receive", "127.0.0.1:" + port, "--tofu", "--duration", str(SECONDS),
                               "--mode", "1920x1080x60", "--stats-json", stats, "--quiet"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(client.pid, 0)
    wall = time.monotonic() - t0
    host_cpu = proc_cpu(host.pid) - host_cpu0
    host.terminate()
    host.wait()
    if status != 0:
        raise SystemExit("farcast receive failed: " + client.stderr.read().decode())
    s = json.load(open(stats))
    gbit = s["bytes"] * 8 / 1e9
    cpu = usage.ru_utime + usage.ru_stime
    lat = s["latency_us"]
    return {
        "target_mbps": rate,
        "received_mbps": round(s["goodput_mbps"], 1),
        "access_units": s["access_units"],
        "unrecoverable_frames": s["unrecoverable_frames"],
        "latency_p50_us": lat["p50"], "latency_p95_us": lat["p95"], "latency_p99_us": lat["p99"],
        "farcast_cpu_s": round(cpu, 3),
        "farcast_cpu_s_per_gbit": round(cpu / gbit, 3) if gbit else None,
        "farcast_core_share": round(cpu / wall, 3),
        "host_cpu_s_per_gbit": round(host_cpu / gbit, 3) if gbit else None,
        "host_core_share": round(host_cpu / wall, 3),
        "seconds": round(wall, 2),
    }


rows = [run(r) for r in RATES]
load = os.getloadavg()
if AS_JSON:
    print(json.dumps({"runs": rows, "loadavg": [round(x, 2) for x in load]}, sort_keys=True))
else:
    print("punktfunk receive, stand-in host on loopback, 1920x1080x60 filler, 20 %% FEC, %g s per rate (load %.2f)" % (SECONDS, load[0]))
    print("%8s %9s %6s %6s %9s %9s %9s %12s %8s %12s %8s" % ("target", "received", "AUs", "lost", "p50 µs", "p95 µs", "p99 µs",
                                                        "CPU s/Gbit", "cores", "host s/Gbit", "host"))
    for r in rows:
        print("%8d %9.1f %6d %6d %9.0f %9.0f %9.0f %12.3f %8.2f %12.3f %8.2f" % (
            r["target_mbps"], r["received_mbps"], r["access_units"], r["unrecoverable_frames"],
            r["latency_p50_us"] or -1, r["latency_p95_us"] or -1, r["latency_p99_us"] or -1,
            r["farcast_cpu_s_per_gbit"] or -1, r["farcast_core_share"], r["host_cpu_s_per_gbit"] or -1, r["host_core_share"]))
