#!/usr/bin/env python3
"""Known-answer vectors for the WireGuard core, from an implementation independent of ours.

Written from the WireGuard paper (section 5.4) on PyPI `cryptography` (X25519, ChaCha20-Poly1305)
and hashlib's BLAKE2s; HChaCha20 for the cookie's XChaCha20-Poly1305 is written here from
draft-irtf-cfrg-xchacha and checked against the draft's own test vector. Fixed keys,
ephemerals, indices, timestamp, cookie secret and nonce make every byte reproducible.

    python3 scripts/gen/wireguard_vectors.py > Tests/WireGuardTests/HandshakeVectors.swift
"""
import hashlib
import hmac
import struct

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat


def blake(*parts, digest_size=32, key=b""):
    h = hashlib.blake2s(digest_size=digest_size, key=key)
    for p in parts:
        h.update(p)
    return h.digest()


def mac(key, data):
    return blake(data, digest_size=16, key=key)


def hmac_blake(key, data):
    return hmac.new(key, data, hashlib.blake2s).digest()


def kdf(n, key, data):
    t0 = hmac_blake(key, data)
    out, prev = [], b""
    for i in range(1, n + 1):
        prev = hmac_blake(t0, prev + bytes([i]))
        out.append(prev)
    return out


def aead(key, counter, plain, aad):
    return ChaCha20Poly1305(key).encrypt(b"\0" * 4 + struct.pack("<Q", counter), plain, aad)


def rotl(x, n):
    return ((x << n) | (x >> (32 - n))) & 0xFFFFFFFF


def hchacha20(key, nonce16):
    s = [0x61707865, 0x3320646E, 0x79622D32, 0x6B206574]
    s += list(struct.unpack("<8I", key)) + list(struct.unpack("<4I", nonce16))

    def qr(a, b, c, d):
        s[a] = (s[a] + s[b]) & 0xFFFFFFFF; s[d] = rotl(s[d] ^ s[a], 16)
        s[c] = (s[c] + s[d]) & 0xFFFFFFFF; s[b] = rotl(s[b] ^ s[c], 12)
        s[a] = (s[a] + s[b]) & 0xFFFFFFFF; s[d] = rotl(s[d] ^ s[a], 8)
        s[c] = (s[c] + s[d]) & 0xFFFFFFFF; s[b] = rotl(s[b] ^ s[c], 7)

    for _ in range(10):
        qr(0, 4, 8, 12); qr(1, 5, 9, 13); qr(2, 6, 10, 14); qr(3, 7, 11, 15)
        qr(0, 5, 10, 15); qr(1, 6, 11, 12); qr(2, 7, 8, 13); qr(3, 4, 9, 14)
    return struct.pack("<8I", *(s[0:4] + s[12:16]))


def xaead(key, nonce24, plain, aad):
    sub = hchacha20(key, nonce24[:16])
    return ChaCha20Poly1305(sub).encrypt(b"\0" * 4 + nonce24[16:], plain, aad)


# draft-irtf-cfrg-xchacha-03, section 2.2.1
assert hchacha20(bytes(range(32)), bytes.fromhex("000000090000004a0000000031415927")).hex() == \
    "82413b4227b27bfed30e42508a877d73a0f9e4d58a74a853c12ec41326d3ecdc"


def private(seed):
    return X25519PrivateKey.from_private_bytes(hashlib.sha256(seed).digest())


def raw_private(k):
    from cryptography.hazmat.primitives.serialization import NoEncryption, PrivateFormat
    return k.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())


def pub(k):
    return k.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def dh(k, p):
    return k.exchange(X25519PublicKey.from_public_bytes(p))


CONSTRUCTION = b"Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s"
IDENTIFIER = b"WireGuard v1 zx2c4 Jason@zx2c4.com"

s_i, s_r = private(b"initiator static"), private(b"responder static")
e_i, e_r = private(b"initiator ephemeral"), private(b"responder ephemeral")
psk = hashlib.sha256(b"preshared").digest()
sender_i, sender_r = 0x11223344, 0x55667788
seconds, nanos = 1795864679, 123456789
timestamp = struct.pack(">QI", seconds + 0x400000000000000A, nanos & ~(0x1000000 - 1))

# Initiation
ck = blake(CONSTRUCTION)
h = blake(blake(ck, IDENTIFIER), pub(s_r))
ck = kdf(1, ck, pub(e_i))[0]
h = blake(h, pub(e_i))
ck, k = kdf(2, ck, dh(e_i, pub(s_r)))
enc_static = aead(k, 0, pub(s_i), h)
h = blake(h, enc_static)
ck, k = kdf(2, ck, dh(s_i, pub(s_r)))
enc_time = aead(k, 0, timestamp, h)
h = blake(h, enc_time)
initiation = struct.pack("<II", 1, sender_i) + pub(e_i) + enc_static + enc_time
initiation += mac(blake(b"mac1----", pub(s_r)), initiation) + b"\0" * 16
assert len(initiation) == 148

# Response
ck = kdf(1, ck, pub(e_r))[0]
h = blake(h, pub(e_r))
ck = kdf(1, ck, dh(e_r, pub(e_i)))[0]
ck = kdf(1, ck, dh(e_r, pub(s_i)))[0]
ck, tau, k = kdf(3, ck, psk)
h = blake(h, tau)
enc_nothing = aead(k, 0, b"", h)
response = struct.pack("<III", 2, sender_r, sender_i) + pub(e_r) + enc_nothing
response += mac(blake(b"mac1----", pub(s_i)), response) + b"\0" * 16
assert len(response) == 92
to_responder, to_initiator = kdf(2, ck, b"")

# Transport: a 20-byte packet padded to 32, and a keepalive, each way
packet = bytes(range(20))
def transport(key, receiver, counter, payload):
    padded = payload + b"\0" * ((-len(payload)) % 16)
    return struct.pack("<IIQ", 4, receiver, counter) + aead(key, counter, padded, b"")
data_i0 = transport(to_responder, sender_r, 0, packet)
data_r0 = transport(to_initiator, sender_i, 0, b"")

# Cookie reply from the responder to the initiation, and the initiation stamped with MAC2
cookie_secret = hashlib.sha256(b"cookie secret").digest()
source = bytes([127, 0, 0, 1]) + struct.pack(">H", 51820)
cookie_nonce = hashlib.sha256(b"cookie nonce").digest()[:24]
cookie = mac(cookie_secret, source)
mac1_i = initiation[116:132]
cookie_reply = struct.pack("<II", 3, sender_i) + cookie_nonce + xaead(blake(b"cookie--", pub(s_r)), cookie_nonce, cookie, mac1_i)
assert len(cookie_reply) == 64
initiation_mac2 = initiation[:132] + mac(cookie, initiation[:132])

# BLAKE2s beyond RFC 7693's single example: lengths around the block size, keyed and not
blake_cases = []
for length in (0, 1, 3, 63, 64, 65, 128, 129, 1000):
    data = bytes((i * 7 + 3) & 0xFF for i in range(length))
    for key in (b"", bytes(range(32)), b"k"):
        for size in (32, 16):
            blake_cases.append((length, key, size, blake(data, digest_size=size, key=key)))
hmac_case = hmac_blake(bytes(range(32)), b"WireGuard")


def swift(b):
    return "bytes(\"" + b.hex() + "\")"


out = []
w = out.append
w("// Generated by scripts/gen/wireguard_vectors.py (an independent Python implementation on")
w("// PyPI `cryptography` and hashlib's BLAKE2s). Do not edit; run the script again instead.")
w("")
w("enum HandshakeVectors {")
w("    static let initiatorStatic = " + swift(raw_private(s_i)))
w("    static let responderStatic = " + swift(raw_private(s_r)))
w("    static let initiatorEphemeral = " + swift(raw_private(e_i)))
w("    static let responderEphemeral = " + swift(raw_private(e_r)))
w("    static let initiatorPublic = " + swift(pub(s_i)))
w("    static let responderPublic = " + swift(pub(s_r)))
w("    static let presharedKey = " + swift(psk))
w(f"    static let initiatorIndex: UInt32 = 0x{sender_i:08x}")
w(f"    static let responderIndex: UInt32 = 0x{sender_r:08x}")
w(f"    static let timestampSeconds: Int64 = {seconds}")
w(f"    static let timestampNanoseconds: UInt32 = {nanos}")
w("    static let timestamp = " + swift(timestamp))
w("    static let initiation = " + swift(initiation))
w("    static let response = " + swift(response))
w("    static let initiatorToResponderKey = " + swift(to_responder))
w("    static let responderToInitiatorKey = " + swift(to_initiator))
w("    static let packet = " + swift(packet))
w("    static let initiatorTransport0 = " + swift(data_i0))
w("    static let responderKeepalive0 = " + swift(data_r0))
w("    static let cookieSecret = " + swift(cookie_secret))
w("    static let cookieSource = " + swift(source))
w("    static let cookieNonce = " + swift(cookie_nonce))
w("    static let cookieReply = " + swift(cookie_reply))
w("    static let initiationWithMAC2 = " + swift(initiation_mac2))
w("    static let hmacKey = " + swift(bytes(range(32))))
w("    static let hmacOfWireGuard = " + swift(hmac_case))
w("    /// (message length, key, digest length, digest); message byte i is (7 i + 3) mod 256.")
w("    static let blake2s: [(Int, [UInt8], Int, [UInt8])] = [")
for length, key, size, digest in blake_cases:
    w(f"        ({length}, {swift(key)}, {size}, {swift(digest)}),")
w("    ]")
w("")
w("    static func bytes(_ hex: String) -> [UInt8] {")
w("        var out: [UInt8] = []")
w("        var index = hex.startIndex")
w("        while index < hex.endIndex {")
w("            let next = hex.index(index, offsetBy: 2)")
w("            out.append(UInt8(hex[index..<next], radix: 16)!)")
w("            index = next")
w("        }")
w("        return out")
w("    }")
w("}")
print("\n".join(out))
