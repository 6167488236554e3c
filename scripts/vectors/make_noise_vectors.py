#!/usr/bin/env python3
"""Generate Noise_KKpsk2 known-answer vectors for the Sendspin encrypted wire.

Run with the project venv (aiosendspin 10.2.1 + noiseprotocol 0.3.1):

    /work/main/.venv/bin/python scripts/vectors/make_noise_vectors.py

Writes Tests/SendspinTests/Fixtures/noise-vectors.json (pretty-printed, deterministic).

What is built, per suite (ChaChaPoly and AESGCM):
  * server = Noise initiator, client = Noise responder (Sendspin roles);
  * fixed static and fixed ephemeral private keys (Keypair.EPHEMERAL; the
    library warns about pre-set ephemerals, which is expected here);
  * PSK = Sentinel = SHA-256(b"sendspin-sentinel-psk-v1");
  * prologue = exact UTF-8 bytes of the client/init text followed by the exact
    bytes of the server/init text, both serialized by aiosendspin's own models
    (compact orjson, key order = dataclass field order, "payload" BEFORE "type");
  * msg 1 payload = aiosendspin's NoiseMsg1Payload JSON for the Sentinel
    ({"psk_id":"...","psk_category":"sn"}), msg 2 payload = b"{}";
  * several transport messages in each direction (nonces 0..3), with the
    Sendspin 1-byte message-type prefix inside the plaintext;
  * one oversized message split into type-1 fragments exactly as
    aiosendspin.noise.wire._fragment does (hashes only, to keep the file small).

Cross-checks (assertions): the responder decrypts every handshake/transport
message back to the original plaintext; both sides report the same handshake
hash; a hand-rolled KKpsk2 on `cryptography` primitives reproduces msg 1, msg 2,
h, the split keys and every transport ciphertext; the same handshake replayed through aiosendspin's own connection builder
(aiosendspin.noise.session._build_conn + NoiseSession) yields identical bytes;
setting the Sentinel on the responder up front (instead of aiosendspin's
placeholder-then-mix_psk) yields identical bytes; psk_id constants match the
values in /work/shared/protocols/sendspin.md.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
import warnings
from pathlib import Path

import aiosendspin
from aiosendspin.models.core import (
    ClientHelloMessage,
    ClientHelloPayload,
    ClientStateMessage,
    ClientStatePayload,
    ClientTimeMessage,
    ClientTimePayload,
    DeviceInfo,
    PairMethodDescriptor,
    ServerActivateMessage,
    ServerActivatePayload,
    ServerHelloMessage,
    ServerHelloPayload,
    ServerTimeMessage,
    ServerTimePayload,
    StreamStartMessage,
    StreamStartPayload,
    SupportedPairMethods,
    UnpairedAccess,
)
from aiosendspin.models.player import (
    ClientHelloPlayerSupport,
    PlayerStatePayload,
    StreamStartPlayer,
    SupportedAudioFormat,
    pack_player_audio_frame,
    stamp_send_ahead,
)
from aiosendspin.models.types import AudioCodec, PlayerCommand
from aiosendspin.noise import (
    SENTINEL_PSK,
    ClientInitMessage,
    ClientInitPayload,
    NoiseCipherSuite,
    NoiseHandshakeMessage,
    NoiseHandshakePayload,
    NoiseMsg1Payload,
    NoiseMsg2Payload,
    NoiseSession,
    ServerInitMessage,
    ServerInitPayload,
    b64url_encode,
    psk_id_for,
)
from aiosendspin.noise.constants import MAX_TRANSPORT_PLAINTEXT
from aiosendspin.noise.keys import Identity
from aiosendspin.noise.session import _build_conn  # noqa: PLC2701 - cross-check only
from aiosendspin.noise.trust_store import PskCategory
from aiosendspin.noise.wire import _fragment  # noqa: PLC2701 - cross-check only
from noise.connection import Keypair, NoiseConnection

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "Tests" / "SendspinTests" / "Fixtures" / "noise-vectors.json"

# Values published in /work/shared/protocols/sendspin.md §3 (checked below).
NOTES_SENTINEL_PSK_HEX = "1b5e24dbc1aed95fc2a5a338a90c05df44bd10f5ec1f4cd66cbf86272767b9d3"
NOTES_SENTINEL_PSK_ID = "GFsV9tLaSQm9HcFWpKsgYQOr7wFTvNUtkmFwuVz3zoo"
NOTES_SENTINEL_PSK_ID_HEX = "185b15f6d2da4909bd1dc156a4ab206103abef0153bcd52d926170b95cf7ce8a"
NOTES_FIVE_PSK_ID = "-zraBRghtlU_WiGdO1hpDWL_x6ylHh3-WhFS5FM-FyA"


def _seed(label: str) -> bytes:
    """Deterministic 32-byte value derived from a label (used as raw private key / PSK)."""
    return hashlib.sha256(b"farcast-test-vector:" + label.encode("ascii")).digest()


def _identity(label: str) -> Identity:
    return Identity.from_private_bytes(_seed(label))


def _x25519_pub(priv: bytes) -> bytes:
    return Identity.from_private_bytes(priv).public_bytes


def _raw_conn(
    name: bytes,
    *,
    initiator: bool,
    static_priv: bytes,
    ephemeral_priv: bytes,
    remote_static_pub: bytes,
    prologue: bytes,
    psk: bytes,
) -> NoiseConnection:
    """Plain noiseprotocol connection (independent of aiosendspin's builder)."""
    conn = NoiseConnection.from_name(name)
    if initiator:
        conn.set_as_initiator()
    else:
        conn.set_as_responder()
    conn.set_keypair_from_private_bytes(Keypair.STATIC, static_priv)
    conn.set_keypair_from_private_bytes(Keypair.EPHEMERAL, ephemeral_priv)
    conn.set_keypair_from_public_bytes(Keypair.REMOTE_STATIC, remote_static_pub)
    conn.set_prologue(prologue)
    conn.set_psks(psks=[psk])
    conn.start_handshake()
    return conn


# --- Independent KKpsk2 (Noise rev. 34 §5, §9) built only on `cryptography` primitives ---------
# Used purely as a second opinion on noiseprotocol's output (protocol-name handling, PSK
# mixing of `e`, nonce layout, split order).

def _hmac(key: bytes, data: bytes) -> bytes:
    import hmac as _h

    return _h.new(key, data, hashlib.sha256).digest()


def _hkdf(ck: bytes, ikm: bytes, n: int) -> list[bytes]:
    temp = _hmac(ck, ikm)
    out, prev = [], b""
    for i in range(1, n + 1):
        prev = _hmac(temp, prev + bytes([i]))
        out.append(prev)
    return out


def _aead(suite: NoiseCipherSuite, key: bytes, n: int, ad: bytes, data: bytes, enc: bool) -> bytes:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

    if suite is NoiseCipherSuite.CHACHAPOLY:
        nonce, c = b"\x00" * 4 + n.to_bytes(8, "little"), ChaCha20Poly1305(key)
    else:
        nonce, c = b"\x00" * 4 + n.to_bytes(8, "big"), AESGCM(key)
    return c.encrypt(nonce, data, ad) if enc else c.decrypt(nonce, data, ad)


def _dh(priv: bytes, pub: bytes) -> bytes:
    from cryptography.hazmat.primitives.asymmetric import x25519

    return x25519.X25519PrivateKey.from_private_bytes(priv).exchange(
        x25519.X25519PublicKey.from_public_bytes(pub))


class _Sym:
    def __init__(self, suite: NoiseCipherSuite, name: bytes) -> None:
        self.suite = suite
        self.h = name.ljust(32, b"\x00") if len(name) <= 32 else hashlib.sha256(name).digest()
        self.ck = self.h
        self.k: bytes | None = None
        self.n = 0

    def mix_hash(self, data: bytes) -> None:
        self.h = hashlib.sha256(self.h + data).digest()

    def mix_key(self, ikm: bytes) -> None:
        self.ck, self.k = _hkdf(self.ck, ikm, 2)
        self.n = 0

    def mix_key_and_hash(self, ikm: bytes) -> None:
        self.ck, th, self.k = _hkdf(self.ck, ikm, 3)
        self.mix_hash(th)
        self.n = 0

    def enc_hash(self, pt: bytes) -> bytes:
        ct = _aead(self.suite, self.k, self.n, self.h, pt, True) if self.k else pt
        self.n += 1 if self.k else 0
        self.mix_hash(ct)
        return ct

    def dec_hash(self, ct: bytes) -> bytes:
        pt = _aead(self.suite, self.k, self.n, self.h, ct, False) if self.k else ct
        self.n += 1 if self.k else 0
        self.mix_hash(ct)
        return pt


def _independent_kkpsk2(suite: NoiseCipherSuite, *, prologue: bytes, psk: bytes,
                        s_i: bytes, e_i: bytes, s_r: bytes, e_r: bytes,
                        p1: bytes, p2: bytes) -> dict:
    """Run both sides of Noise_KKpsk2 by hand; return msg1, msg2, h and the split keys."""
    name = suite.pattern_name
    pub = _x25519_pub
    ini, res = _Sym(suite, name), _Sym(suite, name)
    for st in (ini, res):
        st.mix_hash(prologue)
        st.mix_hash(pub(s_i))  # -> s (initiator static first)
        st.mix_hash(pub(s_r))  # <- s
    # msg 1: e, es, ss
    ini.mix_hash(pub(e_i)); ini.mix_key(pub(e_i))  # psk present => MixKey(e.pub)
    ini.mix_key(_dh(e_i, pub(s_r))); ini.mix_key(_dh(s_i, pub(s_r)))
    msg1 = pub(e_i) + ini.enc_hash(p1)
    re_i = msg1[:32]
    res.mix_hash(re_i); res.mix_key(re_i)
    res.mix_key(_dh(s_r, re_i)); res.mix_key(_dh(s_r, pub(s_i)))
    assert res.dec_hash(msg1[32:]) == p1
    # msg 2: e, ee, se, psk
    res.mix_hash(pub(e_r)); res.mix_key(pub(e_r))
    res.mix_key(_dh(e_r, re_i)); res.mix_key(_dh(e_r, pub(s_i))); res.mix_key_and_hash(psk)
    msg2 = pub(e_r) + res.enc_hash(p2)
    re_r = msg2[:32]
    ini.mix_hash(re_r); ini.mix_key(re_r)
    ini.mix_key(_dh(e_i, re_r)); ini.mix_key(_dh(s_i, re_r)); ini.mix_key_and_hash(psk)
    assert ini.dec_hash(msg2[32:]) == p2
    assert ini.h == res.h and ini.ck == res.ck
    k1, k2 = _hkdf(ini.ck, b"", 2)
    return {"msg1": msg1, "msg2": msg2, "h": ini.h, "k_s2c": k1, "k_c2s": k2}


def _sendspin_plaintexts() -> tuple[list[dict], list[dict]]:
    """Representative transport plaintexts (type byte + body) in both directions."""
    s2c: list[dict] = []
    c2s: list[dict] = []

    def json_msg(desc: str, text: str) -> dict:
        return {"description": desc, "message_type": 0, "json_text": text,
                "plaintext": b"\x00" + text.encode("utf-8")}

    s2c.append(json_msg("server/hello", ServerHelloMessage(
        payload=ServerHelloPayload(name="Farcast Vector Server")).to_json()))
    s2c.append(json_msg("server/activate (first, unpaired Sentinel session)", ServerActivateMessage(
        payload=ServerActivatePayload(activities=[], active_roles=["player@v1"])).to_json()))
    s2c.append(json_msg("server/time", ServerTimeMessage(payload=ServerTimePayload(
        client_transmitted=1_000_000, server_received=51_000_250, server_transmitted=51_000_300,
    )).to_json()))
    stream_start = StreamStartMessage(payload=StreamStartPayload(
        server_transmitted=51_100_000,
        player=StreamStartPlayer(codec=AudioCodec.PCM, sample_rate=48000, channels=2, bit_depth=16),
    )).to_json()
    s2c.append(json_msg("stream/start (pcm 48k/16/2)", stream_start))
    # Audio chunk: 13-byte header ([0x04][int64 BE timestamp][uint32 BE send_ahead]) + 8 PCM frames.
    pcm = bytes((i * 37) & 0xFF for i in range(8 * 4))
    frame = pack_player_audio_frame(51_400_000, pcm)
    stamp_send_ahead(frame, 300_000)
    s2c.append({"description": "audio chunk: ts=51400000 us, send_ahead=300000 us, 8 frames s16le stereo",
                "message_type": 4, "timestamp_us": 51_400_000, "send_ahead_us": 300_000,
                "codec_payload_hex": pcm.hex(), "plaintext": bytes(frame)})

    hello = ClientHelloMessage(payload=ClientHelloPayload(
        name="Farcast Vector Client",
        supported_roles=["player@v1"],
        device_info=DeviceInfo(product_name="Farcast", manufacturer="Farcast",
                               software_version="0.0.0"),
        player_support=ClientHelloPlayerSupport(
            supported_formats=[
                SupportedAudioFormat(codec=AudioCodec.PCM, channels=2, sample_rate=48000, bit_depth=16),
                SupportedAudioFormat(codec=AudioCodec.FLAC, channels=2, sample_rate=48000, bit_depth=16),
            ],
            buffer_capacity=1_000_000,
        ),
        supported_pair_methods=SupportedPairMethods(pairing_psk=PairMethodDescriptor()),
        unpaired_access=UnpairedAccess(enabled=True),
    )).to_json()
    c2s.append(json_msg("client/hello", hello))
    c2s.append(json_msg("client/time", ClientTimeMessage(
        payload=ClientTimePayload(client_transmitted=1_000_000)).to_json()))
    c2s.append(json_msg("client/state (initial, not yet synchronized)", ClientStateMessage(
        payload=ClientStatePayload(available=False, player=PlayerStatePayload(
            volume=100, muted=False, output_delay_ms=0, required_lead_time_ms=250,
            min_buffer_ms=250, supported_commands=[PlayerCommand.VOLUME, PlayerCommand.MUTE]),
        )).to_json()))
    c2s.append(json_msg("client/state (synchronized)", ClientStateMessage(
        payload=ClientStatePayload(available=True, player=PlayerStatePayload(
            volume=100, muted=False, output_delay_ms=0, required_lead_time_ms=250,
            min_buffer_ms=250, supported_commands=[PlayerCommand.VOLUME, PlayerCommand.MUTE]),
        )).to_json()))
    return s2c, c2s


def _build_suite(suite: NoiseCipherSuite) -> dict:
    name = suite.pattern_name
    server_static = _identity("server-static")
    client_static = _identity("client-static")
    server_eph_priv = _seed("server-ephemeral")
    client_eph_priv = _seed("client-ephemeral")

    # Cleartext init texts exactly as aiosendspin builds them (driver.run_handshake_client/_server).
    client_init_text = ClientInitMessage(payload=ClientInitPayload(
        client_id=client_static.peer_id, version=1, suite=suite.value)).to_json()
    server_init_text = ServerInitMessage(payload=ServerInitPayload(
        server_id=server_static.peer_id, version=1)).to_json()
    # Independent check of the serialization rules (compact, payload first, field order).
    assert client_init_text == (
        '{"payload":{"client_id":"%s","version":1,"suite":"%s"},"type":"client/init"}'
        % (client_static.peer_id, suite.value)), client_init_text
    assert server_init_text == (
        '{"payload":{"server_id":"%s","version":1},"type":"server/init"}' % server_static.peer_id
    ), server_init_text
    prologue = client_init_text.encode("utf-8") + server_init_text.encode("utf-8")

    sentinel_id = psk_id_for(SENTINEL_PSK)
    msg1_payload = NoiseMsg1Payload(psk_id=sentinel_id,
                                    psk_category=PskCategory.SENTINEL.code).to_json().encode("utf-8")
    assert msg1_payload == ('{"psk_id":"%s","psk_category":"sn"}' % sentinel_id).encode()
    msg2_payload = NoiseMsg2Payload().to_json().encode("utf-8")
    assert msg2_payload == b"{}"

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pre-set ephemeral keypair warning
        ini = _raw_conn(name, initiator=True, static_priv=server_static.private_bytes,
                        ephemeral_priv=server_eph_priv, remote_static_pub=client_static.public_bytes,
                        prologue=prologue, psk=SENTINEL_PSK)
        # Responder the aiosendspin way: placeholder PSK, read msg 1, then mix the resolved PSK.
        res = _raw_conn(name, initiator=False, static_priv=client_static.private_bytes,
                        ephemeral_priv=client_eph_priv, remote_static_pub=server_static.public_bytes,
                        prologue=prologue, psk=b"\x00" * 32)

    msg1 = bytes(ini.write_message(msg1_payload))
    assert len(msg1) == 32 + len(msg1_payload) + 16
    got1 = bytes(res.read_message(msg1))
    assert got1 == msg1_payload
    res.set_psks(psks=[SENTINEL_PSK])
    msg2 = bytes(res.write_message(msg2_payload))
    assert len(msg2) == 50
    got2 = bytes(ini.read_message(msg2))
    assert got2 == msg2_payload
    assert ini.handshake_finished and res.handshake_finished
    h_ini = bytes(ini.get_handshake_hash())
    h_res = bytes(res.get_handshake_hash())
    print(f"{name.decode()}: handshake hash initiator={h_ini.hex()}")
    print(f"{name.decode()}: handshake hash responder={h_res.hex()}")
    assert h_ini == h_res

    ps = ini.noise_protocol
    k_s2c = ps.cipher_state_encrypt.k
    k_c2s = ps.cipher_state_decrypt.k
    assert res.noise_protocol.cipher_state_decrypt.k == k_s2c
    assert res.noise_protocol.cipher_state_encrypt.k == k_c2s

    # Cross-check 1: responder with the Sentinel set from the start gives identical bytes.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ini_b = _raw_conn(name, initiator=True, static_priv=server_static.private_bytes,
                          ephemeral_priv=server_eph_priv, remote_static_pub=client_static.public_bytes,
                          prologue=prologue, psk=SENTINEL_PSK)
        res_b = _raw_conn(name, initiator=False, static_priv=client_static.private_bytes,
                          ephemeral_priv=client_eph_priv, remote_static_pub=server_static.public_bytes,
                          prologue=prologue, psk=SENTINEL_PSK)
    assert bytes(ini_b.write_message(msg1_payload)) == msg1
    res_b.read_message(msg1)
    assert bytes(res_b.write_message(msg2_payload)) == msg2
    ini_b.read_message(msg2)
    assert bytes(res_b.get_handshake_hash()) == h_ini

    # Cross-check 2: aiosendspin's own connection builder and NoiseSession wrapper.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a_ini = NoiseSession(_build_conn(
            suite=suite, initiator=True, local_static_priv=server_static.private_bytes,
            remote_static_pub=client_static.public_bytes, prologue=prologue, psk=SENTINEL_PSK,
            ephemeral_priv=server_eph_priv), suite=suite)
        a_res = NoiseSession(_build_conn(
            suite=suite, initiator=False, local_static_priv=client_static.private_bytes,
            remote_static_pub=server_static.public_bytes, prologue=prologue, psk=b"\x00" * 32,
            ephemeral_priv=client_eph_priv), suite=suite)
    assert a_ini.write_message(msg1_payload) == msg1
    assert a_res.read_message(msg1) == msg1_payload
    a_res.mix_psk(SENTINEL_PSK)
    assert a_res.write_message(msg2_payload) == msg2
    assert a_ini.read_message(msg2) == msg2_payload
    assert a_ini.handshake_hash == h_ini == a_res.handshake_hash


    # Cross-check 3: hand-rolled KKpsk2 on `cryptography` primitives.
    ind = _independent_kkpsk2(suite, prologue=prologue, psk=SENTINEL_PSK,
                              s_i=server_static.private_bytes, e_i=server_eph_priv,
                              s_r=client_static.private_bytes, e_r=client_eph_priv,
                              p1=msg1_payload, p2=msg2_payload)
    assert ind["msg1"] == msg1 and ind["msg2"] == msg2 and ind["h"] == h_ini
    assert ind["k_s2c"] == bytes(k_s2c) and ind["k_c2s"] == bytes(k_c2s)

    # Handshake text frames as they travel (aiosendspin driver._pack_handshake).
    hs1_text = NoiseHandshakeMessage(payload=NoiseHandshakePayload(data=b64url_encode(msg1))).to_json()
    hs2_text = NoiseHandshakeMessage(payload=NoiseHandshakePayload(data=b64url_encode(msg2))).to_json()

    # Transport messages.
    s2c_pts, c2s_pts = _sendspin_plaintexts()
    s2c, c2s = [], []
    for nonce, item in enumerate(s2c_pts):
        pt = item.pop("plaintext")
        ct = bytes(ini.encrypt(pt))
        assert bytes(res.decrypt(ct)) == pt
        assert a_ini.encrypt(pt) == ct and a_res.decrypt(ct) == pt
        assert _aead(suite, ind["k_s2c"], nonce, b"", pt, True) == ct
        s2c.append({"nonce": nonce, **item, "plaintext_hex": pt.hex(), "ciphertext_hex": ct.hex()})
    for nonce, item in enumerate(c2s_pts):
        pt = item.pop("plaintext")
        ct = bytes(res.encrypt(pt))
        assert bytes(ini.decrypt(ct)) == pt
        assert a_res.encrypt(pt) == ct and a_ini.decrypt(ct) == pt
        assert _aead(suite, ind["k_c2s"], nonce, b"", pt, True) == ct
        c2s.append({"nonce": nonce, **item, "plaintext_hex": pt.hex(), "ciphertext_hex": ct.hex()})

    # Fragmentation: a 150,000-byte type-0 message (S->C), deterministic content.
    body_len = 150_000
    body = bytes((i * 131 + 7) & 0xFF for i in range(body_len))
    big = b"\x00" + body
    frames = _fragment(big)
    frag_records = []
    next_nonce = len(s2c)
    reassembled = bytearray()
    for idx, fr in enumerate(frames):
        ct = bytes(ini.encrypt(fr))
        dec = bytes(res.decrypt(ct))
        assert dec == fr
        assert len(fr) <= MAX_TRANSPORT_PLAINTEXT and len(ct) == len(fr) + 16 <= 65535
        hdr_len = 3 if idx == 0 else 2
        reassembled += dec[hdr_len:]
        frag_records.append({
            "nonce": next_nonce + idx,
            "header_hex": fr[:hdr_len].hex(),
            "plaintext_length": len(fr),
            "plaintext_sha256": hashlib.sha256(fr).hexdigest(),
            "ciphertext_length": len(ct),
            "ciphertext_sha256": hashlib.sha256(ct).hexdigest(),
            "ciphertext_first32_hex": ct[:32].hex(),
        })
    assert bytes(reassembled) == body

    return {
        "suite": suite.value,
        "protocol_name": name.decode("ascii"),
        "protocol_name_length": len(name),
        "initial_h_rule": "h = protocol_name padded with zeros" if len(name) <= 32
        else "h = SHA-256(protocol_name)",
        "roles": {"initiator": "server", "responder": "client"},
        "keys": {
            "server_static_private_hex": server_static.private_bytes.hex(),
            "server_static_public_hex": server_static.public_bytes.hex(),
            "server_id": server_static.peer_id,
            "client_static_private_hex": client_static.private_bytes.hex(),
            "client_static_public_hex": client_static.public_bytes.hex(),
            "client_id": client_static.peer_id,
            "server_ephemeral_private_hex": server_eph_priv.hex(),
            "server_ephemeral_public_hex": _x25519_pub(server_eph_priv).hex(),
            "client_ephemeral_private_hex": client_eph_priv.hex(),
            "client_ephemeral_public_hex": _x25519_pub(client_eph_priv).hex(),
        },
        "psk_hex": SENTINEL_PSK.hex(),
        "psk_category": "sn",
        "prologue": {
            "client_init_text": client_init_text,
            "server_init_text": server_init_text,
            "prologue_hex": prologue.hex(),
            "prologue_length": len(prologue),
        },
        "handshake": {
            "msg1_payload_text": msg1_payload.decode("utf-8"),
            "msg1_hex": msg1.hex(),
            "msg1_length": len(msg1),
            "msg1_ephemeral_public_hex": msg1[:32].hex(),
            "msg1_ws_text_frame": hs1_text,
            "msg2_payload_text": msg2_payload.decode("utf-8"),
            "msg2_hex": msg2.hex(),
            "msg2_length": len(msg2),
            "msg2_ephemeral_public_hex": msg2[:32].hex(),
            "msg2_ws_text_frame": hs2_text,
            "handshake_hash_hex": h_ini.hex(),
            "transport_key_server_to_client_hex": bytes(k_s2c).hex(),
            "transport_key_client_to_server_hex": bytes(k_c2s).hex(),
        },
        "transport": {
            "nonce_format": ("4 zero bytes || uint64 little-endian counter"
                             if suite is NoiseCipherSuite.CHACHAPOLY
                             else "4 zero bytes || uint64 big-endian counter"),
            "associated_data": "empty",
            "server_to_client": s2c,
            "client_to_server": c2s,
        },
        "fragmentation_server_to_client": {
            "description": ("Continues the server->client cipher state after the messages above. "
                            "Original plaintext = 0x00 || body, body[i] = (i*131+7) & 0xFF, "
                            f"len(body) = {body_len}. Split per aiosendspin.noise.wire._fragment: "
                            "first frame [0x01][flags|0x02][orig_type] + 65516 bytes, later frames "
                            "[0x01][flags] + up to 65517 bytes; flags 0x01 = last."),
            "original_type": 0,
            "body_length": body_len,
            "body_sha256": hashlib.sha256(body).hexdigest(),
            "frames": frag_records,
        },
    }


def _psk_id_vectors() -> dict:
    sentinel_id = psk_id_for(SENTINEL_PSK)
    five = hashlib.sha256(b"5").digest()
    example_pairing = _seed("example-pairing-psk")
    assert SENTINEL_PSK.hex() == NOTES_SENTINEL_PSK_HEX
    assert sentinel_id == NOTES_SENTINEL_PSK_ID
    assert hashlib.sha256(b"sendspin-psk-id-v1" + SENTINEL_PSK).hexdigest() == NOTES_SENTINEL_PSK_ID_HEX
    assert psk_id_for(five) == NOTES_FIVE_PSK_ID
    out = []
    for desc, psk in (
        ("Sentinel PSK = SHA-256(b'sendspin-sentinel-psk-v1')", SENTINEL_PSK),
        ("Alphabet check: PSK = SHA-256(b'5') (psk_id contains '-' and '_')", five),
        ("Example pairing PSK = SHA-256(b'farcast-test-vector:example-pairing-psk')", example_pairing),
        ("Example PSK = bytes 0x00..0x1f", bytes(range(32))),
    ):
        digest = hashlib.sha256(b"sendspin-psk-id-v1" + psk).digest()
        out.append({
            "description": desc,
            "psk_hex": psk.hex(),
            "psk_b64url": b64url_encode(psk),
            "psk_id_digest_hex": digest.hex(),
            "psk_id": psk_id_for(psk),
            "psk_id_std_base64_padded_WRONG": base64.b64encode(digest).decode(),
        })
    return {
        "formula": "psk_id = base64url_nopad(SHA-256(b'sendspin-psk-id-v1' || psk))",
        "label_ascii": "sendspin-psk-id-v1",
        "label_hex": b"sendspin-psk-id-v1".hex(),
        "vectors": out,
    }


def main() -> int:
    doc = {
        "generator": "scripts/vectors/make_noise_vectors.py",
        "versions": {
            "aiosendspin": getattr(aiosendspin, "__version__", None) or _dist_version("aiosendspin"),
            "noiseprotocol": _dist_version("noiseprotocol"),
            "python": sys.version.split()[0],
        },
        "notes": [
            "All JSON texts are byte-exact as aiosendspin 10.2.1 serializes them (orjson compact, "
            "no spaces, keys in dataclass field order, envelope key 'payload' precedes 'type').",
            "The prologue is client_init_text bytes immediately followed by server_init_text bytes.",
            "Handshake message 1 payload is readable before the PSK is known (psk2).",
            "Transport plaintexts start with the Sendspin message-type byte (0 = JSON body, "
            "1 = fragment, 4 = player audio chunk).",
        ],
        "psk_id": _psk_id_vectors(),
        "suites": [_build_suite(NoiseCipherSuite.CHACHAPOLY), _build_suite(NoiseCipherSuite.AESGCM)],
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=2, sort_keys=False, ensure_ascii=False) + "\n",
                   encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


def _dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


if __name__ == "__main__":
    raise SystemExit(main())
