#!/usr/bin/env python3
"""A Sendspin server (aiosendspin 10.2.1, encrypted wire) that plays a known pattern to its first
client and drives the visualizer and color roles with aiosendspin's own server code.

When a client joins, it waits --settle seconds (time sync and the client's state), then plays
48 kHz/16-bit stereo PCM in 20 ms chunks: --segment seconds of silence, a 1000 Hz sine at half
scale, silence, a 3000 Hz sine, silence; then the stream ends. The visualizer role computes
loudness, f_peak, spectrum and peak frames from that audio itself. Right after the first chunk
it hands the visualizer role a beat schedule (every 500 ms from 1 s into the pattern, a downbeat
every fourth) and sets two color palettes: one at once, one due --lead seconds later.

DIR/log gets one line per fact the test checks, on the server clock (µs):
  segment <silence|tone> <hz> <start_us> <end_us>
  beat <timestamp_us> <0|1>
  color <n> <timestamp_us|now> <set_at_us>
  done <stream end us>
Then it keeps serving until stopped (sendspin_first_client.py: every client approved for
unpaired playback).

Run only on loopback inside a network namespace; it binds 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import struct
from pathlib import Path
from typing import Any

import sendspin_first_client  # this directory

RATE = 48_000
CHUNK_FRAMES = 960  # 20 ms


def chunk(frequency: float, start_frame: int) -> bytes:
    if frequency == 0:
        return bytes(CHUNK_FRAMES * 4)
    samples = []
    for i in range(CHUNK_FRAMES):
        value = int(16_383 * math.sin(2 * math.pi * frequency * (start_frame + i) / RATE))
        samples.append(value)
        samples.append(value)
    return struct.pack(f"<{len(samples)}h", *samples)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--name", default="visualizer-server")
    p.add_argument("--record", required=True, help="directory for the log of what was played and scheduled")
    p.add_argument("--settle", type=float, default=2.0, help="seconds between a client joining and the first chunk")
    p.add_argument("--segment", type=float, default=1.5, help="seconds of each silence and tone segment")
    p.add_argument("--lead", type=float, default=1.5, help="how far ahead the second palette is due, in seconds")
    args = p.parse_args()
    folder = Path(args.record)
    folder.mkdir(parents=True, exist_ok=True)
    log = (folder / "log").open("a", buffering=1)

    async def timeline(server: Any, client: Any) -> None:
        from aiosendspin.audio.format import AudioFormat
        from aiosendspin.models.visualizer import BeatTiming
        from aiosendspin.server.roles.color.state import Color

        await asyncio.sleep(args.settle)
        fmt = AudioFormat(sample_rate=RATE, bit_depth=16, channels=2)
        stream = client.group.start_stream()
        pattern = [0, 1000, 0, 3000, 0]
        per_segment = int(args.segment * RATE / CHUNK_FRAMES)
        first_start = None
        for index, frequency in enumerate(pattern):
            segment_start = None
            end = None
            for n in range(per_segment):
                stream.prepare_audio(chunk(frequency, n * CHUNK_FRAMES), fmt)
                start = await stream.commit_audio()
                segment_start = start if segment_start is None else segment_start
                end = start + CHUNK_FRAMES * 1_000_000 // RATE
                if first_start is None:
                    first_start = start
                    client.role("visualizer@v1").set_tracks_downbeats(tracks=True)
                    beats = [BeatTiming(timestamp_us=start + 1_000_000 + k * 500_000, is_downbeat=k % 4 == 0) for k in range(14)]
                    client.group.group_role("visualizer").append_beat_schedule(beats)
                    for beat in beats:
                        log.write(f"beat {beat.timestamp_us} {int(beat.is_downbeat)}\n")
                    colors = client.group.group_role("color")
                    colors.set_color(Color(primary=(200, 30, 40), accent=(20, 160, 220), background_dark=(10, 10, 30), on_dark=(250, 250, 250)))
                    log.write(f"color 1 now {server.clock.now_us()}\n")
                    due = server.clock.now_us() + int(args.lead * 1_000_000)
                    colors.set_color(Color(primary=(30, 200, 60)), timestamp_us=due)
                    log.write(f"color 2 {due} {server.clock.now_us()}\n")
                await stream.sleep_to_limit_buffer(max_buffer_us=2_000_000)
            log.write(f"segment {'tone' if frequency else 'silence'} {frequency} {segment_start} {end}\n")
        # Until the last chunk has played, then the stream ends.
        await asyncio.sleep(max(0, (end - server.clock.now_us()) / 1_000_000) + 0.2)
        stream.stop()
        log.write(f"done {server.clock.now_us()}\n")

    sendspin_first_client.run(args.port, args.name, timeline)


if __name__ == "__main__":
    main()
