#!/usr/bin/env python3
"""Known-answer vectors for Tunnel's GSO split, GRO coalescing and echo responder.

Every expected packet is built by Scapy (PyPI scapy==2.8.0), which computes lengths and
checksums itself: an oracle independent of our Swift code. Super-packets are laid out the way
the Linux kernel hands them to a TUN reader with IFF_VNET_HDR: full-length IP header, the
transport checksum field holding the folded pseudo-header sum (a partial checksum), and a
virtio_net_hdr in front.

    python3 -m venv /tmp/scapy-venv && /tmp/scapy-venv/bin/pip install scapy==2.8.0
    /tmp/scapy-venv/bin/python scripts/vectors/make_tun_offload_vectors.py > Tests/TunnelTests/Fixtures/offload-vectors.json
"""
import json
import struct
import sys

from scapy.all import IP, IPv6, TCP, UDP, ICMP, ICMPv6EchoRequest, ICMPv6EchoReply, Raw, raw
import scapy

NEEDS_CSUM = 1
GSO_NONE, GSO_TCPV4, GSO_TCPV6, GSO_UDP_L4 = 0, 1, 4, 5
GSO_ECN = 0x80


def vnet(flags=0, gso_type=GSO_NONE, hdr_len=0, gso_size=0, csum_start=0, csum_offset=0):
    return struct.pack("<BBHHHH", flags, gso_type, hdr_len, gso_size, csum_start, csum_offset)


def fold(s):
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def pseudo_sum(src, dst, proto, length):
    s = 0
    data = src + dst
    for i in range(0, len(data), 2):
        s += (data[i] << 8) | data[i + 1]
    s += proto
    s += (length >> 16) + (length & 0xFFFF)
    return fold(s)


def addr_bytes(pkt):
    if pkt.haslayer(IP):
        import socket
        return socket.inet_aton(pkt[IP].src), socket.inet_aton(pkt[IP].dst)
    import socket
    return socket.inet_pton(socket.AF_INET6, pkt[IPv6].src), socket.inet_pton(socket.AF_INET6, pkt[IPv6].dst)


def partial(pkt, l4_offset, csum_field, proto):
    """The packet as the kernel leaves it for a NIC: lengths of the whole, transport checksum
    = folded pseudo-header sum (not complemented)."""
    b = bytearray(raw(pkt))
    src, dst = addr_bytes(pkt)
    l4_len = len(b) - l4_offset
    p = pseudo_sum(src, dst, proto, l4_len)
    struct.pack_into("!H", b, l4_offset + csum_field, p)
    return bytes(b)


def ip4(**kw):
    base = dict(src="10.61.0.1", dst="10.61.0.2", id=0x1234, flags="DF", ttl=64, tos=0)
    base.update(kw)
    return IP(**base)


def ip6(**kw):
    base = dict(src="fd61::1", dst="fd61::2", hlim=64, tc=0, fl=0x12345)
    base.update(kw)
    return IPv6(**base)


TS = [("NOP", None), ("NOP", None), ("Timestamp", (1000, 2000))]


def payload(n, seed):
    return bytes(((i * 7 + seed) & 0xFF) for i in range(n))


def tcp_split_case(name, v6, total, mss, flags="PA", ecn_gso=False):
    data = payload(total, 3 if v6 else 5)
    ipl = ip6() if v6 else ip4()
    tcp = dict(sport=40000, dport=5201, seq=0x11223344, ack=0x55667788, window=501, options=TS)
    whole = ipl / TCP(flags=flags, **tcp) / Raw(data)
    l4 = 40 if v6 else 20
    hdr = l4 + 32
    sp = partial(whole, l4, 16, 6)
    gso = (GSO_TCPV6 if v6 else GSO_TCPV4) | (GSO_ECN if ecn_gso else 0)
    header = vnet(NEEDS_CSUM, gso, hdr, mss, l4, 16)
    segs = []
    n = (total + mss - 1) // mss
    for i in range(n):
        chunk = data[i * mss:(i + 1) * mss]
        f = TCP(flags=flags).flags
        if i != n - 1:
            f &= ~0x09  # FIN, PSH only on the last
        if i != 0:
            f &= ~0x80  # CWR only on the first
        seg_ip = ip6() if v6 else ip4(id=0x1234 + i)
        t = dict(tcp)
        t["seq"] = (tcp["seq"] + i * mss) & 0xFFFFFFFF
        segs.append(raw(seg_ip / TCP(flags=int(f), **t) / Raw(chunk)).hex())
    return dict(name=name, header=header.hex(), packet=sp.hex(), segments=segs)


def udp_split_case(name, v6, total, size):
    data = payload(total, 9 if v6 else 11)
    ipl = ip6() if v6 else ip4()
    whole = ipl / UDP(sport=40001, dport=5201) / Raw(data)
    l4 = 40 if v6 else 20
    sp = partial(whole, l4, 6, 17)
    header = vnet(NEEDS_CSUM, GSO_UDP_L4, l4 + 8, size, l4, 6)
    segs = []
    n = (total + size - 1) // size
    for i in range(n):
        seg_ip = ip6() if v6 else ip4(id=0x1234 + i)
        segs.append(raw(seg_ip / UDP(sport=40001, dport=5201) / Raw(data[i * size:(i + 1) * size])).hex())
    return dict(name=name, header=header.hex(), packet=sp.hex(), segments=segs)


def checksum_only_case(name, pkt, l4, field, proto):
    return dict(name=name, header=vnet(NEEDS_CSUM, GSO_NONE, 0, 0, l4, field).hex(),
                packet=partial(pkt, l4, field, proto).hex(), segments=[raw(pkt).hex()])


split = [
    tcp_split_case("tcp4 TSO, 3 full segments and a short one, PSH on the last", False, 4000, 1388),
    tcp_split_case("tcp6 TSO, 2 full segments and a short one", True, 3000, 1368),
    tcp_split_case("tcp4 TSO, payload a multiple of the MSS", False, 2 * 1388, 1388),
    tcp_split_case("tcp4 TSO with CWR and FIN: CWR on the first, FIN|PSH on the last", False, 3000, 1000, flags="FPAC", ecn_gso=True),
    udp_split_case("udp4 USO, 2 full datagrams and a short one", False, 3000, 1200),
    udp_split_case("udp6 USO, exactly 3 datagrams", True, 3 * 1100, 1100),
    checksum_only_case("tcp4 partial checksum only", ip4() / TCP(sport=1, dport=2, flags="PA", seq=9, ack=10) / Raw(payload(333, 1)), 20, 16, 6),
    checksum_only_case("udp6 partial checksum only", ip6() / UDP(sport=3, dport=4) / Raw(payload(101, 2)), 40, 6, 17),
    dict(name="plain packet, no offload", header=vnet().hex(),
         packet=raw(ip4() / ICMP(id=1, seq=1) / Raw(b"ping")).hex(), segments=[raw(ip4() / ICMP(id=1, seq=1) / Raw(b"ping")).hex()]),
]


def seg(v6, i, mss=1388, flags="A", sport=40000, data_seed=5, seq=0x11223344, ttl=64, tos=0, length=None, chksum=None, ident=None):
    ipl = ip6(hlim=ttl) if v6 else ip4(id=ident if ident is not None else 0x1234 + i, ttl=ttl, tos=tos)
    n = length if length is not None else mss
    tcp = TCP(sport=sport, dport=5201, seq=(seq + i * mss) & 0xFFFFFFFF, ack=0x55667788, window=501, options=TS, flags=flags)
    if chksum is not None:
        tcp.chksum = chksum
    return ipl / tcp / Raw(payload(n, data_seed + i))


def super_tcp(v6, segs_pkts, flags, mss):
    """The coalesced packet GRO must produce from segs: the first's headers, the payloads
    joined, whole lengths, partial checksum, the last one's PSH."""
    first = segs_pkts[0]
    data = b"".join(bytes(p[Raw].load) for p in segs_pkts)
    ipl = first[IPv6].copy() if v6 else first[IP].copy()
    ipl.remove_payload()
    if v6:
        ipl.plen = None
    else:
        ipl.len = None
        ipl.chksum = None
    t = first[TCP].copy()
    t.remove_payload()
    t.flags = flags
    t.chksum = None
    whole = ipl / t / Raw(data)
    l4 = 40 if v6 else 20
    sp = partial(whole, l4, 16, 6)
    return dict(header=vnet(NEEDS_CSUM, GSO_TCPV6 if v6 else GSO_TCPV4, l4 + 32, mss, l4, 16).hex(), packet=sp.hex())


def plain(pkt):
    return dict(header=vnet().hex(), packet=raw(pkt).hex())


def coalesce_tcp(name, v6):
    mss = 1368 if v6 else 1388
    segs = [seg(v6, 0, mss), seg(v6, 1, mss), seg(v6, 2, mss, flags="PA", length=700)]
    return dict(name=name, udp=False, packets=[raw(p).hex() for p in segs], writes=[super_tcp(v6, segs, "PA", mss)])


def coalesce_udp(name, v6):
    size = 1100
    data = [payload(size, 20 + i) for i in range(3)] + [payload(300, 23)]
    pkts = []
    for i, d in enumerate(data):
        ipl = ip6() if v6 else ip4(id=0x1234 + i)
        pkts.append(ipl / UDP(sport=40001, dport=5201) / Raw(d))
    whole_ip = ip6() if v6 else ip4(id=0x1234)
    whole = whole_ip / UDP(sport=40001, dport=5201) / Raw(b"".join(data))
    l4 = 40 if v6 else 20
    sp = partial(whole, l4, 6, 17)
    return dict(name=name, udp=True, packets=[raw(p).hex() for p in pkts],
                writes=[dict(header=vnet(NEEDS_CSUM, GSO_UDP_L4, l4 + 8, size, l4, 6).hex(), packet=sp.hex())])


def interleaved():
    a = [seg(False, i, sport=40000) for i in range(3)]
    b = [seg(False, i, sport=40002, data_seed=50) for i in range(2)]
    order = [a[0], b[0], a[1], b[1], a[2]]
    return dict(name="two flows interleaved become two super-packets in first-seen order", udp=False,
                packets=[raw(p).hex() for p in order], writes=[super_tcp(False, a, "A", 1388), super_tcp(False, b, "A", 1388)])


def gap():
    a0, a2 = seg(False, 0), seg(False, 2)
    return dict(name="a sequence gap keeps the packets apart", udp=False, packets=[raw(a0).hex(), raw(a2).hex()],
                writes=[plain(a0), plain(a2)])


def bad_checksum():
    a0, a1, a2 = seg(False, 0), seg(False, 1, chksum=0xBEEF), seg(False, 2)
    return dict(name="a segment with a wrong checksum is never merged (nor is what follows it)", udp=False,
                packets=[raw(a0).hex(), raw(a1).hex(), raw(a2).hex()], writes=[plain(a0), plain(a1), plain(a2)])


def push_ends():
    a = [seg(False, 0), seg(False, 1, flags="PA"), seg(False, 2)]
    return dict(name="PSH ends a super-packet; the next segment starts another", udp=False,
                packets=[raw(p).hex() for p in a], writes=[super_tcp(False, a[:2], "PA", 1388), plain(a[2])])


def ttl_differs():
    a = [seg(False, 0), seg(False, 1, ttl=63)]
    return dict(name="a different TTL keeps segments apart", udp=False, packets=[raw(p).hex() for p in a],
                writes=[plain(a[0]), plain(a[1])])


def mixed():
    ping = ip4() / ICMP(id=7, seq=1) / Raw(b"hello")
    a = [seg(False, 0), seg(False, 1)]
    syn = ip4(id=9) / TCP(sport=40009, dport=80, flags="S", seq=1)
    pkts = [a[0], ping, a[1], syn]
    return dict(name="ICMP and SYN pass through unchanged between merged segments", udp=False,
                packets=[raw(p).hex() for p in pkts], writes=[super_tcp(False, a, "A", 1388), plain(ping), plain(syn)])


def single():
    a = seg(True, 0)
    return dict(name="a lone segment is written as it came", udp=False, packets=[raw(a).hex()], writes=[plain(a)])


coalesce = [
    coalesce_tcp("tcp4 segments become one super-packet", False),
    coalesce_tcp("tcp6 segments become one super-packet", True),
    coalesce_udp("udp4 datagrams become one USO super-packet", False),
    coalesce_udp("udp6 datagrams become one USO super-packet", True),
    interleaved(), gap(), bad_checksum(), push_ends(), ttl_differs(), mixed(), single(),
]


def echo_cases():
    out = []
    req4 = IP(src="10.62.0.1", dst="10.62.0.9", id=0x4242, ttl=63, flags="DF") / ICMP(type=8, id=0x77, seq=3) / Raw(payload(56, 4))
    rep4 = IP(src="10.62.0.9", dst="10.62.0.1", id=0x4242, ttl=64, flags="DF") / ICMP(type=0, id=0x77, seq=3) / Raw(payload(56, 4))
    out.append(dict(name="ICMP echo request to a routed address", request=raw(req4).hex(), reply=raw(rep4).hex()))
    req6 = IPv6(src="fd62::1", dst="fd62::9", hlim=63, fl=5) / ICMPv6EchoRequest(id=0x99, seq=4, data=payload(40, 6))
    rep6 = IPv6(src="fd62::9", dst="fd62::1", hlim=64, fl=5) / ICMPv6EchoReply(id=0x99, seq=4, data=payload(40, 6))
    out.append(dict(name="ICMPv6 echo request to a routed address", request=raw(req6).hex(), reply=raw(rep6).hex()))
    bad = bytearray(raw(req4))
    bad[-1] ^= 0xFF
    out.append(dict(name="wrong ICMP checksum: no reply", request=bytes(bad).hex(), reply=None))
    mc = IP(src="10.62.0.1", dst="224.0.0.1") / ICMP(type=8) / Raw(b"x")
    out.append(dict(name="multicast destination: no reply", request=raw(mc).hex(), reply=None))
    mc6 = IPv6(src="fd62::1", dst="ff02::1") / ICMPv6EchoRequest()
    out.append(dict(name="IPv6 multicast destination: no reply", request=raw(mc6).hex(), reply=None))
    frag = IP(src="10.62.0.1", dst="10.62.0.9", flags="MF") / ICMP(type=8) / Raw(b"abc")
    out.append(dict(name="a fragment: no reply", request=raw(frag).hex(), reply=None))
    reply = IP(src="10.62.0.1", dst="10.62.0.9") / ICMP(type=0) / Raw(b"abc")
    out.append(dict(name="an echo reply is not answered", request=raw(reply).hex(), reply=None))
    return out


json.dump(dict(generator="scripts/vectors/make_tun_offload_vectors.py", scapy=scapy.VERSION,
               split=split, coalesce=coalesce, echo=echo_cases()), sys.stdout, indent=1)
sys.stdout.write("\n")
