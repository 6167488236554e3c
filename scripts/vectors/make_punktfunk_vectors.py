#!/usr/bin/env python3
"""Known-answer vectors for the punktfunk/1 data plane, from the bit-true oracles on PyPI.

Run with the venv scripts/setup makes:

    .venv-punktfunk/bin/python scripts/vectors/make_punktfunk_vectors.py

Writes, deterministically (same bytes on every run):

  Tests/PunktfunkTests/Fixtures/fec-vectors.json
      Leopard-RS over GF(2^16) from reed-solomon-leopard 0.2.1 (bindings over reed-solomon-simd
      3.0.1, the crate family the punktfunk host encodes with). Per case (k, m, shard_bytes): the
      originals are a splitmix64 byte stream (seed given; the Swift tests regenerate it), the
      recovery shards' SHA-256 (all together, each one when m <= 64, and their hex when small), and erasure patterns with the oracle's
      verdict (restored indices, or a refusal when too few shards remain).
  Tests/PunktfunkTests/Fixtures/aead-vectors.json
      Sealed video datagrams from `cryptography`: seq (u64 BE, clear) || AEAD(header || shard) ||
      tag, AES-128-GCM and ChaCha20-Poly1305, nonce = salt with its top bit replaced by the
      sender's direction (host 0, client 1) || seq BE, AAD = the 8 sequence bytes.
"""

from __future__ import annotations

import hashlib
import json
import random
import struct
import sys
from pathlib import Path

import reed_solomon_leopard as rsl
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "Tests" / "PunktfunkTests" / "Fixtures"
MASK64 = (1 << 64) - 1


def splitmix64_bytes(seed: int, count: int) -> bytes:
    """count bytes of the splitmix64 stream from `seed`, each output word little-endian."""
    state = seed & MASK64
    out = bytearray()
    while len(out) < count:
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        z ^= z >> 31
        out += struct.pack("<Q", z)
    return bytes(out[:count])


def originals_for(k: int, shard_bytes: int, seed: int) -> list[bytes]:
    stream = splitmix64_bytes(seed, k * shard_bytes)
    return [stream[i * shard_bytes:(i + 1) * shard_bytes] for i in range(k)]


# (k, m, shard_bytes). k > m (high rate), k ≈ m, k < m (low rate); every power-of-two boundary the
# rate choice turns on; the 64-byte blocks with and without a short tail (2, 6, 44, 130, 1388 bytes
# end in a tail; 64, 128, 1408 do not); single and multiple chunks, with a partial last chunk.
FEC_CASES = [
    (1, 1, 2), (1, 2, 64), (2, 1, 64), (1, 5, 44), (5, 1, 44), (7, 3, 6),
    (4, 1, 64), (4, 2, 64), (4, 3, 64), (4, 4, 64), (4, 5, 64),
    (16, 3, 44), (16, 4, 44), (16, 5, 44), (16, 7, 44), (16, 8, 44), (16, 9, 44), (16, 16, 44), (16, 20, 44),
    (8, 8, 128), (9, 8, 130), (8, 9, 130), (31, 32, 64), (32, 31, 64), (33, 32, 64),
    (3, 10, 64), (2, 40, 64), (5, 20, 64), (10, 100, 64), (1, 100, 2),
    (30, 6, 1408), (64, 13, 1388), (100, 20, 1408), (213, 43, 1408), (255, 51, 1408),
    (300, 60, 130), (1000, 200, 64), (4096, 820, 64), (4096, 2, 64), (2, 4096, 64),
]


def erasure_patterns(k: int, m: int, rng: random.Random) -> list[tuple[list[int], list[int]]]:
    """(lost originals, lost recovery) pairs: recoverable ones and one too many."""
    pats = []
    n = min(k, m)
    pats.append((list(range(n)), []))                      # the first originals
    pats.append((list(range(k - n, k)), []))               # the last originals
    pats.append((list(range(n)), list(range(m - n, m)) if m > n else []))  # + spare recovery
    everything = [("o", i) for i in range(k)] + [("r", j) for j in range(m)]
    for lose in (m, max(1, m // 2), 1):
        picked = rng.sample(everything, min(lose, len(everything)))
        pats.append((sorted(i for t, i in picked if t == "o"), sorted(j for t, j in picked if t == "r")))
    # Unrecoverable: m + 1 shards gone, at least one an original.
    if m + 1 <= k + m:
        picked = rng.sample(everything, m + 1)
        lost_o = sorted(i for t, i in picked if t == "o") or [0]
        lost_r = sorted(j for t, j in picked if t == "r")
        while len(lost_o) + len(lost_r) < m + 1:
            lost_r.append(next(j for j in range(m) if j not in lost_r))
        pats.append((lost_o, sorted(lost_r)))
    return pats


def fec_vectors() -> dict:
    rng = random.Random(20261122)
    cases = []
    for index, (k, m, sb) in enumerate(FEC_CASES):
        seed = 0x5EED_0000 + index
        originals = originals_for(k, sb, seed)
        recovery = rsl.encode(originals, m)
        assert len(recovery) == m and all(len(r) == sb for r in recovery)
        case = {"k": k, "m": m, "shard_bytes": sb, "seed": seed,
                "recovery_all_sha256": hashlib.sha256(b"".join(recovery)).hexdigest()}
        if m <= 64:
            case["recovery_sha256"] = [hashlib.sha256(r).hexdigest() for r in recovery]
        if m * sb <= 2048:
            case["recovery_hex"] = [r.hex() for r in recovery]
        decodes = []
        for lost_o, lost_r in erasure_patterns(k, m, rng):
            have_o = {i: originals[i] for i in range(k) if i not in lost_o}
            have_r = {j: recovery[j] for j in range(m) if j not in lost_r}
            entry = {"lost_originals": lost_o, "lost_recovery": lost_r}
            try:
                restored = rsl.decode(k, m, have_o, have_r)
            except Exception as error:  # the oracle refuses: too few shards
                assert len(have_o) + len(have_r) < k, (k, m, lost_o, lost_r, error)
                entry["recoverable"] = False
            else:
                assert sorted(restored) == sorted(lost_o), (k, m, lost_o, sorted(restored))
                assert all(restored[i] == originals[i] for i in restored)
                entry["recoverable"] = True
            decodes.append(entry)
        case["decodes"] = decodes
        cases.append(case)
    return {
        "$comment": "Generated by scripts/vectors/make_punktfunk_vectors.py with reed-solomon-leopard "
                    f"{getattr(rsl, '__version__', '0.2.1')}; originals = splitmix64(seed) bytes, shard i at i*shard_bytes.",
        "cases": cases,
    }


def header(pts: int, frame: int, seq: int, frame_bytes: int, k: int, m: int, index: int, shard_bytes: int) -> bytes:
    # The 40-byte little-endian video header (punktfunk/1 §5), magic 0xC9, version 1, fec scheme 1.
    return struct.pack("<QIIIIHHHHHHBBBB", pts, frame, seq & 0xFFFFFFFF, frame_bytes, 0x10, 0, 1, k, m, index,
                       shard_bytes, 0xC9, 1, 1, 0x01 | (0x04 if index == 0 else 0) | (0x02 if index == k + m - 1 else 0))


def aead_vectors() -> dict:
    cases = []
    for cipher, key_len in (("aes-128-gcm", 16), ("chacha20-poly1305", 32)):
        key = splitmix64_bytes(0xAEAD_0000 + key_len, key_len)
        salt = splitmix64_bytes(0x5A17, 4)
        for direction in (0, 1):
            for seq in (0, 1, 255, (1 << 32) + 5, (1 << 63) + 7, MASK64):
                shard_bytes = 64 if seq % 2 else 1408
                plaintext = header(1_700_000_000_123_456_789, 42, seq, 5000, 4, 1, seq % 5, shard_bytes) + \
                    splitmix64_bytes(seq ^ 0xDA7A, shard_bytes)
                nonce = bytes([(salt[0] & 0x7F) | (direction << 7)]) + salt[1:4] + struct.pack(">Q", seq)
                aad = struct.pack(">Q", seq)
                sealed = (AESGCM(key) if key_len == 16 else ChaCha20Poly1305(key)).encrypt(nonce, plaintext, aad)
                cases.append({
                    "cipher": cipher, "key": key.hex(), "salt": salt.hex(), "direction": direction, "seq": str(seq),
                    "plaintext": plaintext.hex(), "datagram": (aad + sealed).hex(),
                })
    return {
        "$comment": "Generated by scripts/vectors/make_punktfunk_vectors.py with the `cryptography` package; "
                    "seq is a decimal string (u64).",
        "cases": cases,
    }


def write(name: str, data: dict) -> None:
    path = FIXTURES / name
    # One case per line keeps the file small and its diffs readable.
    lines = [json.dumps(case, sort_keys=True, separators=(",", ":")) for case in data["cases"]]
    path.write_text('{"$comment":' + json.dumps(data["$comment"]) + ',\n"cases":[\n' + ",\n".join(lines) + "\n]}\n")
    print(f"wrote {path.relative_to(REPO)} ({path.stat().st_size} bytes)", file=sys.stderr)


def main() -> None:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    write("fec-vectors.json", fec_vectors())
    write("aead-vectors.json", aead_vectors())


if __name__ == "__main__":
    main()
