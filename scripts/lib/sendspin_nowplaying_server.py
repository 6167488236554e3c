#!/usr/bin/env python3
"""A Sendspin server (aiosendspin 10.2.1, encrypted wire) with a track playing for its first client.

When a client joins, the server sets the group's metadata (--title, --artist, --album, progress
--progress-ms of --duration-ms at normal speed) and offers every controller command; then it
appends one JSON line to --log for each controller command the client sends (as aiosendspin's
group reports it: {"command": "next"}, {"command": "volume", "volume": 95}, ...) and applies
shuffle and repeat as a music app would (aiosendspin applies volume and mute itself). It keeps serving
until stopped (sendspin_first_client.py: every client approved for unpaired playback).

Run only on loopback inside a network namespace; it binds 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import sendspin_first_client  # this directory


def command_of(event: Any) -> dict[str, Any] | None:
    """A controller event from aiosendspin's group as the command the client sent."""
    kind = type(event).__name__.removeprefix("Controller").removesuffix("Event").lower()
    if kind in ("play", "pause", "stop", "next", "previous", "switch"):
        return {"command": kind}
    if kind == "volume":
        return {"command": "volume", "volume": int(event.volume)}
    if kind == "mute":
        return {"command": "mute", "mute": bool(event.muted)}
    if kind == "repeat":
        return {"command": "repeat_" + event.mode.value}
    if kind == "shuffle":
        return {"command": "shuffle" if event.shuffle else "unshuffle"}
    return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--name", default="nowplaying-server")
    p.add_argument("--log", required=True, help="file the client's controller commands are appended to (JSON lines)")
    p.add_argument("--title", default="Farcast Test Song")
    p.add_argument("--artist", default="The Loopbacks")
    p.add_argument("--album", default="Private Namespace")
    p.add_argument("--progress-ms", type=int, default=12_000)
    p.add_argument("--duration-ms", type=int, default=180_000)
    args = p.parse_args()
    log = open(args.log, "a", buffering=1)

    async def timeline(_server: Any, client: Any) -> None:
        from aiosendspin.models.types import MediaCommand

        for _ in range(100):  # the roles are up once the client's hello is handled
            if client.group.group_role("metadata") and client.group.group_role("controller"):
                break
            await asyncio.sleep(0.05)

        controller = client.group.group_role("controller")

        def on_group_event(_group: Any, event: Any) -> None:
            command = command_of(event)
            if command is not None:
                log.write(json.dumps(command) + "\n")
            if command is not None and command["command"] in ("shuffle", "unshuffle"):
                controller.set_shuffle(command["command"] == "shuffle")
            elif command is not None and command["command"].startswith("repeat_"):
                controller.set_repeat(event.mode)

        client.group.add_event_listener(on_group_event)
        controller.set_supported_commands(list(MediaCommand))
        client.group.group_role("metadata").update(title=args.title, artist=args.artist, album=args.album,
                                                   track_progress=args.progress_ms, track_duration=args.duration_ms,
                                                   playback_speed=1000)
        log.write(json.dumps({"ready": True}) + "\n")

    sendspin_first_client.run(args.port, args.name, timeline)


if __name__ == "__main__":
    main()
