#!/usr/bin/env bash
# TUN tunnel throughput: iperf3 TCP and UDP between two network namespaces joined by a veth pair,
# through each forwarder in turn, all in one run. Called by scripts/bench inside `unshare -n`;
# do not run directly.
#   veth            the two namespaces talking directly: the kernel's ceiling
#   farcast         `farcast tun pipe` at each end: offload off/on, 1 and 2 queues
#   socat           socat TUN <-> UDP-DATAGRAM at each end (Debian's socat)
#   openvpn         OpenVPN point-to-point, no TLS, no cipher, no auth (Debian's openvpn)
# Every tunnel has the same inner MTU (TUN_MTU, default 1420) over a 1500-byte veth. For each run:
# Gbit/s received, and CPU seconds per Gbit moved, counting the forwarders and both iperf3
# processes (their own and their system time); the machine-wide figure from /proc/stat follows.
set -euo pipefail
FARCAST=$1 JSON=$2 WORK=$3
SECONDS_PER=${SECONDS_PER:-10}
MTU=${TUN_MTU:-1420}
say() { [ "$JSON" = 1 ] || echo "$*" >&2; }
source "$(dirname "$0")/netns_pair.sh"

# Forwarder pids of the current scenario (their CPU is counted).
FWD=()
start_farcast() { # extra flags...
  nsenter -t "$A" -n -- "$FARCAST" tun pipe fb0 --address 10.90.0.1/24 --mtu "$MTU" --listen 7000 --peer 192.0.2.2:7000 --quiet "$@" \
    > "$WORK/fa.json" 2> "$WORK/fa.err" & FWD+=($!); PIDS+=($!)
  nsenter -t "$B" -n -- "$FARCAST" tun pipe fb0 --address 10.90.0.2/24 --mtu "$MTU" --listen 7000 --peer 192.0.2.1:7000 --quiet "$@" \
    > "$WORK/fb.json" 2> "$WORK/fb.err" & FWD+=($!); PIDS+=($!)
}
start_socat() {
  nsenter -t "$A" -n -- socat -b 65536 TUN:10.90.0.1/24,tun-type=tun,iff-no-pi,iff-up,tun-name=sc0 \
    UDP-DATAGRAM:192.0.2.2:7300,bind=192.0.2.1:7300,rcvbuf=4194304,sndbuf=4194304 2> "$WORK/sa.err" & FWD+=($!); PIDS+=($!)
  nsenter -t "$B" -n -- socat -b 65536 TUN:10.90.0.2/24,tun-type=tun,iff-no-pi,iff-up,tun-name=sc0 \
    UDP-DATAGRAM:192.0.2.1:7300,bind=192.0.2.2:7300,rcvbuf=4194304,sndbuf=4194304 2> "$WORK/sb.err" & FWD+=($!); PIDS+=($!)
  for _ in $(seq 100); do inA ip link show sc0 >/dev/null 2>&1 && inB ip link show sc0 >/dev/null 2>&1 && break; sleep 0.05; done
  inA ip link set sc0 mtu "$MTU"; inB ip link set sc0 mtu "$MTU"
}
start_openvpn() {
  local common=(--dev ovpn0 --dev-type tun --proto udp --lport 7200 --rport 7200 --tun-mtu "$MTU" --cipher none --auth none
                --sndbuf 4194304 --rcvbuf 4194304 --verb 1)
  nsenter -t "$A" -n -- openvpn "${common[@]}" --ifconfig 10.90.0.1 10.90.0.2 --remote 192.0.2.2 > "$WORK/oa.log" 2>&1 & FWD+=($!); PIDS+=($!)
  nsenter -t "$B" -n -- openvpn "${common[@]}" --ifconfig 10.90.0.2 10.90.0.1 --remote 192.0.2.1 > "$WORK/ob.log" 2>&1 & FWD+=($!); PIDS+=($!)
}

: > "$WORK/results.jsonl"
say "TUN throughput, ${SECONDS_PER} s per run, inner MTU $MTU; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
scenario veth 192.0.2.2 none
scenario "farcast offload off, 1 queue" 10.90.0.2 start_farcast --queues 1
scenario "farcast offload off, 2 queues" 10.90.0.2 start_farcast --queues 2
scenario "farcast offload on, 1 queue" 10.90.0.2 start_farcast --queues 1 --offload
scenario "farcast offload on, 2 queues" 10.90.0.2 start_farcast --queues 2 --offload
scenario socat 10.90.0.2 start_socat
scenario "openvpn (no cipher)" 10.90.0.2 start_openvpn

python3 - "$WORK/results.jsonl" "$JSON" "$SECONDS_PER" "$MTU" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import json, sys
path, as_json, seconds, mtu, load = sys.argv[1:]
rows = [json.loads(l) for l in open(path) if l.strip()]
def get(name, proto, field="gbps"):
    for r in rows:
        if r.get("name") == name and r.get("proto") == proto:
            return r.get(field) or 0
    return 0
ratios = {}
for proto in ("tcp", "udp"):
    peers = max(get("socat", proto), get("openvpn (no cipher)", proto))
    plain = max(get("farcast offload off, 1 queue", proto), get("farcast offload off, 2 queues", proto))
    offload = max(get("farcast offload on, 1 queue", proto), get("farcast offload on, 2 queues", proto))
    veth = get("veth", proto)
    ratios[f"{proto}_no_offload_vs_best_peer"] = round(plain / peers, 2) if peers else None
    ratios[f"{proto}_offload_vs_veth"] = round(offload / veth, 2) if veth else None
    # The same comparison in what the whole machine spends per Gbit (veth's over ours: higher
    # is better, like the others): steadier than Gbit/s, which for veth's single flow follows the
    # memory bandwidth the host leaves this machine.
    cost = min((c for c in (get(n, proto, "machine_cpu_s_per_gbit") for n in ("farcast offload on, 1 queue", "farcast offload on, 2 queues")) if c), default=0)
    veth_cost = get("veth", proto, "machine_cpu_s_per_gbit")
    ratios[f"{proto}_offload_vs_veth_machine_cpu_per_gbit"] = round(veth_cost / cost, 2) if cost and veth_cost else None
summary = {"benchmark": "tun", "seconds_per_run": int(seconds), "inner_mtu": int(mtu), "load_after": load,
           "results": rows, "ratios": ratios,
           "goals": {"tcp_no_offload_vs_best_peer": 1.5, "tcp_offload_vs_veth": 0.5}}
if as_json == "1":
    print(json.dumps(summary))
else:
    print(f"{'path':34} {'proto':5} {'Gbit/s':>8} {'CPU s/Gbit':>11} {'machine':>8} {'loss %':>7}")
    for r in rows:
        if "error" in r and "gbps" not in r:
            print(f"{r['name']:34} {'':5} {'failed':>8}  {r['error']}")
            continue
        print(f"{r['name']:34} {r['proto']:5} {r['gbps']:8.2f} {r['cpu_s_per_gbit'] or 0:11.3f} {r['machine_cpu_s_per_gbit'] or 0:8.3f} {str(r.get('lost_percent', '')):>7}")
    print()
    for k, v in ratios.items():
        print(f"{k:32} {v}")
    print(f"(goals: TCP without offload >= 1.5x the best of socat and OpenVPN; TCP with offload >= 0.5x veth; load after: {load})")
PY
