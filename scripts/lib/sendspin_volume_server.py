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
the last one `done`. Then it keeps serving until stopped. Every client is approved for unpaired
playback, as `sendspin serve` does.

Run only on loopback inside a network namespace; it binds 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from typing import Any


async def run(args: argparse.Namespace) -> None:
    from aiosendspin.noise import Identity
    from aiosendspin.server import SendspinServer
    from aiosendspin.server.server import ClientAddedEvent
    from sendspin_recording_server import make_pairing_store  # this directory: every client approved

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server = SendspinServer(loop, Identity.generate(), args.name, pairing_store=make_pairing_store())
    joined: asyncio.Queue[str] = asyncio.Queue()

    def on_event(_server: Any, event: Any) -> None:
        if isinstance(event, ClientAddedEvent):
            joined.put_nowait(event.client_id)

    server.add_event_listener(on_event)
    await server.start_server(port=args.port, host="127.0.0.1", advertise_addresses=[], discover_clients=False)
    logging.getLogger("volume-server").info("listening on ws://127.0.0.1:%d%s", args.port, server.API_PATH)
    log = open(args.log, "a", buffering=1)

    async def timeline() -> None:
        client = server.get_client(await joined.get())
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

    task = asyncio.create_task(timeline())
    await stop.wait()
    task.cancel()
    await asyncio.wait_for(server.close(), timeout=5)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--name", default="volume-server")
    p.add_argument("--log", required=True, help="file the timeline's steps are appended to")
    p.add_argument("--settle", type=float, default=1.5, help="seconds between a player joining and the first command")
    p.add_argument("--step", type=float, default=1.0, help="seconds between the commands")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
