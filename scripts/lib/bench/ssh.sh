#!/usr/bin/env bash
# VNC through an SSH tunnel: farcast's built-in client (--ssh --ssh-via builtin) and the user's
# OpenSSH carrying farcast (--ssh-via openssh: `ssh -W` through farcast's own master) beside
# OpenSSH's `ssh -L`, on the same recorded stream in the same run. Called by scripts/bench inside `unshare -n`; do not run
# directly.
#   1. Xvnc at 1920x1080 on 127.0.0.1; `farcast vnc record` records the workload (text, photos,
#      fills, mixed) once per encoding (raw: the most bytes; zrle: what a real session sends)
#   2. Debian's sshd on 127.0.0.1 (own host key and config; root by key, in a private mount
#      namespace with its own /run/sshd)
#   3. per capture and run, scripts/lib/rfb_replay_server.py serves it and `farcast vnc watch
#      --until-eof` decodes all of it: directly, through `farcast --ssh`, and through `ssh -L`
#      (OpenSSH 9.2, same cipher: aes256-gcm@openssh.com, the first both prefer); median of RUNS
#      after a warm-up. Wall time runs from the first program's start to the stream's end: for
#      `--ssh` that includes farcast's SSH handshake; for `ssh -L` two figures are kept, with the
#      tunnel's start and handshake inside the clock (what a user pays, the same as for farcast:
#      the headline ratio) and with the tunnel up before the clock starts (forwarding alone).
set -euo pipefail
FARCAST=$1 JSON=$2 WORK=$3 RUNS=${RUNS:-5} PHASE_SECONDS=${PHASE_SECONDS:-2}
say() { [ "$JSON" = 1 ] || echo "$*" >&2; }
ip link set lo up

gcc -O2 -o "$WORK/rfb_workload" scripts/lib/bench/rfb_workload.c -lX11 -lm
free_display() { local n=$1; while [ -e "/tmp/.X$n-lock" ]; do n=$((n + 1)); done; echo "$n"; }
wait_port() { for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 never opened" >&2; return 1; }
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

DISPLAY_N=$(free_display 80)
Xvnc ":$DISPLAY_N" -rfbport $((5900 + DISPLAY_N)) -localhost -interface 127.0.0.1 -SecurityTypes None \
     -geometry 1920x1080 -depth 24 -nolisten tcp > "$WORK/xvnc.log" 2>&1 &
XVNC=$!
PIDS+=($XVNC)
wait_port $((5900 + DISPLAY_N))
ENCODINGS=(raw zrle)
for e in "${ENCODINGS[@]}"; do
  total=$((PHASE_SECONDS * 4 + 2))
  say "recording $e ($total s of text, photos, fills, mixed)…"
  "$FARCAST" vnc record "127.0.0.1::$((5900 + DISPLAY_N))" --security none -o "$WORK/$e.rfb" --duration "$total" --encoding "$e" --quiet > /dev/null &
  recorder=$!
  sleep 1
  for kind in text photo fill mixed; do DISPLAY=":$DISPLAY_N" "$WORK/rfb_workload" "$kind" "$PHASE_SECONDS" 20; done
  wait "$recorder"
done
kill "$XVNC"; wait "$XVNC" 2>/dev/null || true
PIDS=()

# sshd: its own host key, root by key only, forwarding on.
mkdir -p "$WORK/ssh" "$WORK/home/.ssh"
ssh-keygen -q -t ed25519 -N '' -f "$WORK/ssh/host_ed25519"
ssh-keygen -q -t ed25519 -N '' -f "$WORK/home/.ssh/id_ed25519"
cp "$WORK/home/.ssh/id_ed25519.pub" "$WORK/ssh/authorized_keys"
SSH_PORT=2222
cat > "$WORK/ssh/sshd_config" <<EOF
Port $SSH_PORT
ListenAddress 127.0.0.1
HostKey $WORK/ssh/host_ed25519
PidFile none
AuthorizedKeysFile $WORK/ssh/authorized_keys
StrictModes no
UsePAM no
PermitRootLogin prohibit-password
PasswordAuthentication no
AllowTcpForwarding yes
EOF
unshare -m sh -c 'mount -t tmpfs -o mode=755 tmpfs /run && mkdir -m 755 /run/sshd && exec /usr/sbin/sshd -D -e -f "$0"' "$WORK/ssh/sshd_config" \
  > "$WORK/sshd.log" 2>&1 &
PIDS+=($!)
wait_port $SSH_PORT
echo "[127.0.0.1]:$SSH_PORT $(cut -d' ' -f1,2 "$WORK/ssh/host_ed25519.pub")" > "$WORK/home/.ssh/known_hosts"

python3 - "$FARCAST" "$WORK" "$JSON" "$RUNS" "$SSH_PORT" "${ENCODINGS[@]}" <<'PY'
import json, os, resource, socket, statistics, subprocess, sys, time
farcast, work, as_json, runs, ssh_port, encodings = sys.argv[1], sys.argv[2], sys.argv[3] == "1", int(sys.argv[4]), int(sys.argv[5]), sys.argv[6:]
replay = os.path.join(os.getcwd(), "scripts/lib/rfb_replay_server.py")
cipher = "aes256-gcm@openssh.com"
# --ssh-via openssh runs the same ssh as the -L row, with the same cipher, key and known_hosts.
env = dict(os.environ, HOME=f"{work}/home",
           FARCAST_SSH_COMMAND=f"ssh -c {cipher} -o UserKnownHostsFile={work}/home/.ssh/known_hosts -i {work}/home/.ssh/id_ed25519")

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close(); return port

def wait_port(port):
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close(); return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"port {port} never opened")

def wait_listening(port):
    """Waits for a listening socket on `port` without connecting to it: a probe connection
    through `ssh -L` would be forwarded to the replay server, which serves one connection only."""
    for _ in range(10000):
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            for line in open(table).read().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    return
        time.sleep(0.001)
    raise SystemExit(f"port {port} never opened")

def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN); return r.ru_utime + r.ru_stime

def watch(capture, dial_port, extra):
    """Serves the capture on a fresh port (through `dial_port` when given) and times one watch."""
    port = free_port()
    server = subprocess.Popen([sys.executable, replay, capture, str(port)], stdout=subprocess.PIPE)
    server.stdout.readline()
    t_dial = time.perf_counter()
    target = dial_port(port) if dial_port else port
    setup = time.perf_counter() - t_dial
    cpu0 = children_cpu(); t0 = time.perf_counter()
    out = subprocess.run([farcast, "vnc", "watch", f"127.0.0.1::{target}", "--security", "none", "--until-eof", "--hash", "--json",
                          "--quiet"] + extra(port), env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0; cpu = children_cpu() - cpu0
    server.wait(timeout=30)
    if out.returncode != 0: raise SystemExit(f"watch failed: {out.stderr}")
    return wall, setup, cpu, json.loads(out.stdout)

rows = []
for e in encodings:
    capture = f"{work}/{e}.rfb"
    size = os.path.getsize(capture)
    results = {}
    # One ssh -L per encoding, up before timing starts; it forwards a fixed local port to whatever
    # port the replay server gets, so it is restarted per run (outside the timed part).
    def via_openssh(port):
        local = free_port()
        tunnel = subprocess.Popen(["ssh", "-N", "-o", "BatchMode=yes", "-o", "ExitOnForwardFailure=yes", "-c", cipher,
                                   "-o", f"UserKnownHostsFile={work}/home/.ssh/known_hosts", "-i", f"{work}/home/.ssh/id_ed25519",
                                   "-p", str(ssh_port), "-L", f"{local}:127.0.0.1:{port}", "root@127.0.0.1"], env=env)
        via_openssh.tunnels.append(tunnel)
        wait_listening(local)
        return local
    via_openssh.tunnels = []
    modes = {
        "direct": (None, lambda port: []),
        "farcast_ssh": (None, lambda port: ["--ssh", f"root@127.0.0.1:{ssh_port}", "--ssh-via", "builtin"]),
        "farcast_openssh": (None, lambda port: ["--ssh", f"root@127.0.0.1:{ssh_port}", "--ssh-via", "openssh"]),
        "openssh_L": (via_openssh, lambda port: []),
    }
    for mode, (dial, extra) in modes.items():
        samples = []
        for i in range(runs + 1):
            try:
                wall, setup, cpu, report = watch(capture, dial, extra)
            finally:
                # Never leave a tunnel behind (it would hold the caller's pipes open).
                for t in via_openssh.tunnels:
                    t.terminate(); t.wait()
                via_openssh.tunnels = []
            if i > 0: samples.append((wall, setup, cpu, report))
        walls = [s[0] for s in samples]
        totals = [s[0] + s[1] for s in samples]
        results[mode] = {"wall_s": statistics.median(walls), "with_setup_s": statistics.median(totals),
                         "cpu_s": statistics.median(s[2] for s in samples), "sha256": samples[0][3].get("sha256"), "walls": walls}
    ours, theirs, direct, via = results["farcast_ssh"], results["openssh_L"], results["direct"], results["farcast_openssh"]
    rows.append({
        "encoding": e, "capture_bytes": size,
        "direct_mb_s": round(size / direct["wall_s"] / 1e6, 1),
        "farcast_ssh_mb_s": round(size / ours["wall_s"] / 1e6, 1),
        "farcast_openssh_mb_s": round(size / via["wall_s"] / 1e6, 1),
        "openssh_route_ratio_vs_openssh_L": round(theirs["with_setup_s"] / via["wall_s"], 2),
        "openssh_route_minus_openssh_L_s": round(via["wall_s"] - theirs["with_setup_s"], 3),
        "farcast_openssh_client_cpu_s": round(via["cpu_s"], 3),
        "openssh_L_mb_s": round(size / theirs["with_setup_s"] / 1e6, 1),
        "ratio_vs_openssh": round(theirs["with_setup_s"] / ours["wall_s"], 2),
        "openssh_L_tunnel_up_before_mb_s": round(size / theirs["wall_s"] / 1e6, 1),
        "ratio_vs_openssh_tunnel_up_before": round(theirs["wall_s"] / ours["wall_s"], 2),
        "openssh_L_setup_s": round(theirs["with_setup_s"] - theirs["wall_s"], 3),
        "farcast_ssh_wall_s": round(ours["wall_s"], 3), "openssh_L_wall_s": round(theirs["wall_s"], 3), "direct_wall_s": round(direct["wall_s"], 3),
        "farcast_ssh_client_cpu_s": round(ours["cpu_s"], 3), "openssh_L_watch_cpu_s": round(theirs["cpu_s"], 3),
        "same_pixels": ours["sha256"] == theirs["sha256"] == direct["sha256"] == via["sha256"],
        "cipher": cipher, "runs": runs,
    })
if as_json:
    print(json.dumps(rows))
else:
    print(f"VNC through SSH (sshd 9.2 on 127.0.0.1, {cipher}), 1920x1080 recordings from Xvnc, median of {runs} runs after a warm-up")
    print("MB/s of wall time from the first program's start; ssh -L with its start and handshake timed like farcast's (ratio),")
    print("and with the tunnel up before the clock starts (ratio, -L up before)")
    print(f"{'encoding':<9}{'capture MB':>11}{'direct MB/s':>13}{'farcast --ssh MB/s':>20}{'ssh -L MB/s':>13}{'ratio':>7}"
          f"{'-L up before MB/s':>19}{'ratio':>7}{'-L setup s':>12}{'same pixels':>13}")
    for r in rows:
        print(f"{r['encoding']:<9}{r['capture_bytes']/1e6:>11.1f}{r['direct_mb_s']:>13.1f}{r['farcast_ssh_mb_s']:>20.1f}{r['openssh_L_mb_s']:>13.1f}"
              f"{r['ratio_vs_openssh']:>7.2f}{r['openssh_L_tunnel_up_before_mb_s']:>19.1f}{r['ratio_vs_openssh_tunnel_up_before']:>7.2f}"
              f"{r['openssh_L_setup_s']:>12.3f}{'yes' if r['same_pixels'] else 'NO':>13}")
    print()
    print("--ssh-via openssh (farcast over `ssh -W` through its own master, the same ssh and cipher) against ssh -L, both with set-up timed")
    print(f"{'encoding':<9}{'--ssh-via openssh MB/s':>24}{'ssh -L MB/s':>13}{'ratio':>7}{'extra s vs -L':>15}{'CPU s (farcast+ssh)':>21}")
    for r in rows:
        print(f"{r['encoding']:<9}{r['farcast_openssh_mb_s']:>24.1f}{r['openssh_L_mb_s']:>13.1f}{r['openssh_route_ratio_vs_openssh_L']:>7.2f}"
              f"{r['openssh_route_minus_openssh_L_s']:>15.3f}{r['farcast_openssh_client_cpu_s']:>21.3f}")
PY
