#!/usr/bin/env python3
"""A Sendspin server (aiosendspin 10.2.1, encrypted wire) that shows artwork to its first client.

When a client joins, it waits --settle seconds (time sync and the client's artwork channels) and
then plays this timeline through aiosendspin's own artwork API (ArtworkGroupRole), one step every
--step seconds:

  1. album picture A (a 200x100 gradient) and artist picture B (a 30x90 stripe pattern)
  2. album cleared (None)
  3. album picture C scheduled --lead seconds ahead (set with timestamp_us in the future)

The server scales and encodes each picture for each channel itself (letterboxed, JPEG quality 85
or PNG); every encoded picture it hands to a client's channel is saved as
DIR/sent-<n>-channel<c>.<jpg|png|clear> with a line in DIR/log: `<n> channel <c> <bytes>
<server time µs when due> <server time µs when handed over>`. Then it keeps serving until
stopped (sendspin_first_client.py: every client approved for unpaired playback).

Run only on loopback inside a network namespace; it binds 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

import sendspin_first_client  # this directory


def picture(kind: str) -> Any:
    from PIL import Image

    if kind == "A":
        image = Image.new("RGB", (200, 100))
        image.putdata([(x, y * 2, 255 - x) for y in range(100) for x in range(200)])
    elif kind == "B":
        image = Image.new("RGB", (30, 90))
        image.putdata([((x * 8) % 256, 40, 200 if y % 10 < 5 else 20) for y in range(90) for x in range(30)])
    else:
        image = Image.new("RGB", (64, 64), (250, 200, 0))
    return image


def install_recorder(folder: Path, clock: Any) -> None:
    from aiosendspin.server.roles.artwork.v1 import ArtworkV1Role

    original = ArtworkV1Role.send_artwork
    count = [0]
    log = (folder / "log").open("a", buffering=1)

    def send_artwork(self: Any, channel: int, image_data: bytes, timestamp_us: int) -> None:
        if channel in self.get_channel_configs():
            count[0] += 1
            suffix = "clear" if not image_data else ("png" if image_data.startswith(b"\x89PNG") else "jpg")
            (folder / f"sent-{count[0]}-channel{channel}.{suffix}").write_bytes(image_data)
            log.write(f"{count[0]} channel {channel} {len(image_data)} {timestamp_us} {clock.now_us()}\n")
        original(self, channel, image_data, timestamp_us)

    ArtworkV1Role.send_artwork = send_artwork  # type: ignore[method-assign]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--name", default="artwork-server")
    p.add_argument("--record", required=True, help="directory for the pictures sent and their log")
    p.add_argument("--settle", type=float, default=2.0, help="seconds between a client joining and the first picture")
    p.add_argument("--step", type=float, default=2.0, help="seconds between the timeline's steps")
    p.add_argument("--lead", type=float, default=2.0, help="how far ahead the scheduled picture is due, in seconds")
    args = p.parse_args()
    folder = Path(args.record)
    folder.mkdir(parents=True, exist_ok=True)

    async def timeline(server: Any, client: Any) -> None:
        install_recorder(folder, server.clock)
        await asyncio.sleep(args.settle)
        artwork = client.group.group_role("artwork")
        await artwork.set_album_artwork(picture("A"))
        await artwork.set_artist_artwork(picture("B"))
        await asyncio.sleep(args.step)
        await artwork.set_album_artwork(None)
        await asyncio.sleep(args.step)
        due = server.clock.now_us() + int(args.lead * 1_000_000)
        await artwork.set_album_artwork(picture("C"), timestamp_us=due)
        (folder / "done").write_text(f"{due}\n")

    sendspin_first_client.run(args.port, args.name, timeline)


if __name__ == "__main__":
    main()
