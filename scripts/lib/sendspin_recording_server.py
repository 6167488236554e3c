#!/usr/bin/env python3
"""A Sendspin server (aiosendspin 10.2.1, encrypted wire) that records what its clients send.

Every client message the server has decrypted and parsed is written, in the order the server
received it, as one line of `--record`: the message type, and for client/command the command with
its position or offset (`client/command seek 17`), for client/goodbye the reason. The connection's
end is recorded too (`closed: <why>`), so a test can tell a clean goodbye from a session the server
dropped (an out-of-order Noise frame fails authentication and ends the connection).

Controller commands are recorded and not acted on: the point is what arrived and in which order,
not what a group would make of thousands of seeks. Everything else takes aiosendspin's own path.
Every client is approved for unpaired playback, as `sendspin serve` does.

Run only on loopback inside a network namespace; it binds 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from typing import Any, TextIO


def install_recorder(out: TextIO) -> None:
    from aiosendspin.models.core import ClientCommandMessage, ClientGoodbyeMessage
    from aiosendspin.server.connection import SendspinConnection

    original = SendspinConnection._handle_message

    async def handle(self: Any, message: Any, timestamp_us: int) -> None:
        kind = getattr(message, "type", type(message).__name__)
        if isinstance(message, ClientCommandMessage):
            controller = message.payload.controller
            if controller is None:
                out.write(f"{kind} none\n")
            else:
                value = controller.position_ms if controller.position_ms is not None else controller.offset_ms
                out.write(f"{kind} {controller.command.value} {value}\n")
            return
        if isinstance(message, ClientGoodbyeMessage):
            reason = getattr(message.payload.reason, "value", message.payload.reason)
            out.write(f"{kind} {reason}\n")
        else:
            out.write(f"{kind}\n")
        await original(self, message, timestamp_us)

    SendspinConnection._handle_message = handle  # type: ignore[method-assign]


def install_close_recorder(out: TextIO) -> None:
    from aiosendspin.noise.wire import EncryptedWebSocket

    original = EncryptedWebSocket._error

    def error(self: Any, reason: str) -> Any:
        out.write(f"closed: {reason}\n")
        out.flush()
        return original(self, reason)

    EncryptedWebSocket._error = error  # type: ignore[method-assign]


def make_pairing_store(approved_roles: frozenset[str] = frozenset()) -> Any:
    """Every client trusted for unpaired playback, and for the pairing-required role families
    in `approved_roles` (such as "source")."""
    from aiosendspin.noise import InMemoryServerPairingStore, TrustedUnpairedClient

    class OpenDoorPairingStore(InMemoryServerPairingStore):
        async def trusted_unpaired(self, client_id: str) -> TrustedUnpairedClient | None:
            return await super().trusted_unpaired(client_id) or TrustedUnpairedClient(client_id, approved_roles=approved_roles)

    return OpenDoorPairingStore()


async def run(args: argparse.Namespace) -> None:
    from aiosendspin.noise import Identity
    from aiosendspin.server import SendspinServer

    out = open(args.record, "w", buffering=1 << 16)  # noqa: SIM115 - flushed on a timer and at exit
    install_recorder(out)
    install_close_recorder(out)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server = SendspinServer(loop, Identity.generate(), args.name, pairing_store=make_pairing_store())
    await server.start_server(port=args.port, host="127.0.0.1", advertise_addresses=[], discover_clients=False)
    logging.getLogger("recording-server").info("listening on ws://127.0.0.1:%d%s", args.port, server.API_PATH)
    while not stop.is_set():
        out.flush()
        try:
            await asyncio.wait_for(stop.wait(), timeout=0.1)
        except (TimeoutError, asyncio.TimeoutError):
            pass
    try:
        await asyncio.wait_for(server.close(), timeout=5)
    finally:
        out.flush()
        out.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--name", default="recording-server")
    p.add_argument("--record", required=True, help="file the received client messages are written to, one a line")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
