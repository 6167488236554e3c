"""punktfunk/1 video packetizer for the stand-in host: geometry, header, FEC, sealing.

Written from Farcast's protocol notes (§5, §6): shards of `shard_payload` bytes, blocks of at most
`max_data_per_block` data shards, m = ceil(k * pct / 100) Leopard GF(2^16) recovery shards per
block (reed-solomon-leopard), every block's data shards first and then every block's parity, a
40-byte little-endian header, and AES-128-GCM over header ‖ shard with nonce = salt (top bit of
salt[0] = direction) ‖ seq (u64 BE), AAD = the 8 clear sequence bytes.
"""

import math
import struct

import reed_solomon_leopard
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

MAGIC = 0xC9
VERSION = 1
FEC_GF16 = 1
FLAG_PIC = 0x1
FLAG_EOF = 0x2
FLAG_SOF = 0x4
FLAG_PROBE = 0x8
USER_PROBE = 0x08
HEADER = struct.Struct("<QIIIIHHHHHHBBBB")
assert HEADER.size == 40


class Sealer:
    def __init__(self, key, salt, direction):
        self.aead = AESGCM(key)
        self.prefix = bytes([(salt[0] & 0x7F) | (direction << 7)]) + salt[1:4]
        self.seq = 0

    def seal(self, plaintext):
        seq = struct.pack(">Q", self.seq)
        self.seq += 1
        return seq + self.aead.encrypt(self.prefix + seq, plaintext, seq)


class StreamState:
    def __init__(self):
        self.stream_seq = 0


def geometry(frame_bytes, shard, max_k, pct):
    """[(block_index, k, m)] for an AU."""
    total = max(1, math.ceil(frame_bytes / shard))
    blocks = []
    for b in range(math.ceil(total / max_k)):
        k = min(max_k, total - b * max_k)
        m = math.ceil(k * pct / 100) if pct > 0 else 0
        blocks.append((b, k, m))
    return blocks


def packetize(au, frame_index, pts_ns, shard, max_k, pct, user_flags, extra_flags, state, sealer):
    """Yields sealed datagrams for one access unit, in wire order."""
    blocks = geometry(len(au), shard, max_k, pct)
    padded = au + bytes(max(1, math.ceil(len(au) / shard)) * shard - len(au))
    packets = []  # (block, k, m, index, payload)
    parity = []
    for b, k, m in blocks:
        data = [padded[(b * max_k + i) * shard:(b * max_k + i + 1) * shard] for i in range(k)]
        for i, d in enumerate(data):
            packets.append((b, k, m, i, d))
        if m:
            recovery = reed_solomon_leopard.encode(data, m)
            for j, r in enumerate(recovery):
                parity.append((b, k, m, k + j, bytes(r)))
    ordered = packets + parity
    last = len(ordered) - 1
    for n, (b, k, m, index, payload) in enumerate(ordered):
        flags = FLAG_PIC | extra_flags
        if n == 0:
            flags |= FLAG_SOF
        if n == last:
            flags |= FLAG_EOF
        header = HEADER.pack(pts_ns, frame_index, state.stream_seq & 0xFFFFFFFF, len(au), user_flags, b, len(blocks),
                             k, m, index, shard, MAGIC, VERSION, FEC_GF16, flags)
        state.stream_seq += 1
        yield sealer.seal(header + payload)
