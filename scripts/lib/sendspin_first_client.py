"""What the small aiosendspin test servers share: serve on 127.0.0.1, approve every client for
unpaired playback (as `sendspin serve` does), hand the first client that joins (or the first
`count`) to the script's own timeline, and stop cleanly on SIGTERM or SIGINT.

    run(args.port, args.name, timeline)               # timeline(server, client) is a coroutine
    run(args.port, args.name, timeline, count=2)      # timeline(server, [client, client])
    run(..., approved_roles=frozenset({"source"}))    # pairing-required roles approved too
"""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Any, Awaitable, Callable


def run(port: int, name: str, timeline: Callable[[Any, Any], Awaitable[None]], count: int = 1,
        approved_roles: frozenset[str] = frozenset()) -> None:
    """Logs at INFO and serves until stopped (`asyncio.run` of `serve_first_client`)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(serve_first_client(port, name, timeline, count, approved_roles))


async def serve_first_client(port: int, name: str, timeline: Callable[[Any, Any], Awaitable[None]], count: int = 1,
                             approved_roles: frozenset[str] = frozenset()) -> None:
    from aiosendspin.noise import Identity
    from aiosendspin.server import SendspinServer
    from aiosendspin.server.server import ClientAddedEvent
    from sendspin_recording_server import make_pairing_store  # this directory: every client approved

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server = SendspinServer(loop, Identity.generate(), name, pairing_store=make_pairing_store(approved_roles))
    joined: asyncio.Queue[str] = asyncio.Queue()

    def on_event(_server: Any, event: Any) -> None:
        if isinstance(event, ClientAddedEvent):
            joined.put_nowait(event.client_id)

    server.add_event_listener(on_event)
    await server.start_server(port=port, host="127.0.0.1", advertise_addresses=[], discover_clients=False)
    logging.getLogger(name).info("listening on ws://127.0.0.1:%d%s", port, server.API_PATH)

    async def first() -> None:
        clients = [server.get_client(await joined.get()) for _ in range(count)]
        await timeline(server, clients[0] if count == 1 else clients)

    task = asyncio.create_task(first())
    await stop.wait()
    task.cancel()
    await asyncio.wait_for(server.close(), timeout=5)
