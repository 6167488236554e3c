#!/usr/bin/env python3
"""A Sendspin server (aiosendspin 10.2.1, encrypted wire) that plays a source client's input to
its group, as a music server plays a line-in.

It waits for --clients clients: the one offering source@v1 (the line-in, a player too) and plain
players. It puts the players into the source client's group, waits --settle seconds (the
clocks converge), asks the source to start
(aiosendspin's SourceV1Role.request_start), and when the input stream starts, pushes each decoded
chunk into the group's stream to play --delay seconds after its first chunk's capture time,
advancing by sample count (the capture timestamps are logged, not used to place later chunks).
After --seconds of input it asks the source to stop.

DIR/log gets one line per fact the test checks, on the server clock (µs):
  format <codec-independent decoded format>
  chunk <capture timestamp_us> <arrival_us> <frames>
  stopped <server_us>
Then it keeps serving until stopped (sendspin_first_client.py: every client approved for
unpaired playback).

Run only on loopback inside a network namespace; it binds 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

import sendspin_first_client  # this directory


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--name", default="source-server")
    p.add_argument("--record", required=True, help="directory for the log of the chunks received")
    p.add_argument("--delay", type=float, default=0.6, help="seconds from a chunk's capture to its playback")
    p.add_argument("--seconds", type=float, default=6.0, help="seconds of input before the source is asked to stop")
    p.add_argument("--settle", type=float, default=0.0, help="seconds between the clients joining and asking the source to start")
    p.add_argument("--clients", type=int, default=2, help="clients to wait for: the source and the players")
    args = p.parse_args()
    folder = Path(args.record)
    folder.mkdir(parents=True, exist_ok=True)
    log = (folder / "log").open("a", buffering=1)

    async def timeline(server: Any, clients: list[Any]) -> None:
        from aiosendspin.server.roles.source.events import SourceStreamStartedEvent

        source = next(c for c in clients if c.role("source@v1") is not None)
        for listener in clients:
            if listener is not source:
                await source.group.add_client(listener)
        started: asyncio.Queue[Any] = asyncio.Queue()

        def on_event(_client: Any, event: Any) -> None:
            if isinstance(event, SourceStreamStartedEvent):
                started.put_nowait(event)

        source.add_event_listener(on_event)
        await asyncio.sleep(args.settle)
        role = source.role("source@v1")
        role.request_start()
        event = await started.get()
        fmt = event.audio_format
        log.write(f"format {fmt.sample_rate} {fmt.bit_depth} {fmt.channels}\n")
        stream = source.group.start_stream()
        frame_bytes = fmt.bit_depth // 8 * fmt.channels
        anchor = None
        frames_in = 0
        async for pcm, timestamp_us in event.handle:
            now = server.clock.now_us()
            frames = len(pcm) // frame_bytes
            log.write(f"chunk {timestamp_us} {now} {frames}\n")
            if anchor is None:
                anchor = timestamp_us + int(args.delay * 1_000_000)
            stream.prepare_audio(pcm, fmt)
            await stream.commit_audio(play_start_us=anchor + frames_in * 1_000_000 // fmt.sample_rate)
            frames_in += frames
            if frames_in >= args.seconds * fmt.sample_rate:
                role.request_stop()
                log.write(f"stopped {server.clock.now_us()}\n")
                break

    # The source role needs pairing or the operator's approval: approved here for every client.
    sendspin_first_client.run(args.port, args.name, timeline, count=args.clients, approved_roles=frozenset({"source"}))


if __name__ == "__main__":
    main()
