#!/usr/bin/env python3
"""Known-answer vectors for punktfunk/1 pairing (SPAKE2 over Ed25519, side A = client).

Run with the punktfunk venv (PyPI spake2 0.9):

    .venv-punktfunk/bin/python scripts/vectors/make_punktfunk_pairing_vectors.py

Writes Tests/PunktfunkTests/Fixtures/pairing-vectors.json (deterministic). PyPI spake2's
SPAKE2_A / SPAKE2_B are the oracle (the same construction as the Rust spake2 0.4 crate the host
uses): each case fixes both sides' entropy with a seeded byte stream, records side A's secret
scalar (32 bytes little-endian, as libsodium takes it), both messages and the shared key, and
then the two HMAC-SHA256 confirmations the punktfunk notes define, computed here by hand.
A last case runs side B with a different PIN, so the key and confirmations differ.
"""

import hashlib
import hmac
import json
import os
import random

import spake2
from spake2 import ed25519_basic

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "Tests", "PunktfunkTests", "Fixtures", "pairing-vectors.json")


def entropy(seed):
    rng = random.Random(seed)
    return lambda n: bytes(rng.getrandbits(8) for _ in range(n))


def case(seed, pin_a, pin_b):
    id_a = hashlib.sha256(b"client certificate %d" % seed).digest()
    id_b = hashlib.sha256(b"host certificate %d" % seed).digest()
    a = spake2.SPAKE2_A(pin_a.encode(), idA=id_a, idB=id_b, entropy_f=entropy(seed))
    b = spake2.SPAKE2_B(pin_b.encode(), idA=id_a, idB=id_b, entropy_f=entropy(seed + 1000))
    msg_a = a.start()
    msg_b = b.start()
    key_a = a.finish(msg_b)
    key_b = b.finish(msg_a)
    fps = id_a + id_b
    return {
        "pin": pin_a,
        "host_pin": pin_b,
        "id_a": id_a.hex(),
        "id_b": id_b.hex(),
        "scalar_le": ed25519_basic.scalar_to_bytes(a.xy_scalar).hex(),
        "password_scalar_le": ed25519_basic.scalar_to_bytes(a.pw_scalar).hex(),
        "message_a": msg_a.hex(),
        "message_b": msg_b.hex(),
        "key_a": key_a.hex(),
        "key_b": key_b.hex(),
        "confirm_host": hmac.new(key_b, b"punktfunk-pair-host" + fps, hashlib.sha256).hexdigest(),
        "confirm_client": hmac.new(key_a, b"punktfunk-pair-client" + fps, hashlib.sha256).hexdigest(),
    }


def main():
    cases = [case(s, pin, pin) for s, pin in [(1, "0000"), (2, "1234"), (3, "9876"), (4, "4242"), (5, "0007")]]
    cases.append(case(6, "1234", "4321"))
    doc = {"generator": "scripts/vectors/make_punktfunk_pairing_vectors.py", "spake2": spake2.__version__,
           "M": "15cfd18e385952982b6a8f8c7854963b58e34388c8e6dae891db756481a02312",
           "N": "f04f2e7eb734b2a8f8b472eaf9c3c632576ac64aea650b496a8a20ff00e583c3",
           "cases": cases}
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=2, sort_keys=True)
        f.write("\n")
    print(OUT)


if __name__ == "__main__":
    main()
