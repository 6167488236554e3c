#!/usr/bin/env python3
"""Known-answer vectors for the RFB security types RA2 / RA2ne / RA2_256 / RA2ne_256
(RSA-AES, types 5, 6, 129, 130), Apple Diffie-Hellman (type 30) and UltraVNC MS-Logon II
(type 113), plus a few Extended Clipboard and QEMU key-event byte strings.

Run with the project venv (cryptography + pycryptodome):

    /work/main/.venv/bin/python scripts/vectors/make_rfb_security_vectors.py

Writes Tests/RFBTests/Fixtures/security-vectors.json (pretty-printed, deterministic: the same
bytes on every run). Protocol notes: docs/rfb-security-digest.md.

Everything is built by the small, independent implementation in this file:
  * AES-EAX from the bare AES block function (CMAC/OMAC and CTR written out here), the same
    shape a Swift implementation on `AES.permute` will have;
  * RSA PKCS#1 v1.5 encryption written out by hand (pow(m, e, n)) with padding bytes from a
    fixed deterministic stream, so every ciphertext in the transcript is reproducible;
  * Diffie-Hellman with Python integers, DES with the VNC bit-reversed key, MD5, SHA-1/256.

Cross-checks (assertions; the script refuses to write the file if one fails):
  * own EAX == pycryptodome AES.MODE_EAX on every vector, and the ten vectors of the EAX paper
    (Bellare, Rogaway, Wagner 2004, appendix) reproduce;
  * own CMAC == cryptography's CMAC;
  * every RSA ciphertext decrypts back with cryptography's PKCS#1 v1.5 decryption;
  * a server-side re-implementation decrypts every client RA2 frame, checks both hashes the
    way TigerVNC's SSecurityRSAAES does, and parses the credentials;
  * DH shared secrets agree from both sides; ARD ciphertext decrypts (pycryptodome AES-ECB);
  * MS-Logon II DES-CBC == cryptography's (decrepit) TripleDES with K1=K2=K3 in CBC mode, and
    the VNC DES convention reproduces the VncAuth vector used in Tests/RFBTests/Security/DESTests.swift.

`--live HOST:PORT` additionally runs a real RA2-family login with this code against a server
(loopback only), e.g. a TigerVNC >= 1.13 x0vncserver started with
`-SecurityTypes RA2,RA2ne,RA2_256,RA2ne_256 -RSAKey <key> -PasswordFile <vncpasswd file>`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import socket
import struct
import sys
import zlib
from pathlib import Path

from cryptography.hazmat.primitives import cmac as crypto_cmac
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import padding as asym_padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from Crypto.Cipher import AES as PyCryptodomeAES
from Crypto.Cipher import DES as PyCryptodomeDES

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "Tests" / "RFBTests" / "Fixtures" / "security-vectors.json"


def hx(b: bytes) -> str:
    return b.hex()


def xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b))


def stream(label: str, n: int) -> bytes:
    """Deterministic bytes: SHA-256(label || counter_be32) concatenated."""
    out = bytearray()
    counter = 0
    while len(out) < n:
        out += hashlib.sha256(label.encode() + counter.to_bytes(4, "big")).digest()
        counter += 1
    return bytes(out[:n])


def nonzero_stream(label: str, n: int) -> bytes:
    """Deterministic non-zero bytes (for PKCS#1 v1.5 padding strings)."""
    out = bytearray()
    k = 0
    while len(out) < n:
        out += bytes(b for b in stream(f"{label}/{k}", 64) if b != 0)
        k += 1
    return bytes(out[:n])


# ---------------------------------------------------------------------------------------------
# AES block, CMAC/OMAC, CTR, EAX (own implementation)
# ---------------------------------------------------------------------------------------------

class AESBlock:
    def __init__(self, key: bytes):
        assert len(key) in (16, 24, 32)
        self._enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()

    def __call__(self, block: bytes) -> bytes:
        assert len(block) == 16
        return self._enc.update(block)


def _dbl(block: bytes) -> bytes:
    v = int.from_bytes(block, "big") << 1
    if v >> 128:
        v = (v & ((1 << 128) - 1)) ^ 0x87
    return v.to_bytes(16, "big")


def cmac(aes: AESBlock, data: bytes) -> bytes:
    k1 = _dbl(aes(bytes(16)))
    k2 = _dbl(k1)
    if data and len(data) % 16 == 0:
        blocks = [data[i:i + 16] for i in range(0, len(data), 16)]
        blocks[-1] = xor(blocks[-1], k1)
    else:
        full = len(data) // 16 * 16
        blocks = [data[i:i + 16] for i in range(0, full, 16)]
        last = data[full:] + b"\x80" + bytes(15 - (len(data) - full))
        blocks.append(xor(last, k2))
    x = bytes(16)
    for b in blocks:
        x = aes(xor(x, b))
    return x


def omac(aes: AESBlock, t: int, data: bytes) -> bytes:
    return cmac(aes, bytes(15) + bytes([t]) + data)


def ctr(aes: AESBlock, iv: bytes, data: bytes) -> bytes:
    counter = int.from_bytes(iv, "big")  # EAX's CTR counter: 128-bit BIG-endian increment
    out = bytearray()
    for i in range(0, len(data), 16):
        ks = aes(counter.to_bytes(16, "big"))
        chunk = data[i:i + 16]
        out += xor(chunk, ks[:len(chunk)])
        counter = (counter + 1) & ((1 << 128) - 1)
    return bytes(out)


def eax_encrypt(key: bytes, nonce: bytes, header: bytes, msg: bytes) -> tuple[bytes, bytes]:
    aes = AESBlock(key)
    n = omac(aes, 0, nonce)
    h = omac(aes, 1, header)
    c = ctr(aes, n, msg)
    tag = xor(xor(n, h), omac(aes, 2, c))
    # second implementation
    ref = PyCryptodomeAES.new(key, PyCryptodomeAES.MODE_EAX, nonce=nonce, mac_len=16)
    ref.update(header)
    rc, rt = ref.encrypt_and_digest(msg)
    assert (rc, rt) == (c, tag), "EAX mismatch with pycryptodome"
    return c, tag


def eax_decrypt(key: bytes, nonce: bytes, header: bytes, c: bytes, tag: bytes) -> bytes:
    aes = AESBlock(key)
    n = omac(aes, 0, nonce)
    h = omac(aes, 1, header)
    expect = xor(xor(n, h), omac(aes, 2, c))
    if expect != tag:
        raise ValueError("EAX tag mismatch")
    return ctr(aes, n, c)


# The ten AES-128 test vectors of the EAX paper (Bellare, Rogaway, Wagner, "The EAX Mode of
# Operation", FSE 2004, appendix): (msg, key, nonce, header, ciphertext||tag).
EAX_PAPER = [
    ("", "233952dee4d5ed5f9b9c6d6ff80ff478", "62ec67f9c3a4a407fcb2a8c49031a8b3",
     "6bfb914fd07eae6b", "e037830e8389f27b025a2d6527e79d01"),
    ("f7fb", "91945d3f4dcbee0bf45ef52255f095a4", "becaf043b0a23d843194ba972c66debd",
     "fa3bfd4806eb53fa", "19dd5c4c9331049d0bdab0277408f67967e5"),
    ("1a47cb4933", "01f74ad64077f2e704c0f60ada3dd523", "70c3db4f0d26368400a10ed05d2bff5e",
     "234a3463c1264ac6", "d851d5bae03a59f238a23e39199dc9266626c40f80"),
    ("481c9e39b1", "d07cf6cbb7f313bdde66b727afd3c5e8", "8408dfff3c1a2b1292dc199e46b7d617",
     "33cce2eabff5a79d", "632a9d131ad4c168a4225d8e1ff755939974a7bede"),
    ("40d0c07da5e4", "35b6d0580005bbc12b0587124557d2c2", "fdb6b06676eedc5c61d74276e1f8e816",
     "aeb96eaebe2970e9", "071dfe16c675cb0677e536f73afe6a14b74ee49844dd"),
    ("4de3b35c3fc039245bd1fb7d", "bd8e6e11475e60b268784c38c62feb22",
     "6eac5c93072d8e8513f750935e46da1b", "d4482d1ca78dce0f",
     "835bb4f15d743e350e728414abb8644fd6ccb86947c5e10590210a4f"),
    ("8b0a79306c9ce7ed99dae4f87f8dd61636", "7c77d6e813bed5ac98baa417477a2e7d",
     "1a8c98dcd73d38393b2bf1569deefc19", "65d2017990d62528",
     "02083e3979da014812f59f11d52630da30137327d10649b0aa6e1c181db617d7f2"),
    ("1bda122bce8a8dbaf1877d962b8592dd2d56", "5fff20cafab119ca2fc73549e20f5b0d",
     "dde59b97d722156d4d9aff2bc7559826", "54b9f04e6a09189a",
     "2ec47b2c4954a489afc7ba4897edcdae8cc33b60450599bd02c96382902aef7f832a"),
    ("6cf36720872b8513f6eab1a8a44438d5ef11", "a4a4782bcffd3ec5e7ef6d8c34a56123",
     "b781fcf2f75fa5a8de97a9ca48e522ec", "899a175897561d7e",
     "0de18fd0fdd91e7af19f1d8ee8733938b1e8e7f6d2231618102fdb7fe55ff1991700"),
    ("ca40d7446e545ffaed3bd12a740a659ffbbb3ceab7", "8395fcf1e95bebd697bd010bc766aac3",
     "22e7add93cfc6393c57ec0b3c17d6b44", "126735fcc320d25a",
     "cb8920f87a6c75cff39627b56e3ed197c552d295a7cfc46afc253b4652b1af3795b124ab6e"),
]


def eax_vectors() -> list[dict]:
    out = []
    for i, (msg, key, nonce, header, ct_tag) in enumerate(EAX_PAPER):
        c, t = eax_encrypt(bytes.fromhex(key), bytes.fromhex(nonce), bytes.fromhex(header),
                           bytes.fromhex(msg))
        assert hx(c + t) == ct_tag, f"EAX paper vector {i} failed"
        out.append({"source": f"EAX paper appendix, vector {i + 1}", "key": key, "nonce": nonce,
                    "header": header, "plaintext": msg, "ciphertext": hx(c), "tag": hx(t)})
    # RA2-shaped vectors: 16-byte little-endian counter as nonce, 2-byte big-endian length as
    # header, AES-128 (RA2/RA2ne) and AES-256 (RA2_256/RA2ne_256) keys.
    cases = [
        (16, 0, b""),
        (16, 0, b"\x00\x00\x00\x00"),
        (16, 1, b"RFB frame one, 31 bytes long..."),
        (16, 255, bytes(range(48))),
        (16, 256, stream("eax/16/256", 17)),
        (16, (1 << 64) + 5, stream("eax/16/big", 100)),
        (32, 0, b""),
        (32, 1, bytes(range(16))),
        (32, 2, stream("eax/32/2", 33)),
        (32, 0xFFFFFFFF, stream("eax/32/ffffffff", 1000)),
    ]
    for ks, counter, msg in cases:
        key = stream(f"eax-key/{ks}/{counter}", ks)
        nonce = counter.to_bytes(16, "little")
        header = len(msg).to_bytes(2, "big")
        c, t = eax_encrypt(key, nonce, header, msg)
        assert eax_decrypt(key, nonce, header, c, t) == msg
        out.append({"source": f"RA2-shaped, AES-{ks * 8}, message counter {counter}",
                    "key": hx(key), "nonce": hx(nonce), "header": hx(header),
                    "plaintext": hx(msg), "ciphertext": hx(c), "tag": hx(t)})
    # CMAC sanity against cryptography's implementation
    for ks in (16, 32):
        key = stream(f"cmac/{ks}", ks)
        for n in (0, 1, 15, 16, 17, 32, 40):
            data = stream(f"cmac-data/{n}", n)
            ref = crypto_cmac.CMAC(algorithms.AES(key))
            ref.update(data)
            assert ref.finalize() == cmac(AESBlock(key), data), "CMAC mismatch"
    return out


# ---------------------------------------------------------------------------------------------
# RSA (fixed keys, hand-written PKCS#1 v1.5 encryption)
# ---------------------------------------------------------------------------------------------

# Fixed 2048-bit keys (generated once with cryptography, e = 65537). TEST KEYS ONLY.
SERVER_KEY_PEM = """\
-----BEGIN RSA PRIVATE KEY-----
MIIEowIBAAKCAQEAqB+DrRyqQZx6gIKQx41I7JzaS6yma7nTocdDbDXkmK/QzIZK
zoY7QubOqMHBmv6zjRT5gfs9TcBrgi9AE745TptGhDIEp+BfrA4I96vqABjM4J/a
Xi75hPwZuFjeLxK8N9D4cNW/0+e827Rcq0CUDtsOJjkmNRxCJTbluDWJ66ig/6u8
kVak7G5aF58DT49MzdvNX1kQJL2u7avg+la5v/SI61vkEc1+jaKQpD6yDtbzEIMs
zmu5/23WwDIQYgevL/nkkHJa/orI/sAq9CZvrmky/offOOHdNsbcMgQqJAPsMU1e
CIO6+xNLfx8HuhPpm7K3V0yccCCV3K4xziaj8wIDAQABAoIBAAG1YEcwFWLZTj1k
FkiQ3P7akTVXqdFKcCYiukKtQYdzsfGCI9x5bLy/T7ZTUb5bfEOgxPBXN0ZFAFKw
XDxXIIn19f996qIyG4bKFbk+nAAoQFzAAx4V6B872J8Q+CEOVa9ThlLPOUXUAw1Q
heiPnXGRNFGbHxJHGTz7k9YNZTtp1QvwiJV+aMZZHmxodIJ0nG2N4q1hf6QeLR39
BpaRIpUWi6YbAocz8FyzO/w2iVa+arxIKUDnfHVoQkPi5ZePDmdrIgZ8wBYRfNKa
hpsqkSgq1hpYBh1Su7rjaCIx4xQEROFuj/+Vd8SovogacG1YIf3GqeqA6zZv5XV9
lysFFcECgYEA5cY34eFvYH6OFCeVpPkK1oXJmSIxPm73l1Ibi7Tc8RHY8nzCazz/
m4t5SbGKh8lS9OKdrkV51IEkUUTbbbNxQYmtExfUha637lnvmnWs56yGVkmtD2uF
/0Pvx2zAZSDYT4NCVJ8VtkKNSPC20o5zWDgS9xGWMoqQTzZnEjOAa2MCgYEAu0/o
gX/boe2IVkN+oy1XiKsfLyO39HO62s/JABg5iMlZkxtRu6Hiz4soPrQ7pAN+z8jX
1cPbFAt3ATKgo0aN/HVG4cLjkh0/rUBbPx93GcqJlMHgBFRWFK02yNDJ0JS386pp
0Hd5B78+01Xp7P1JLwWVG06d7BD1Bk8A6Y5AcjECgYBiIGi1GmVKPEHI8a7CqWir
fK8/qo6FLzaldPc2jqLcgNa5l/YffglbEBFYG24h1ySKWE0mo50H167+1f0vuDZh
2r4DLWYhQSBjthzRRff1aIRmTUiPEUhEX2sDK7pudbxrGI83PEk1cO6Ne99XxGYW
Arx2rxgJtYsziPQznbL2KQKBgDL1ETaxtul9elqlb/0qZ6bZjtk/KVtKZKoEXxU0
gepxhHnds8WMy+xUWjV8yMDc5pHWfMk9yArS96QOxt7EYfotWYQvhcOJS3pxiKFK
iRcuH3GlsLDc1LI5US8ehdjFrKmQUcsRxY5S+994fvQnD9LH/QF5yMKg9leqBICF
X4jxAoGBANvGoBa8YcDGzv+nV9y10uhmoQVznXFxdfAoLTfFmOsRxJJHyW5zoe5x
MHQC9MxnZNor/Ubob+U2JSTKYkqAN5fNlqwgGQmabbSnvSuxR9y1HGNEfIkA0jOx
pUsz0arjgaXh4IPimoghYD92KbeG6MiqGaG+iUtQrhwUNFEnuJUa
-----END RSA PRIVATE KEY-----
"""

CLIENT_KEY_PEM = """\
-----BEGIN RSA PRIVATE KEY-----
MIIEowIBAAKCAQEApHmtlCmtNQCUhZH/lezRiuSKb4+J5N2M/fyEe8x1hBVTkz5o
jiK/yJr6mLasAVoAUz+cP0Z7YcQV77TiPM3dAn+BQ7stXwLffKOeN6GmFnRnyBDR
hwTcHPptnmHk58FKsF8wkyIJmcyaw0yJ/WW/NAClJj4CHevxf5jizJgR32owRnck
xFQO4MP/3bvSyxsduXElAUS3PAdKbKRHrLnAPGcgQ8iSK9m98BhVapR/hY/UaWG9
becP9xBlsYFR5GPVlzyVyK14lfiFyVJ6reQXtIpqFMPiiD5/Wv4hj9fbQnRnC0uq
xQr0I1H81nrKXirogIQjBs5pK3MwSuzuTuYo6QIDAQABAoIBABpqBCtgShXSAwg0
e0R7pOdWbrkd5zpfLk536Frtag4NUr+57Rauk/hGk2pFI/iPmK/F7nTm/9eioxc9
CHxVX2IQUhUrkUzJ7FRa/oTWrBK9HRGvSccSS7tHqKUf+aASlckfcHCgrcQKbOxi
dWLBnWRfmiY7HSHrC3y/c+UBoxUq+aI/pgqQqqjpcpa6YssgQP88BbbAWbZLj9r0
MirTPgLdrbZuSEQdSz0mVp8BXqv4hdgqkZo+uzYCEFJqA9+nJKp0Sx0e5755sJtW
IO2UkR82pKijpJWS4gqMq2XLcOTxeMf0L9u0hH9yhXe3AgT6buC8CdjKH6U9tcJ/
TPIb1gUCgYEA1WIWQ1deNjQBaZ4+Bm0bWbXBArH+UNws2RkBCq+0tYFU/CUg0E8m
U31yeo+N/A3WxbZw+S248S+Z/IH9utiymydwm6FJPUXe4npaiGF1MpS+A7PxB1cR
uhfXq40oq2WGoLtsj6FxVp3R2OGPzwPIg2SCqPuTU22LWWYCDOyq7fcCgYEAxVME
X3ybbqL6yQe+XQD8k40QZ+dEoyqURF18u17QC8YlOHm4jCvoSRcU99ccElU6YzRt
IsyEF1F9Nps7icX7Z+HGihAv19jCwQfUgFop5dW9kONVcPGbf5cxgULBULCUOVNH
Cv2+iGK316ARTA6n3XSqUCntXLteDKShV1DxaB8CgYEAv0daJauf7H7Z9U/A0gnk
RprDFiNwkhOMsF/VqzquhzYUdKLjs1gARz9g67Tb1mKhcEKHKxdtfebp5oywYln2
YVcNfrUp7h9AGU0M8sxKPrlPTAp1udq3LVZKIqI7Hsm30UWxn19dNgPrJLuuKih+
CiqDZe9+tX6xN8ZVeDh/USkCgYAc+5aW19yUoYeoY2TIkE6I9Z1FRajFNonUiM67
Tq/MKuxooShEHmbd5XAE/yl2X+JVk+u7wsJcEnILxT03fUbx+S2KNdpxH7trUtUZ
jSS+R2iykVGJZ1NpqDFzRPTT/zumN98ldCO6MJXELBSeUUDCvFIPuDjO+A5WWRAB
nTf4DQKBgA5kaSV/gGBsr0MSAGjpbvzVBV2IyrxX2yujxg3qDMWfbtlDpba8XZ86
8PjqBx+bSURmpknd9ADdDmblnC6Hr1EKCopT5aWnD3YNYDvtvJtavuZydpNg1Wcl
At60zIShbWerGBNYtU3tuTNGo9mnuQH/QQthVQIVPgwk9WNPbztk
-----END RSA PRIVATE KEY-----
"""


class RSAKey:
    def __init__(self, pem: str):
        self.private = serialization.load_pem_private_key(pem.encode(), password=None)
        nums = self.private.private_numbers()
        self.n = nums.public_numbers.n
        self.e = nums.public_numbers.e
        self.d = nums.d
        self.bits = self.n.bit_length()
        self.size = (self.bits + 7) // 8
        self.pem = pem

    def blob(self) -> bytes:
        """U32 key length in bits, modulus, exponent -- each big-endian, padded to `size` bytes."""
        return (struct.pack(">I", self.bits) + self.n.to_bytes(self.size, "big")
                + self.e.to_bytes(self.size, "big"))

    def encrypt_pkcs1v15(self, msg: bytes, ps: bytes) -> bytes:
        assert len(ps) == self.size - 3 - len(msg) and 0 not in ps
        em = b"\x00\x02" + ps + b"\x00" + msg
        c = pow(int.from_bytes(em, "big"), self.e, self.n).to_bytes(self.size, "big")
        assert self.private.decrypt(c, asym_padding.PKCS1v15()) == msg  # second implementation
        return c

    def decrypt_pkcs1v15(self, c: bytes) -> bytes:
        em = pow(int.from_bytes(c, "big"), self.d, self.n).to_bytes(self.size, "big")
        assert em[:2] == b"\x00\x02"
        sep = em.index(0, 2)
        assert sep >= 10
        return em[sep + 1:]

    def describe(self) -> dict:
        der = self.private.private_bytes(serialization.Encoding.DER,
                                         serialization.PrivateFormat.TraditionalOpenSSL,
                                         serialization.NoEncryption())
        return {"bits": self.bits, "modulus": f"{self.n:x}", "publicExponent": f"{self.e:x}",
                "privateExponent": f"{self.d:x}", "privateKeyPKCS1DER": hx(der),
                "privateKeyPEM": self.pem, "publicKeyBlob": hx(self.blob())}


# ---------------------------------------------------------------------------------------------
# RA2 family
# ---------------------------------------------------------------------------------------------

RA2_TYPES = {5: ("RA2", 128, True), 6: ("RA2ne", 128, False),
             129: ("RA2_256", 256, True), 130: ("RA2ne_256", 256, False)}


def ra2_params(sec_type: int) -> tuple[str, int, bool, int, object]:
    name, key_bits, all_encrypted = RA2_TYPES[sec_type]
    rnd = key_bits // 8                      # 16 random bytes for RA2, 32 for RA2_256
    h = hashlib.sha1 if key_bits == 128 else hashlib.sha256
    return name, key_bits, all_encrypted, rnd, h


def ra2_session_keys(sec_type: int, server_random: bytes, client_random: bytes) -> tuple[bytes, bytes]:
    """(client->server key, server->client key)."""
    _, key_bits, _, _, h = ra2_params(sec_type)
    c2s = h(server_random + client_random).digest()[:key_bits // 8]
    s2c = h(client_random + server_random).digest()[:key_bits // 8]
    return c2s, s2c


class EAXChannel:
    """One direction of the RA2 record layer."""

    def __init__(self, key: bytes):
        self.key = key
        self.counter = 0
        self.buffer = b""

    def seal(self, payload: bytes) -> bytes:
        assert len(payload) <= 0xFFFF
        header = len(payload).to_bytes(2, "big")
        c, t = eax_encrypt(self.key, self.counter.to_bytes(16, "little"), header, payload)
        self.counter += 1
        return header + c + t

    def open_one(self, frame: bytes) -> tuple[bytes, bytes]:
        """Decrypt one frame from the front of `frame`; return (plaintext, rest)."""
        n = int.from_bytes(frame[:2], "big")
        body, tag, rest = frame[2:2 + n], frame[2 + n:18 + n], frame[18 + n:]
        pt = eax_decrypt(self.key, self.counter.to_bytes(16, "little"), frame[:2], body, tag)
        self.counter += 1
        return pt, rest


def credentials_payload(subtype: int, username: str, password: str) -> bytes:
    user = username.encode("utf-8") if subtype == 1 else b""
    pw = password.encode("utf-8")
    assert len(user) <= 255 and len(pw) <= 255
    return bytes([len(user)]) + user + bytes([len(pw)]) + pw


PIXEL_FORMAT_32 = bytes([32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0])


def server_init(width: int, height: int, name: bytes) -> bytes:
    return struct.pack(">HH", width, height) + PIXEL_FORMAT_32 + struct.pack(">I", len(name)) + name


def ra2_transcript(sec_type: int, subtype: int = 1) -> dict:
    name, key_bits, all_encrypted, rnd_len, h = ra2_params(sec_type)
    server = RSAKey(SERVER_KEY_PEM)
    client = RSAKey(CLIENT_KEY_PEM)
    server_random = stream(f"{name}/server-random", rnd_len)
    client_random = stream(f"{name}/client-random", rnd_len)
    ps_server = nonzero_stream(f"{name}/server-pkcs1-padding", client.size - 3 - rnd_len)
    ps_client = nonzero_stream(f"{name}/client-pkcs1-padding", server.size - 3 - rnd_len)

    steps: list[dict] = []

    def step(direction: str, what: str, data: bytes, **extra):
        entry = {"direction": direction, "what": what, "bytes": hx(data)}
        entry.update(extra)
        steps.append(entry)
        return data

    s_pub = step("s2c", "server public key: U32 bits, modulus, exponent (each ceil(bits/8) bytes)",
                 server.blob())
    c_pub = step("c2s", "client public key: U32 bits, modulus, exponent", client.blob())
    c_rand_ct = server.encrypt_pkcs1v15(client_random, ps_client)
    c_rand_msg = step("c2s", "client random: U16 length (= server key bytes), RSA-PKCS#1-v1.5 "
                             "encryption under the SERVER key", struct.pack(">H", server.size) + c_rand_ct,
                      pkcs1PaddingString=hx(ps_client))
    s_rand_ct = client.encrypt_pkcs1v15(server_random, ps_server)
    s_rand_msg = step("s2c", "server random: U16 length (= client key bytes), RSA-PKCS#1-v1.5 "
                             "encryption under the CLIENT key", struct.pack(">H", client.size) + s_rand_ct,
                      pkcs1PaddingString=hx(ps_server))

    c2s_key, s2c_key = ra2_session_keys(sec_type, server_random, client_random)
    server_hash = h(s_pub + c_pub).digest()
    client_hash = h(c_pub + s_pub).digest()
    s_out, c_out = EAXChannel(s2c_key), EAXChannel(c2s_key)

    step("s2c", "EAX frame #0: server hash = H(serverKeyBlob || clientKeyBlob)", s_out.seal(server_hash),
         plaintext=hx(server_hash), counter=0)
    step("c2s", "EAX frame #0: client hash = H(clientKeyBlob || serverKeyBlob)", c_out.seal(client_hash),
         plaintext=hx(client_hash), counter=0)
    step("s2c", f"EAX frame #1: subtype ({subtype} = {'username+password' if subtype == 1 else 'password only'})",
         s_out.seal(bytes([subtype])), plaintext=hx(bytes([subtype])), counter=1)
    creds = credentials_payload(subtype, "ann", "pässword")
    step("c2s", "EAX frame #1: credentials U8 len, username, U8 len, password (UTF-8)", c_out.seal(creds),
         plaintext=hx(creds), counter=1)

    sec_ok = struct.pack(">I", 0)
    client_init = b"\x01"
    sinit = server_init(1024, 768, "ann's desktop".encode())
    set_encodings = struct.pack(">BBH", 2, 0, 3) + struct.pack(">iii", 16, 0, -223)
    fbur = struct.pack(">BBHHHH", 3, 0, 0, 0, 1024, 768)
    # A FramebufferUpdate with one 2x1 Raw rectangle, deliberately split over two frames.
    fbu = struct.pack(">BBH", 0, 0, 1) + struct.pack(">HHHHi", 0, 0, 2, 1, 0) + bytes(range(8))
    if all_encrypted:
        step("s2c", "EAX frame #2: SecurityResult OK", s_out.seal(sec_ok), plaintext=hx(sec_ok), counter=2)
        step("c2s", "EAX frame #2: ClientInit (shared=1)", c_out.seal(client_init),
             plaintext=hx(client_init), counter=2)
        step("s2c", "EAX frame #3: ServerInit", s_out.seal(sinit), plaintext=hx(sinit), counter=3)
        step("c2s", "EAX frame #3: SetEncodings [ZRLE 16, Raw 0, DesktopSize -223]",
             c_out.seal(set_encodings), plaintext=hx(set_encodings), counter=3)
        step("c2s", "EAX frame #4: FramebufferUpdateRequest (full, 1024x768)", c_out.seal(fbur),
             plaintext=hx(fbur), counter=4)
        step("s2c", "EAX frame #4: first 10 bytes of a FramebufferUpdate (frames need not align "
                    "with RFB messages)", s_out.seal(fbu[:10]), plaintext=hx(fbu[:10]), counter=4)
        step("s2c", "EAX frame #5: the remaining bytes of that FramebufferUpdate",
             s_out.seal(fbu[10:]), plaintext=hx(fbu[10:]), counter=5)
    else:
        step("s2c", "SecurityResult OK -- plain, the EAX layer is dropped after the credentials",
             sec_ok)
        step("c2s", "ClientInit (shared=1), plain", client_init)
        step("s2c", "ServerInit, plain", sinit)

    # Failure variant (3.8 SecurityResult with reason), encrypted for RA2/RA2_256, plain otherwise.
    reason = b"Authentication failed"
    fail = struct.pack(">II", 1, len(reason)) + reason
    failure = {"plaintext": hx(fail)}
    if all_encrypted:
        alt = EAXChannel(s2c_key)
        alt.counter = 2
        failure["bytes"] = hx(alt.seal(fail))
        failure["what"] = "instead of frame #2: SecurityResult failed + reason, as EAX frame #2"
    else:
        failure["bytes"] = hx(fail)
        failure["what"] = "instead of the plain SecurityResult OK"

    # ---- independent server-side replay (TigerVNC SSecurityRSAAES order of checks) ----------
    verify_as_server(sec_type, steps, server, subtype)

    return {
        "securityType": sec_type,
        "name": name,
        "aesKeyBits": key_bits,
        "hash": "SHA-1" if key_bits == 128 else "SHA-256",
        "randomLength": rnd_len,
        "allEncrypted": all_encrypted,
        "subtype": subtype,
        "username": "ann",
        "password": "pässword",
        "serverKey": server.describe(),
        "clientKey": client.describe(),
        "serverRandom": hx(server_random),
        "clientRandom": hx(client_random),
        "clientToServerKey": hx(c2s_key),
        "serverToClientKey": hx(s2c_key),
        "serverHash": hx(server_hash),
        "clientHash": hx(client_hash),
        "steps": steps,
        "failureVariant": failure,
        "notes": [
            "clientToServerKey = H(serverRandom || clientRandom), serverToClientKey = "
            "H(clientRandom || serverRandom); AES-128 uses the first 16 bytes of SHA-1.",
            "EAX nonce = message counter as 16-byte LITTLE-endian integer, one counter per "
            "direction starting at 0; header (associated data) = the 2-byte big-endian length; "
            "tag = 16 bytes after the ciphertext.",
            "The RSA ciphertexts here use the fixed PKCS#1 v1.5 padding strings given; an "
            "implementation with random padding produces other bytes, which the server (see "
            "serverKey private key) must still decrypt to clientRandom.",
        ],
    }


def verify_as_server(sec_type: int, steps: list[dict], server: RSAKey, subtype: int) -> None:
    name, key_bits, all_encrypted, rnd_len, h = ra2_params(sec_type)
    c2s = [bytes.fromhex(s["bytes"]) for s in steps if s["direction"] == "c2s"]
    s2c = [bytes.fromhex(s["bytes"]) for s in steps if s["direction"] == "s2c"]
    s_pub = s2c[0]
    c_pub = c2s[0]
    bits = struct.unpack(">I", c_pub[:4])[0]
    size = (bits + 7) // 8
    assert len(c_pub) == 4 + 2 * size and 1024 <= bits <= 8192
    cn = int.from_bytes(c_pub[4:4 + size], "big")
    ce = int.from_bytes(c_pub[4 + size:], "big")
    rmsg = c2s[1]
    assert struct.unpack(">H", rmsg[:2])[0] == server.size == len(rmsg) - 2
    client_random = server.decrypt_pkcs1v15(rmsg[2:])
    assert len(client_random) == rnd_len
    # server random: the server would know it; recover it with the client's key for the check
    client = RSAKey(CLIENT_KEY_PEM)
    assert (client.n, client.e) == (cn, ce)
    server_random = client.decrypt_pkcs1v15(s2c[1][2:])
    c2s_key, s2c_key = ra2_session_keys(sec_type, server_random, client_random)
    rx = EAXChannel(c2s_key)
    client_hash, rest = rx.open_one(c2s[2])
    assert rest == b"" and client_hash == h(c_pub + s_pub).digest()
    creds, rest = rx.open_one(c2s[3])
    ulen = creds[0]
    user = creds[1:1 + ulen]
    plen = creds[1 + ulen]
    pw = creds[2 + ulen:2 + ulen + plen]
    assert len(creds) == 2 + ulen + plen
    assert pw.decode() == "pässword" and user.decode() == ("ann" if subtype == 1 else "")
    # the client side of the check: the server hash frame opens under s2c_key
    tx = EAXChannel(s2c_key)
    server_hash, _ = tx.open_one(s2c[2])
    assert server_hash == h(s_pub + c_pub).digest()


# ---------------------------------------------------------------------------------------------
# Diffie-Hellman helpers
# ---------------------------------------------------------------------------------------------

def is_probable_prime(n: int) -> bool:
    if n < 2:
        return False
    small = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47]
    for p in small:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    bases = small if n < (1 << 64) else small + [int.from_bytes(stream(f"mr/{i}", 8), "big") % (n - 3) + 2
                                                  for i in range(16)]
    for a in bases:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = pow(x, 2, n)
            if x == n - 1:
                break
        else:
            return False
    return True


# RFC 2409 section 6.2 "Second Oakley Group" (1024-bit MODP), generator 2.
OAKLEY_GROUP_2 = int(
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD1"
    "29024E088A67CC74020BBEA63B139B22514A08798E3404DD"
    "EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245"
    "E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"
    "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE65381"
    "FFFFFFFFFFFFFFFF", 16)


def ard_case(label: str, client_private: bytes, fill: bytes) -> dict:
    g, p, key_len = 2, OAKLEY_GROUP_2, 128
    server_private = int.from_bytes(stream("ard/server-private", key_len), "big")
    A = pow(g, server_private, p)
    b = int.from_bytes(client_private, "big")
    B = pow(g, b, p)
    K = pow(A, b, p)
    assert K == pow(B, server_private, p)
    shared = K.to_bytes(key_len, "big")          # left-padded to the key length
    aes_key = hashlib.md5(shared).digest()
    user, pw = b"ann", b"secret12"
    block = bytearray(fill)
    block[0:len(user) + 1] = user + b"\x00"
    block[64:64 + len(pw) + 1] = pw + b"\x00"
    block = bytes(block)
    enc = Cipher(algorithms.AES(aes_key), modes.ECB()).encryptor()
    ct = enc.update(block) + enc.finalize()
    # second implementation + server side decrypt
    assert PyCryptodomeAES.new(aes_key, PyCryptodomeAES.MODE_ECB).decrypt(ct) == block
    server_msg = struct.pack(">HH", g, key_len) + p.to_bytes(key_len, "big") + A.to_bytes(key_len, "big")
    client_msg = ct + B.to_bytes(key_len, "big")
    return {
        "label": label,
        "securityType": 30,
        "generator": g,
        "keyLength": key_len,
        "primeModulus": p.to_bytes(key_len, "big").hex(),
        "serverPrivate": hx(server_private.to_bytes(key_len, "big")),
        "serverPublic": hx(A.to_bytes(key_len, "big")),
        "clientPrivate": hx(client_private),
        "clientPublic": hx(B.to_bytes(key_len, "big")),
        "sharedSecret": hx(shared),
        "aesKey": hx(aes_key),
        "username": user.decode(),
        "password": pw.decode(),
        "randomFill": hx(fill),
        "plaintextBlock": hx(block),
        "ciphertext": hx(ct),
        "serverMessage": hx(server_msg),
        "clientMessage": hx(client_msg),
    }


def ard_vectors() -> list[dict]:
    assert is_probable_prime(OAKLEY_GROUP_2) and is_probable_prime((OAKLEY_GROUP_2 - 1) // 2)
    cases = [ard_case("plain", stream("ard/client-private", 128), stream("ard/fill", 128))]
    # A case whose shared secret starts with a zero byte: the MD5 must still cover all 128 bytes.
    g, p = 2, OAKLEY_GROUP_2
    a = int.from_bytes(stream("ard/server-private", 128), "big")
    A = pow(g, a, p)
    for i in range(100000):
        cand = stream(f"ard/client-private/leading-zero/{i}", 128)
        if pow(A, int.from_bytes(cand, "big"), p) >> (8 * 127) == 0:
            cases.append(ard_case("shared secret with a leading zero byte", cand, stream("ard/fill2", 128)))
            break
    for i in range(100000):
        cand = stream(f"ard/client-private/public-leading-zero/{i}", 128)
        if pow(g, int.from_bytes(cand, "big"), p) >> (8 * 127) == 0:
            cases.append(ard_case("client public value with a leading zero byte", cand,
                                  stream("ard/fill3", 128)))
            break
    assert len(cases) == 3
    assert cases[1]["sharedSecret"].startswith("00") and cases[2]["clientPublic"].startswith("00")
    return cases


# ---------------------------------------------------------------------------------------------
# MS-Logon II
# ---------------------------------------------------------------------------------------------

def reverse_bits(b: int) -> int:
    return int(f"{b:08b}"[::-1], 2)


def vnc_des_key(key: bytes) -> bytes:
    return bytes(reverse_bits(b) for b in key)


def des_cbc_vnc(key: bytes, iv: bytes, data: bytes) -> bytes:
    """DES-CBC with the VNC key convention (each key byte bit-reversed before use)."""
    des = PyCryptodomeDES.new(vnc_des_key(key), PyCryptodomeDES.MODE_ECB)
    out = bytearray()
    prev = iv
    for i in range(0, len(data), 8):
        prev = des.encrypt(xor(data[i:i + 8], prev))
        out += prev
    # second implementation: cryptography's TripleDES with K1=K2=K3 == single DES
    from cryptography.hazmat.decrepit.ciphers.algorithms import TripleDES
    k = vnc_des_key(key)
    ref = Cipher(TripleDES(k * 3), modes.CBC(iv)).encryptor()
    assert ref.update(data) + ref.finalize() == bytes(out), "DES-CBC mismatch"
    return bytes(out)


def next_prime_below(start: int, limit: int) -> int:
    n = start | 1
    while not is_probable_prime(n):
        n += 2
    assert n < limit
    return n


def mslogon2_vectors() -> dict:
    # Anchor the DES convention to the VncAuth vector in DESTests.swift.
    challenge = bytes(range(16))
    des = PyCryptodomeDES.new(vnc_des_key(b"secret12"), PyCryptodomeDES.MODE_ECB)
    assert des.encrypt(challenge).hex().upper() == "ADCD997F8E16FEE575E973F93C2B62B4"

    max_num = 1 << 31                                   # UltraVNC DH_MAX_BITS = 31
    gen = next_prime_below(int.from_bytes(stream("mslogon2/gen", 4), "big") % (max_num // 4), max_num)
    mod = next_prime_below(max_num // 2 + int.from_bytes(stream("mslogon2/mod", 4), "big") % (max_num // 4),
                           max_num)
    assert gen < mod
    server_private = int.from_bytes(stream("mslogon2/server-private", 8), "big") % max_num
    A = pow(gen, server_private, mod)
    client_private = stream("mslogon2/client-private", 8)       # TigerVNC: 8 random bytes
    b = int.from_bytes(client_private, "big")
    B = pow(gen, b, mod)
    K = pow(A, b, mod)
    assert K == pow(B, server_private, mod)
    key = K.to_bytes(8, "big")
    user_block = bytearray(stream("mslogon2/user-fill", 256))
    pass_block = bytearray(stream("mslogon2/pass-fill", 64))
    user_block[0:4] = b"ann\x00"
    pass_block[0:9] = b"secret12\x00"
    enc_user = des_cbc_vnc(key, key, bytes(user_block))
    enc_pass = des_cbc_vnc(key, key, bytes(pass_block))
    server_msg = gen.to_bytes(8, "big") + mod.to_bytes(8, "big") + A.to_bytes(8, "big")
    client_msg = B.to_bytes(8, "big") + enc_user + enc_pass
    # server side: UltraVNC decrypts with vncDecryptBytes2 (same key, IV = key)
    dec = PyCryptodomeDES.new(vnc_des_key(key), PyCryptodomeDES.MODE_CBC, iv=key)
    assert dec.decrypt(enc_user) == bytes(user_block)
    return {
        "securityType": 113,
        "generator": hx(gen.to_bytes(8, "big")),
        "modulus": hx(mod.to_bytes(8, "big")),
        "serverPrivate": hx(server_private.to_bytes(8, "big")),
        "serverPublic": hx(A.to_bytes(8, "big")),
        "clientPrivate": hx(client_private),
        "clientPublic": hx(B.to_bytes(8, "big")),
        "sharedSecret": hx(key),
        "desKeyBitReversed": hx(vnc_des_key(key)),
        "iv": hx(key),
        "username": "ann",
        "password": "secret12",
        "usernameBlock": hx(bytes(user_block)),
        "passwordBlock": hx(bytes(pass_block)),
        "encryptedUsername": hx(enc_user),
        "encryptedPassword": hx(enc_pass),
        "serverMessage": hx(server_msg),
        "clientMessage": hx(client_msg),
        "notes": [
            "DES key = shared secret (8 bytes big-endian) with every byte bit-reversed (the VncAuth "
            "convention); CBC IV = the shared secret as is; the CBC chain restarts (IV again) for "
            "the password block.",
        ],
    }


# ---------------------------------------------------------------------------------------------
# Extended Clipboard / QEMU key event byte strings
# ---------------------------------------------------------------------------------------------

def clipboard_vectors() -> dict:
    def ext(msg_type: int, payload: bytes) -> bytes:
        return struct.pack(">B3xi", msg_type, -len(payload)) + payload

    text = "héllo\r\nwörld ✓".encode() + b"\x00"
    inner = struct.pack(">I", len(text)) + text
    co = zlib.compressobj()
    sync = co.compress(inner) + co.flush(zlib.Z_SYNC_FLUSH)      # TigerVNC: never finished
    finished = zlib.compress(inner)                               # libvncserver: compress()
    assert zlib.decompressobj().decompress(sync) == inner
    return {
        "xvnc112Caps": hx(ext(3, struct.pack(">II", 0x1F000001, 0))),
        "x11vncCaps": hx(ext(3, struct.pack(">II", 0x17000001, 1 << 20))),
        "tigervncClientCaps": hx(ext(6, struct.pack(">II", 0x1F000001, 0))),
        "serverNotifyText": hx(ext(3, struct.pack(">I", 0x08000001))),
        "serverNotifyNothing": hx(ext(3, struct.pack(">I", 0x08000000))),
        "clientRequestText": hx(ext(6, struct.pack(">I", 0x02000001))),
        "clientPeek": hx(ext(6, struct.pack(">I", 0x04000000))),
        "provideText": "héllo\r\nwörld ✓",
        "provideInnerPlaintext": hx(inner),
        "serverProvideSyncFlush": hx(ext(3, struct.pack(">I", 0x10000001) + sync)),
        "serverProvideFinishedStream": hx(ext(3, struct.pack(">I", 0x10000001) + finished)),
        "notes": [
            "ext(type, payload) = type, 3 padding bytes, S32 -len(payload), payload.",
            "serverProvideSyncFlush is TigerVNC's shape (zlib header + sync-flushed deflate, no "
            "final block, no Adler-32); serverProvideFinishedStream is libvncserver's (compress()). "
            "A reader must accept both and must not insist on Z_STREAM_END.",
        ],
    }


def key_event_vectors() -> dict:
    def qemu(down: bool, keysym: int, code: int) -> str:
        return hx(struct.pack(">BBHII", 255, 0, int(down), keysym, code))

    return {
        "aDown": qemu(True, 0x61, 0x1E),
        "aUp": qemu(False, 0x61, 0x1E),
        "rightArrowDown": qemu(True, 0xFF53, 0xCD),
        "rightArrowUp": qemu(False, 0xFF53, 0xCD),
        "plainKeyEventAlphaUnicodeKeysym": hx(struct.pack(">BBxxI", 4, 1, 0x010003B1)),
        "extendedPointerBackButton": hx(struct.pack(">BBHHB", 5, 0x80, 10, 20, 0x01)),
    }


# ---------------------------------------------------------------------------------------------
# Live RA2 login (loopback only)
# ---------------------------------------------------------------------------------------------

def recv_exact(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"server closed after {len(out)}/{n} bytes")
        out += chunk
    return out


def live_ra2(host: str, port: int, sec_type: int, username: str, password: str) -> str:
    assert host in ("127.0.0.1", "localhost", "::1"), "loopback only"
    name, key_bits, all_encrypted, rnd_len, h = ra2_params(sec_type)
    client = RSAKey(CLIENT_KEY_PEM)
    with socket.create_connection((host, port), timeout=10) as s:
        version = recv_exact(s, 12)
        s.sendall(b"RFB 003.008\n")
        count = recv_exact(s, 1)[0]
        if count == 0:
            reason = recv_exact(s, struct.unpack(">I", recv_exact(s, 4))[0])
            return f"refused: {reason!r}"
        offered = list(recv_exact(s, count))
        if sec_type not in offered:
            return f"type {sec_type} not offered (offered {offered})"
        s.sendall(bytes([sec_type]))
        bits = struct.unpack(">I", recv_exact(s, 4))[0]
        size = (bits + 7) // 8
        body = recv_exact(s, 2 * size)
        s_pub = struct.pack(">I", bits) + body
        sn, se = int.from_bytes(body[:size], "big"), int.from_bytes(body[size:], "big")
        c_pub = client.blob()
        client_random = stream(f"live/{name}/client-random", rnd_len)
        ps = nonzero_stream(f"live/{name}/pad", size - 3 - rnd_len)
        em = b"\x00\x02" + ps + b"\x00" + client_random
        ct = pow(int.from_bytes(em, "big"), se, sn).to_bytes(size, "big")
        s.sendall(c_pub + struct.pack(">H", size) + ct)
        rlen = struct.unpack(">H", recv_exact(s, 2))[0]
        if rlen != client.size:
            return f"unexpected random length {rlen}"
        server_random = client.decrypt_pkcs1v15(recv_exact(s, rlen))
        if len(server_random) != rnd_len:
            return f"server random has {len(server_random)} bytes"
        c2s_key, s2c_key = ra2_session_keys(sec_type, server_random, client_random)
        tx, rx = EAXChannel(c2s_key), EAXChannel(s2c_key)
        s.sendall(tx.seal(h(c_pub + s_pub).digest()))

        def read_frame() -> bytes:
            hdr = recv_exact(s, 2)
            n = int.from_bytes(hdr, "big")
            pt, _ = rx.open_one(hdr + recv_exact(s, n + 16))
            return pt

        server_hash = read_frame()
        if server_hash != h(s_pub + c_pub).digest():
            return "server hash mismatch"
        subtype = read_frame()[0]
        s.sendall(tx.seal(credentials_payload(subtype, username, password)))
        plain_buf = b""

        def read_plain(n: int) -> bytes:
            nonlocal plain_buf
            while len(plain_buf) < n:
                plain_buf += read_frame() if all_encrypted else s.recv(4096)
            out, plain_buf = plain_buf[:n], plain_buf[n:]
            return out

        result = struct.unpack(">I", read_plain(4))[0]
        if result != 0:
            reason = read_plain(struct.unpack(">I", read_plain(4))[0])
            return f"{name} subtype {subtype}: SecurityResult {result}: {reason.decode(errors='replace')}"
        send = (lambda b: s.sendall(tx.seal(b))) if all_encrypted else s.sendall
        send(b"\x01")
        si = read_plain(24)
        w, hgt = struct.unpack(">HH", si[:4])
        desk = read_plain(struct.unpack(">I", si[20:24])[0]).decode(errors="replace")
        send(struct.pack(">BBHi", 2, 0, 1, 0))                       # SetEncodings [Raw]
        send(struct.pack(">BBHHHH", 3, 0, 0, 0, 1, 1))               # 1x1 update request
        hdr = read_plain(4)
        return (f"{name} (type {sec_type}) subtype {subtype}: OK, server {version!r}, "
                f"desktop {desk!r} {w}x{hgt}, first server message type {hdr[0]} "
                f"({'EAX frames' if all_encrypted else 'plain'})")


# ---------------------------------------------------------------------------------------------

def build() -> dict:
    return {
        "description": "RFB security known-answer vectors made by "
                       "scripts/vectors/make_rfb_security_vectors.py; see docs/rfb-security-digest.md",
        "eax": eax_vectors(),
        "ra2": ra2_transcript(5, subtype=1),
        "ra2PasswordOnly": ra2_transcript(5, subtype=2),
        "ra2ne": ra2_transcript(6, subtype=1),
        "ra2_256": ra2_transcript(129, subtype=1),
        "ra2ne_256": ra2_transcript(130, subtype=2),
        "ard": ard_vectors(),
        "msLogonII": mslogon2_vectors(),
        "extendedClipboard": clipboard_vectors(),
        "keyEvents": key_event_vectors(),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--live", metavar="HOST:PORT", help="log in to a real server (loopback only)")
    ap.add_argument("--types", default="5,6,129,130", help="security types to try with --live")
    ap.add_argument("--username", default="ann")
    ap.add_argument("--password", default="pässword")
    ap.add_argument("--write-server-key", metavar="PATH", help="write the fixed server RSA key (PEM)")
    args = ap.parse_args()
    if args.write_server_key:
        Path(args.write_server_key).write_text(SERVER_KEY_PEM)
        return 0
    if args.live:
        host, port = args.live.rsplit(":", 1)
        ok = True
        for t in (int(x) for x in args.types.split(",")):
            try:
                line = live_ra2(host, int(port), t, args.username, args.password)
            except Exception as e:  # noqa: BLE001 -- report and go on with the next type
                line = f"type {t}: {type(e).__name__}: {e}"
            ok &= ": OK," in line
            print(line)
        return 0 if ok else 1
    doc = build()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
