"""A stand-in punktfunk/1 host for Farcast's tests and benchmarks.

This is NOT the real punktfunk host. The real one (Rust: quinn, rustls, reed-solomon-simd,
spake2, PipeWire capture, GPU encoders) cannot be built on these machines, so this program
speaks punktfunk/1 as Farcast's own notes (shared/protocols/punktfunk.md) describe it, with
bit-true libraries where they exist on PyPI:

  * QUIC + TLS 1.3 on aioquic: ALPN pkf1, DATAGRAM extension, 8 s idle timeout, a long-lived
    self-signed ECDSA P-256 certificate whose SHA-256 (of the DER) it prints at start-up, and a
    request for the client's certificate (aioquic's test-only switch, see _request_client_cert).
  * Control stream: u16 LE framing; Hello / Welcome / Start; PKFc typed control; clock echo.
  * Video: real HEVC access units made by Debian's ffmpeg/libx265 from a test pattern (in-band
    VPS/SPS/PPS, one IDR then an infinite GOP), sealed with AES-128-GCM (nonce = salt with the
    direction bit ‖ seq BE, AAD = seq) and protected by Leopard Reed-Solomon over GF(2^16)
    (reed-solomon-leopard, bit-identical to the host's reed-solomon-simd), packetized with the
    40-byte header. A keyframe request (or a mode change) restarts the pre-encoded sequence at its
    IDR: a genuinely fresh IDR with parameter sets, followed by its own P frames.
  * Audio: Opus 5 ms CELT frames (opuslib) as 0xC9 datagrams; rumble (0xCA) and HID output
    (0xCD) bursts at --feedback-at.
  * Pairing: SPAKE2 side B over Ed25519 (PyPI spake2, the same construction as the Rust crate)
    with HMAC confirmations; --require-pairing gates Hello on a paired client fingerprint.
  * Speed test: ProbeRequest -> filler burst with the probe flags -> ProbeResult.

Every control message and input datagram it receives, and every access unit it sends (with its
SHA-256, and an "au_sent" line when its last datagram has left), is written as one JSON line to --log, so tests can assert what the client did.
Loss, reordering and delay on what it sends come from its own knobs (--loss, --reorder,
--delay-ms, --rate-mbps). It only ever binds 127.0.0.1 (or --bind inside a test namespace).
"""

import argparse
import asyncio
import collections
import hashlib
import hmac
import json
import math
import os
import random
import signal
import socket
import struct
import sys
import threading
import time

import aioquic.tls
from aioquic.asyncio import QuicConnectionProtocol, serve
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, DatagramFrameReceived, HandshakeCompleted, StreamDataReceived
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.x509.oid import NameOID

import media
import packetizer

WIRE_VERSION = 2
MAGIC = b"PKF1"
CTRL = b"PKFc"
# Application close codes. 0x51/0x52 are the host's; the rejection codes below are this stand-in's
# own (the real host's typed rejections live in its reject.rs, whose numbers we could not read),
# and every close carries a reason text that names the rejection.
CLOSE_QUIT = 0x51
CLOSE_GAME_EXITED = 0x52
CLOSE_REJECT = 0x60

WELCOME_SHARD = 1408
MAX_DATA_PER_BLOCK = 4096


def _request_client_cert():
    """aioquic asks a client for its certificate only behind a private, test-only flag."""
    original = aioquic.tls.Context.__init__

    def patched(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if not self._is_client:
            self._request_client_certificate = True

    aioquic.tls.Context.__init__ = patched


_request_client_cert()


def load_or_create_certificate(directory):
    os.makedirs(directory, exist_ok=True)
    cert_path = os.path.join(directory, "host-cert.pem")
    key_path = os.path.join(directory, "host-key.pem")
    if not (os.path.exists(cert_path) and os.path.exists(key_path)):
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "punktfunk-standin-host")])
        import datetime
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
                .not_valid_after(now + datetime.timedelta(days=3650))
                .add_extension(x509.SubjectAlternativeName([x509.DNSName("punktfunk")]), critical=False)
                .sign(key, hashes.SHA256()))
        with open(key_path, "wb") as f:
            f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
        os.chmod(key_path, 0o600)
        with open(cert_path, "wb") as f:
            f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(cert_path, "rb") as f:
        cert = x509.load_pem_x509_certificate(f.read())
    fp = hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).digest()
    return cert_path, key_path, fp


class EventLog:
    def __init__(self, path):
        self.file = open(path, "a", buffering=1) if path else None
        self.lock = threading.Lock()

    def write(self, event, **fields):
        if not self.file:
            return
        fields["event"] = event
        fields["t_ns"] = time.time_ns()
        with self.lock:
            self.file.write(json.dumps(fields, sort_keys=True) + "\n")


def frame(payload):
    return struct.pack("<H", len(payload)) + payload


def ctrl(kind, body=b""):
    return CTRL + bytes([kind]) + body


class HostState:
    """What outlives one connection: arguments, certificate, paired clients, armed PIN."""

    def __init__(self, args, fingerprint):
        self.args = args
        self.fingerprint = fingerprint
        self.log = EventLog(args.log)
        self.pin = args.pin
        self.paired_path = os.path.join(args.state_dir, "paired-clients.json")
        try:
            with open(self.paired_path) as f:
                self.paired = set(json.load(f))
        except (OSError, ValueError):
            self.paired = set()
        self.library = media.MediaLibrary(args.media_dir, args.bitrate_kbps)

    def add_paired(self, fp_hex):
        self.paired.add(fp_hex)
        tmp = self.paired_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(sorted(self.paired), f)
        os.replace(tmp, self.paired_path)


class HostProtocol(QuicConnectionProtocol):
    state: HostState = None

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.buffer = b""
        self.stream_id = None
        self.phase = "new"
        self.client_fp = None
        self.session = None
        self.pairing = None

    # --- QUIC events -------------------------------------------------------------------------

    def quic_event_received(self, event):
        st = self.state
        if isinstance(event, HandshakeCompleted):
            cert = self._quic.tls._peer_certificate
            if cert is not None:
                self.client_fp = hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).digest()
            st.log.write("connected", client_fp=self.client_fp.hex() if self.client_fp else None,
                         alpn=event.alpn_protocol)
        elif isinstance(event, StreamDataReceived):
            if self.stream_id is None:
                self.stream_id = event.stream_id
            if event.stream_id != self.stream_id:
                return
            self.buffer += event.data
            while len(self.buffer) >= 2:
                (n,) = struct.unpack_from("<H", self.buffer)
                if len(self.buffer) < 2 + n:
                    break
                payload, self.buffer = self.buffer[2:2 + n], self.buffer[2 + n:]
                try:
                    self.handle(payload)
                except Exception as e:  # a stand-in logs and closes instead of dying
                    st.log.write("error", detail=repr(e))
                    self.close(CLOSE_REJECT, "stand-in host error: %r" % (e,))
        elif isinstance(event, DatagramFrameReceived):
            data = event.data
            kind = {0xC8: "input", 0xCC: "rich_input", 0xCB: "mic"}.get(data[0] if data else -1, "datagram")
            st.log.write(kind, hex=data.hex(), length=len(data))
        elif isinstance(event, ConnectionTerminated):
            st.log.write("terminated", error_code=event.error_code, reason=event.reason_phrase)
            if self.session:
                self.session.stop()

    def send_ctrl(self, payload):
        self._quic.send_stream_data(self.stream_id, frame(payload))
        self.transmit()

    def close(self, code, reason):
        self._quic.close(error_code=code, reason_phrase=reason)
        self.transmit()
        if self.session:
            self.session.stop()

    # --- control -------------------------------------------------------------------------------

    def handle(self, payload):
        st = self.state
        if self.phase == "new":
            if payload[:4] == MAGIC:
                return self.handle_hello(payload)
            if payload[:5] == CTRL + b"\x10":
                return self.handle_pair_request(payload)
            st.log.write("control", kind="garbage", hex=payload.hex())
            return self.close(CLOSE_REJECT, "expected Hello or PairRequest")
        if self.phase == "await_start":
            if payload[:4] != MAGIC or len(payload) < 6:
                return self.close(CLOSE_REJECT, "expected Start")
            (port,) = struct.unpack_from("<H", payload, 4)
            st.log.write("start", client_udp_port=port)
            self.phase = "streaming"
            self.session.start(port)
            return
        if self.phase == "pairing":
            return self.handle_pair_proof(payload)
        if payload[:4] != CTRL or len(payload) < 5:
            st.log.write("control", kind="garbage", hex=payload.hex())
            return
        kind, body = payload[4], payload[5:]
        if kind == 0x30:
            t2 = time.time_ns()
            (t1,) = struct.unpack_from("<Q", body)
            st.log.write("control", kind="clock_probe", t1=t1)
            self.send_ctrl(ctrl(0x31, struct.pack("<QQQ", t1, t2, time.time_ns())))
        elif kind == 0x01:
            w, h, hz = struct.unpack_from("<III", body)
            st.log.write("control", kind="reconfigure", width=w, height=h, hz=hz)
            ok = self.session.reconfigure(w, h, hz)
            self.send_ctrl(ctrl(0x02, struct.pack("<BIII", 1 if ok else 0, w, h, hz)))
        elif kind == 0x03:
            st.log.write("control", kind="request_keyframe")
            self.session.request_keyframe()
        elif kind == 0x04:
            (ppm,) = struct.unpack_from("<I", body)
            st.log.write("control", kind="loss_report", loss_ppm=ppm)
        elif kind == 0x05:
            (kbps,) = struct.unpack_from("<I", body)
            st.log.write("control", kind="set_bitrate", kbps=kbps)
            self.send_ctrl(ctrl(0x06, struct.pack("<I", kbps or st.args.bitrate_kbps)))
        elif kind == 0x07:
            first, last = struct.unpack_from("<II", body)
            span = (last - first + 1) & 0xFFFFFFFF
            st.log.write("control", kind="rfi_request", first=first, last=last, span=span)
            # A real host re-encodes a clean P-frame referencing only frames before `first`
            # (flagged RECOVERY_ANCHOR); the stand-in streams pre-encoded video, so it answers with
            # its IDR. A range the wire does not allow (empty or over 256 frames) is ignored.
            if 1 <= span <= 256:
                self.session.request_keyframe()
            else:
                st.log.write("rfi_refused", first=first, last=last)
        elif kind == 0x20:
            kbps, ms = struct.unpack_from("<II", body)
            st.log.write("control", kind="probe_request", target_kbps=kbps, duration_ms=ms)
            self.session.probe(kbps, ms, lambda result: self._loop.call_soon_threadsafe(self.send_ctrl, result))
        else:
            st.log.write("control", kind="unknown", type=kind, hex=body.hex())

    def handle_hello(self, payload):
        st = self.state
        if len(payload) < 20:
            return self.close(CLOSE_REJECT, "Hello shorter than 20 bytes")
        version, w, h, hz = struct.unpack_from("<IIII", payload, 4)
        hello = parse_hello_tail(payload)
        st.log.write("hello", wire_version=version, width=w, height=h, hz=hz, **hello)
        if version != WIRE_VERSION:
            return self.close(CLOSE_REJECT, "WireVersionMismatch: host speaks %d" % WIRE_VERSION)
        fp_hex = self.client_fp.hex() if self.client_fp else ""
        if st.args.require_pairing and fp_hex not in st.paired:
            st.log.write("rejected", reason="pairing required", client_fp=fp_hex)
            return self.close(CLOSE_REJECT, "PairingRequired: this device is not paired")
        mode = st.args.mode if (w, h, hz) == (0, 0, 0) else (w, h, hz)
        self.session = VideoSession(self, st, mode, hello)
        self.send_ctrl(self.session.welcome())
        self.phase = "await_start"

    def handle_pair_request(self, payload):
        import spake2
        st = self.state
        body = payload[5:]
        n = body[0]
        name = body[1:1 + n].decode("utf-8", "replace")
        (alen,) = struct.unpack_from("<H", body, 1 + n)
        spake_a = body[3 + n:3 + n + alen]
        st.log.write("control", kind="pair_request", name=name)
        if not st.pin:
            st.log.write("pair", result="no_pin_armed")
            return self.close(CLOSE_REJECT, "PairingNotArmed: no PIN is armed on the host")
        pin = st.pin.encode()
        st.pin = None  # single use: one attempt per armed PIN
        side_b = spake2.SPAKE2_B(pin, idA=self.client_fp, idB=st.fingerprint)
        msg_b = side_b.start()
        try:
            key = side_b.finish(spake_a)
        except Exception as e:
            st.log.write("pair", result="bad_message", detail=repr(e))
            return self.close(CLOSE_REJECT, "bad SPAKE2 message")
        fps = self.client_fp + st.fingerprint
        confirm_host = hmac.new(key, b"punktfunk-pair-host" + fps, hashlib.sha256).digest()
        self.pairing = hmac.new(key, b"punktfunk-pair-client" + fps, hashlib.sha256).digest()
        self.phase = "pairing"
        self.send_ctrl(ctrl(0x11, struct.pack("<H", len(msg_b)) + msg_b + confirm_host))

    def handle_pair_proof(self, payload):
        st = self.state
        if payload[:5] != CTRL + b"\x12" or len(payload) < 37:
            return self.close(CLOSE_REJECT, "expected PairProof")
        ok = hmac.compare_digest(payload[5:37], self.pairing)
        if ok:
            st.add_paired(self.client_fp.hex())
        st.log.write("pair", result="paired" if ok else "wrong_pin", client_fp=self.client_fp.hex())
        self.send_ctrl(ctrl(0x13, bytes([1 if ok else 0])))
        self.phase = "paired"


def parse_hello_tail(p):
    out = {}
    try:
        i = 20
        out["compositor"] = p[i]; i += 1
        out["gamepad"] = p[i]; i += 1
        (out["bitrate_kbps"],) = struct.unpack_from("<I", p, i); i += 4
        n = p[i]; out["name"] = p[i + 1:i + 1 + n].decode("utf-8", "replace"); i += 1 + n
        n = p[i]; out["launch"] = p[i + 1:i + 1 + n].decode("utf-8", "replace"); i += 1 + n
        out["video_caps"] = p[i]; i += 1
        out["audio_channels"] = p[i]; i += 1
        out["video_codecs"] = p[i]; i += 1
        out["preferred_codec"] = p[i]; i += 1
    except (IndexError, struct.error):
        pass
    return out


class Impairment:
    """Loss, reordering and delay applied to every video datagram sent, and a rate limit that
    behaves like a shaped link: datagrams queue (up to 50 ms of the rate) and leave at the rate;
    what does not fit the queue is dropped on the "link" (counted as sent by the host, never
    received)."""

    def __init__(self, args, seed):
        self.loss = args.loss / 100.0
        self.reorder = args.reorder / 100.0
        self.delay = args.delay_ms / 1000.0
        self.rate = args.rate_mbps * 1e6 / 8 if args.rate_mbps else 0
        self.rng = random.Random(seed)
        self.held = None
        self.schedule = []
        for item in filter(None, args.loss_schedule.split(",")):
            at, pct = item.split(":")
            self.schedule.append((float(at), float(pct) / 100.0))
        self.schedule.sort()
        self.started = None
        self.queue = collections.deque()
        self.queued_bytes = 0
        self.queue_limit = self.rate * 0.050 + 3000
        self.cv = threading.Condition()
        self.link_dropped = 0

    def enqueue(self, datagram):
        """Rate-limited path: False when the link's queue is full (the datagram is lost on the link)."""
        with self.cv:
            if self.queued_bytes + len(datagram) > self.queue_limit:
                self.link_dropped += 1
                return False
            self.queue.append(datagram)
            self.queued_bytes += len(datagram)
            self.cv.notify()
            return True

    def run_shaper(self, send, running):
        next_free = time.monotonic()
        while running():
            with self.cv:
                while not self.queue and running():
                    self.cv.wait(0.1)
                if not self.queue:
                    continue
                datagram = self.queue.popleft()
                self.queued_bytes -= len(datagram)
            now = time.monotonic()
            # A shaper thread descheduled on a busy machine catches up by at most 20 ms, so the
            # link still carries its rate on average (a real serializer never stalls).
            next_free = max(next_free, now - 0.020)
            if next_free > now:
                time.sleep(next_free - now)
            send(datagram)
            next_free += len(datagram) / self.rate


class VideoSession:
    """One streaming client: data socket, video/audio threads, probes."""

    def __init__(self, proto, st, mode, hello):
        self.proto = proto
        self.st = st
        self.args = st.args
        self.mode = tuple(mode)
        self.hello = hello
        # 10-bit and 4:4:4 only when the host is told to offer them and the client's Hello takes them.
        caps = hello.get("video_caps", 0)
        self.bit_depth = 10 if self.args.bit_depth == 10 and caps & 0x01 else 8
        self.chroma_idc = 3 if self.args.chroma == "444" and caps & 0x04 else 1
        self.pix_fmt = {(8, 1): "yuv420p", (10, 1): "yuv420p10le", (8, 3): "yuv444p", (10, 3): "yuv444p10le"}[(self.bit_depth, self.chroma_idc)]
        self.key = os.urandom(16)
        self.salt = os.urandom(4)
        family = socket.AF_INET6 if ":" in self.args.bind else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
        self.sock.bind((self.args.bind, self.args.data_port))
        self.udp_port = self.sock.getsockname()[1]
        self.sealer = packetizer.Sealer(self.key, self.salt, direction=0)
        self.fec_percent = self.args.fec
        self.client_addr = None
        self.running = False
        self.keyframe = threading.Event()
        self.reconfig = None
        self.probe_request = None
        self.lock = threading.Lock()
        self.impair = Impairment(self.args, self.args.seed)
        self.audio_seq = 0
        self.threads = []

    def welcome(self):
        w, h, hz = self.mode
        body = MAGIC + struct.pack("<IHIIIBBHHB", WIRE_VERSION, self.udp_port, w, h, hz, 1, self.fec_percent,
                                   MAX_DATA_PER_BLOCK, WELCOME_SHARD, 1)
        body += self.key + self.salt + struct.pack("<I", 0)
        body += bytes([0, 0]) + struct.pack("<I", self.args.bitrate_kbps) + bytes([self.bit_depth, 1, 1, 1, 0, self.chroma_idc, 2, 2, self.args.host_caps])
        self.st.log.write("welcome", udp_port=self.udp_port, width=w, height=h, hz=hz, fec_percent=self.fec_percent,
                          bit_depth=self.bit_depth, chroma_format_idc=self.chroma_idc)
        return body

    def start(self, client_port):
        self.client_addr = (self.args.bind, client_port)
        self.running = True
        targets = [self.video_loop, self.audio_loop, self.punch_loop]
        if self.impair.rate:
            targets.append(lambda: self.impair.run_shaper(self._delayed_send, lambda: self.running))
        for target in targets:
            t = threading.Thread(target=target, daemon=True)
            t.start()
            self.threads.append(t)

    def stop(self):
        self.running = False

    def request_keyframe(self):
        self.keyframe.set()

    def reconfigure(self, w, h, hz):
        if not (16 <= w <= 7680 and 16 <= h <= 4320 and 1 <= hz <= 240):
            return False
        with self.lock:
            self.reconfig = (w, h, hz)
        return True

    def probe(self, kbps, ms, reply):
        with self.lock:
            self.probe_request = (kbps, ms, reply)

    def punch_loop(self):
        """Learn the client's mapped address from its PFpunch1 datagrams (logged)."""
        self.sock.settimeout(0.2)
        count = 0
        while self.running:
            try:
                data, addr = self.sock.recvfrom(2048)
            except socket.timeout:
                continue
            except OSError:
                return
            if data == b"PFpunch1":
                count += 1
                self.client_addr = addr
                self.st.log.write("punch", count=count, port=addr[1])
            else:
                self.st.log.write("data_plane_garbage", length=len(data))

    def send_datagram(self, datagram):
        imp = self.impair
        if imp.schedule:
            now = time.monotonic()
            if imp.started is None:
                imp.started = now
            while imp.schedule and now - imp.started >= imp.schedule[0][0]:
                imp.loss = imp.schedule.pop(0)[1]
                self.st.log.write("loss_changed", percent=imp.loss * 100)
        if imp.loss and imp.rng.random() < imp.loss:
            return True  # lost on the "wire": counted as sent
        if imp.reorder and imp.held is None and imp.rng.random() < imp.reorder:
            imp.held = datagram
            return True
        self._wire(datagram)
        if imp.held is not None:
            held, imp.held = imp.held, None
            self._wire(held)
        return True

    def _wire(self, datagram):
        if self.impair.rate:
            self.impair.enqueue(datagram)
        elif self.impair.delay:
            threading.Timer(self.impair.delay, self._raw_send, (datagram,)).start()
        else:
            self._raw_send(datagram)

    def _delayed_send(self, datagram):
        if self.impair.delay:
            threading.Timer(self.impair.delay, self._raw_send, (datagram,)).start()
        else:
            self._raw_send(datagram)

    def _raw_send(self, datagram):
        try:
            self.sock.sendto(datagram, self.client_addr)
        except OSError:
            pass

    def video_loop(self):
        st = self.st
        seq_state = packetizer.StreamState()
        filler = None
        if self.args.filler_mbps:
            size = max(1, int(self.args.filler_mbps * 1e6 / 8 / self.mode[2]))
            filler = bytes((i * 131) & 0xFF for i in range(size))
            stream = media.Stream([filler])
        else:
            stream = st.library.stream(*self.mode, pix_fmt=self.pix_fmt)
        position = 0
        frame_index = 0
        frame_interval = 1.0 / self.mode[2]
        next_time = time.monotonic()
        while self.running:
            with self.lock:
                reconfig, self.reconfig = self.reconfig, None
                probe, self.probe_request = self.probe_request, None
            if reconfig and filler is None:
                self.mode = reconfig
                stream = st.library.stream(*self.mode, pix_fmt=self.pix_fmt)
                position = 0
                frame_interval = 1.0 / self.mode[2]
                st.log.write("mode", width=reconfig[0], height=reconfig[1], hz=reconfig[2])
            if probe:
                self.run_probe(seq_state, *probe)
                next_time = time.monotonic()
            if self.keyframe.is_set():
                self.keyframe.clear()
                position = 0
                st.log.write("keyframe_sent", frame_index=frame_index)
            if position >= len(stream.units):
                position = 0  # loop: the sequence restarts at its IDR
            au = stream.units[position]
            position += 1
            pts = time.time_ns()
            is_idr = position == 1
            if filler is None:
                # picture: the number the test pattern paints into this access unit's picture
                st.log.write("au", frame_index=frame_index, sha256=hashlib.sha256(au).hexdigest(), bytes=len(au),
                             idr=is_idr, pts_ns=pts, width=self.mode[0], height=self.mode[1], picture=position - 1)
            for datagram in packetizer.packetize(au, frame_index, pts, WELCOME_SHARD, MAX_DATA_PER_BLOCK,
                                                 self.fec_percent, 0, 0, seq_state, self.sealer):
                self.send_datagram(datagram)
            if filler is None:
                # the send log: t_ns is when the unit's last datagram left (capture->send = t_ns - pts_ns)
                st.log.write("au_sent", frame_index=frame_index)
            frame_index += 1
            if self.args.frames and frame_index >= self.args.frames:
                break
            next_time += frame_interval
            delay = next_time - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                next_time = time.monotonic()

    def run_probe(self, seq_state, kbps, ms, reply):
        st = self.st
        if not (self.hello.get("video_caps", 0) & 0x10):
            reply(ctrl(0x21, struct.pack("<QII", 0, 0, 0)))
            return
        kbps = min(kbps, 3_000_000)
        ms = min(ms, 5000)
        rate = kbps * 1000 / 8
        chunk = 64 * WELCOME_SHARD  # one filler AU: 64 shards
        start = time.monotonic()
        sent_bytes = packets = wire = dropped = 0
        probe_index = 0
        while time.monotonic() - start < ms / 1000:
            filler = bytes(chunk)
            for datagram in packetizer.packetize(filler, probe_index, time.time_ns(), WELCOME_SHARD,
                                                 MAX_DATA_PER_BLOCK, 0, packetizer.USER_PROBE, packetizer.FLAG_PROBE,
                                                 seq_state, self.sealer):
                # Paced per datagram (never more than 1 ms ahead of the target rate), as a host's
                # send loop spreads a burst; an AU-sized burst would only measure the policer's depth.
                ahead = sent_bytes / rate - (time.monotonic() - start)
                if ahead > 0.001:
                    time.sleep(ahead)
                packets += 1
                if self.send_datagram(datagram):
                    wire += 1
                sent_bytes += len(datagram)
            probe_index += 1
        duration = int((time.monotonic() - start) * 1000)
        dropped = 0  # this host's socket never refuses a datagram (a full link queue is link loss)
        st.log.write("probe_result", bytes_sent=sent_bytes, packets=packets, wire_packets=wire, dropped=dropped,
                     duration_ms=duration)
        reply(ctrl(0x21, struct.pack("<QIIII", sent_bytes, packets, duration, wire, dropped)))

    def audio_loop(self):
        """Opus 5 ms stereo frames of a 440 Hz tone, 200 per second, as 0xC9 datagrams."""
        import opuslib
        enc = opuslib.Encoder(48000, 2, opuslib.APPLICATION_RESTRICTED_LOWDELAY)
        n = 240
        phase = 0
        next_time = time.monotonic()
        feedback_at = time.monotonic() + self.args.feedback_at if self.args.feedback_at is not None else None
        while self.running:
            pcm = bytearray()
            for i in range(n):
                v = int(8000 * math.sin(2 * math.pi * 440 * (phase + i) / 48000))
                pcm += struct.pack("<hh", v, v)
            phase += n
            packet = enc.encode(bytes(pcm), n)
            body = bytes([0xC9]) + struct.pack("<IQ", self.audio_seq, time.time_ns()) + packet
            self.audio_seq += 1
            self.proto._loop.call_soon_threadsafe(self._send_quic_datagram, body)
            if feedback_at is not None and time.monotonic() >= feedback_at:
                feedback_at = None
                self.st.log.write("feedback_burst")
                for i in range(5):
                    rumble = bytes([0xCA]) + struct.pack("<HHHBH", 0, 1000 * (i + 1), 2000 * (i + 1), i, 100)
                    self.proto._loop.call_soon_threadsafe(self._send_quic_datagram, rumble)
                # Impulse triggers: the 14-byte form (seq, ttl, then left/right trigger motors).
                rumble = bytes([0xCA]) + struct.pack("<HHHBHHH", 0, 500, 600, 5, 100, 7000, 9000)
                self.proto._loop.call_soon_threadsafe(self._send_quic_datagram, rumble)
                self.proto._loop.call_soon_threadsafe(self._send_quic_datagram, bytes([0xCD, 1, 0, 255, 64, 0]))
                self.proto._loop.call_soon_threadsafe(self._send_quic_datagram, bytes([0xCD, 2, 0, 0b10101]))
                # R2 (which 1): zoned resistance (mode 0x21) in zones 3-9, strength 5 each.
                forces = sum(4 << (3 * z) for z in range(3, 10))
                trigger = bytes([0xCD, 3, 0, 1, 0x21]) + struct.pack("<HI", 0x3F8, forces) + bytes(4)
                self.proto._loop.call_soon_threadsafe(self._send_quic_datagram, trigger)
            next_time += 0.005
            delay = next_time - time.monotonic()
            if delay > 0:
                time.sleep(delay)

    def _send_quic_datagram(self, body):
        try:
            self.proto._quic.send_datagram_frame(body)
            self.proto.transmit()
        except Exception:
            pass


async def advertise(args, port, fp):
    """The TXT keys of the notes' §11, on the address we bind."""
    from zeroconf import ServiceInfo
    from zeroconf.asyncio import AsyncZeroconf
    txt = {"proto": "punktfunk/1", "id": "standin-" + fp[:4].hex(), "fp": fp.hex(),
           "pair": "required" if args.require_pairing else "optional", "mgmt": "0", "os": "linux/standin",
           "addr": args.bind}
    info = ServiceInfo("_punktfunk._udp.local.", "%s._punktfunk._udp.local." % args.advertise,
                       addresses=[socket.inet_aton(args.bind)], port=port, properties=txt,
                       server="punktfunk-standin.local.")
    zc = AsyncZeroconf(interfaces=[args.bind])
    await zc.async_register_service(info)
    return zc


async def main():
    p = argparse.ArgumentParser(description="stand-in punktfunk/1 host (not the real host)")
    p.add_argument("--port", type=int, default=9777)
    p.add_argument("--bind", default="127.0.0.1")
    p.add_argument("--data-port", type=int, default=0,
                   help="UDP port of the video data plane (default: one the system picks per session)")
    p.add_argument("--pin", help="arm pairing with this 4-digit PIN (single use)")
    p.add_argument("--pin-file", help="read the PIN from this file instead")
    p.add_argument("--require-pairing", action="store_true")
    p.add_argument("--fec", type=int, default=20, help="FEC percent (m = ceil(k * pct / 100))")
    p.add_argument("--loss", type=float, default=0.0, help="percent of sent video datagrams dropped")
    p.add_argument("--loss-schedule", default="",
                   help="change --loss during the stream: SECONDS:PCT,... measured from the first video datagram")
    p.add_argument("--reorder", type=float, default=0.0, help="percent of video datagrams swapped with the next")
    p.add_argument("--delay-ms", type=float, default=0.0)
    p.add_argument("--rate-mbps", type=float, default=0.0, help="police sent video datagrams to this rate")
    p.add_argument("--mode", default="1920x1080x60")
    p.add_argument("--bitrate-kbps", type=int, default=20000)
    p.add_argument("--filler-mbps", type=float, default=0.0,
                   help="benchmarks: send filler access units at this rate instead of HEVC (no AU log)")
    p.add_argument("--frames", type=int, default=0, help="stop video after this many AUs (0 = unbounded)")
    p.add_argument("--feedback-at", type=float, help="send a rumble + HID burst this many seconds into the stream")
    p.add_argument("--bit-depth", type=int, choices=(8, 10), default=8,
                   help="stream 10-bit (Main 10) to clients whose Hello offers it (default 8)")
    p.add_argument("--chroma", choices=("420", "444"), default="420",
                   help="stream 4:4:4 to clients whose Hello offers it (default 420)")
    p.add_argument("--host-caps", type=lambda v: int(v, 0), default=0x01,
                   help="the Welcome's host_caps byte (default 0x01: takes whole gamepad states)")
    p.add_argument("--state-dir", required=True, help="certificate and paired clients live here")
    p.add_argument("--media-dir", required=True, help="cache of encoded test-pattern HEVC")
    p.add_argument("--prepare", action="append", default=[], help="also encode this mode before listening")
    p.add_argument("--log", help="JSON-lines event log")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--advertise", metavar="NAME", help="announce _punktfunk._udp over mDNS (python-zeroconf) as NAME")
    args = p.parse_args()
    try:
        w, h, hz = (int(x) for x in args.mode.lower().split("x"))
    except ValueError:
        p.error("--mode is WIDTHxHEIGHTxHZ")
    args.mode = (w, h, hz)
    if args.pin_file:
        with open(args.pin_file) as f:
            args.pin = f.read().strip()

    cert_path, key_path, fp = load_or_create_certificate(args.state_dir)
    st = HostState(args, fp)
    if not args.filler_mbps:
        st.library.stream(*args.mode)
        offered = {(8, "420"): None, (10, "420"): "yuv420p10le", (8, "444"): "yuv444p", (10, "444"): "yuv444p10le"}[(args.bit_depth, args.chroma)]
        if offered:
            st.library.stream(*args.mode, pix_fmt=offered)
    for m in args.prepare:
        st.library.stream(*(int(x) for x in m.lower().split("x")))
    HostProtocol.state = st
    config = QuicConfiguration(is_client=False, alpn_protocols=["pkf1"], idle_timeout=8.0,
                               max_datagram_frame_size=65536)
    config.load_cert_chain(cert_path, key_path)
    server = await serve(args.bind, args.port, configuration=config, create_protocol=HostProtocol)
    port = server._transport.get_extra_info("sockname")[1]
    zc = None
    if args.advertise:
        zc = await advertise(args, port, fp)
    print("fingerprint %s" % fp.hex(), flush=True)
    print("listening %s:%d" % (args.bind, port), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    if zc:
        await zc.async_close()
    server.close()


if __name__ == "__main__":
    asyncio.run(main())
