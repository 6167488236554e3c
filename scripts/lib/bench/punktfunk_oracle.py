#!/usr/bin/env python3
"""Decode rate of reed-solomon-leopard (the punktfunk host's FEC crate family) on the very blocks
punktfunk-bench had to repair: reads blocks-<loss>.bin, decodes each block with rsl.decode and
times only those calls (median of repeated runs). Prints one JSON object per file:
{"loss_pct", "oracle_decode_gbps", "blocks", "decoded_block_bytes"}. Called by
scripts/lib/bench/punktfunk.sh; do not run directly."""

import json
import statistics
import struct
import sys
import time

import reed_solomon_leopard as rsl


def load(path):
    blob = open(path, "rb").read()
    blocks, at = [], 0
    while at < len(blob):
        k, m, sb = struct.unpack_from("<III", blob, at)
        at += 12
        present = blob[at:at + k + m]
        at += k + m
        originals, recovery = {}, {}
        for i in range(k):
            if present[i]:
                originals[i] = blob[at:at + sb]
                at += sb
        for j in range(m):
            if present[k + j]:
                recovery[j] = blob[at:at + sb]
                at += sb
        blocks.append((k, m, sb, originals, recovery))
    return blocks


def main():
    min_seconds = float(sys.argv[1])
    for path in sys.argv[2:]:
        loss = float(path.rsplit("blocks-", 1)[1][:-4])
        blocks = load(path)
        data_bytes = sum(k * sb for k, m, sb, _, _ in blocks)
        times, spent = [], 0.0
        while spent < min_seconds or len(times) < 3:
            t0 = time.thread_time()
            for k, m, sb, originals, recovery in blocks:
                rsl.decode(k, m, originals, recovery)
            dt = time.thread_time() - t0
            times.append(dt)
            spent += dt
        print(json.dumps({"loss_pct": loss, "oracle_decode_gbps": round(data_bytes * 8 / statistics.median(times) / 1e9, 3),
                          "blocks": len(blocks), "decoded_block_bytes": data_bytes}))


if __name__ == "__main__":
    main()
