#!/usr/bin/env python3
"""A Sendspin server (aiosendspin 10.2.1, encrypted wire) that turns its first player's volume.

When a player joins, it waits --settle seconds and then sends, through aiosendspin's own
player-role API, one command every --step seconds:

  1. volume 40
  2. mute
  3. unmute
  4. volume 70

Before each command it appends a line to --log: `<step> <command> <value> <volume the player
reported> <mute the player reported>` (what the player said in its last client/state), and after
the last one `done`. Then it keeps serving until stopped (sendspin_first_client.py: every client
approved for unpaired playback).

Run only on loopback inside a network namespace; it binds 127.0.0.1.
"""

from __future__ import annotations

import argparse
from typing import Any

import sendspin_first_client  # this directory


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--name", default="volume-server")
    p.add_argument("--log", required=True, help="file the timeline's steps are appended to")
    p.add_argument("--settle", type=float, default=1.5, help="seconds between a player joining and the first command")
    p.add_argument("--step", type=float, default=1.0, help="seconds between the commands")
    args = p.parse_args()
    log = open(args.log, "a", buffering=1)

    async def timeline(_server: Any, client: Any) -> None:
        import asyncio

        await asyncio.sleep(args.settle)
        player = client.role("player@v1")
        steps = [("volume", 40), ("mute", True), ("mute", False), ("volume", 70)]
        for n, (command, value) in enumerate(steps, 1):
            log.write(f"{n} {command} {value} {player.volume} {player.muted}\n")
            if command == "volume":
                player.set_volume(value)
            else:
                player.set_mute(value)
            await asyncio.sleep(args.step)
        log.write(f"done {player.volume} {player.muted}\n")

    sendspin_first_client.run(args.port, args.name, timeline)


if __name__ == "__main__":
    main()
