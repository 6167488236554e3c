#!/usr/bin/env python3
"""Drives aiosendspin 10.2.1's server side of Sendspin pairing against a listening player, for
Farcast's integration tests (the operator's part: paste the player's token, press "pair").

    .venv/bin/python scripts/lib/sendspin_pair_driver.py --client-url ws://127.0.0.1:8928/sendspin \
        --token SP:0... --port 18990
    FARCAST_PAIRING_CODE=12345678 .venv/bin/python scripts/lib/sendspin_pair_driver.py \
        --client-url ws://127.0.0.1:8928/sendspin --method static --port 18990

With --method static the operator "enters" the code from $FARCAST_PAIRING_CODE (not argv) and the
server runs the static pairing code method (CPace) instead of the token's Pairing PSK.

1. Starts a server on 127.0.0.1:PORT (no mDNS) with an in-memory pairing store and dials the
   player (server-initiated, the recommended mode).
2. Runs the Pairing-PSK method with the token: the server re-handshakes to the token's pairing
   PSK, the player sends a fresh long-term PSK, the server stores it, re-handshakes to it.
3. Closes, starts a second server instance with the same identity and store, and dials again:
   this first handshake already references the long-term PSK. A player that does not answer
   with it shows up as a credential mismatch.

stdout: one JSON object per line: {"event": "server", "server_id"}, {"event": "paired",
"client_id", "psk_id"}, {"event": "redialled", "credential_mismatch": bool}. Exit 0 on success,
1 with {"event": "error", "message"} otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys

from aiosendspin.models.types import PairMethod
from aiosendspin.noise import Identity, InMemoryServerPairingStore, decode_psk_token
from aiosendspin.noise.pairing import PairingAttempt
from aiosendspin.server import ClientAddedEvent, SendspinServer
from aiosendspin.server.server import ClientCredentialMismatchEvent


def emit(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


async def start(identity: Identity, store: InMemoryServerPairingStore, port: int, seen: dict) -> SendspinServer:
    server = SendspinServer(asyncio.get_running_loop(), identity, "farcast-pair-test", pairing_store=store)

    def on_event(_server: SendspinServer, event: object) -> None:
        if isinstance(event, ClientAddedEvent):
            seen["client_id"] = event.client_id
            seen["added"].set()
        elif isinstance(event, ClientCredentialMismatchEvent):
            seen["mismatch"] = True

    server.add_event_listener(on_event)
    await server.start_server(port=port, host="127.0.0.1", discover_clients=False)
    return server


async def run(args: argparse.Namespace) -> None:
    identity = Identity.generate()
    store = InMemoryServerPairingStore()
    seen: dict = {"added": asyncio.Event(), "mismatch": False}
    emit(event="server", server_id=identity.peer_id)

    server = await start(identity, store, args.port, seen)
    await asyncio.wait_for(server.connect_to_client_and_wait(args.client_url), 20)
    await asyncio.wait_for(seen["added"].wait(), 20)
    if args.method == "static":
        code = os.environ["FARCAST_PAIRING_CODE"]

        async def provide_code() -> str:
            return code

        attempt = PairingAttempt(method=PairMethod.STATIC_PAIRING_CODE, pairing_code_provider=provide_code)
    else:
        token = decode_psk_token(args.token)
        attempt = PairingAttempt(method=PairMethod.PAIRING_PSK, pairing_psk=token.pairing_psk, client_id=token.client_id)
    await asyncio.wait_for(server.initiate_pairing(seen["client_id"], attempt), 30)
    record = await store.record_by_client_id(seen["client_id"])
    if record is None:
        raise RuntimeError("pairing returned but the store holds no record")
    emit(event="paired", client_id=record.client_id, psk_id=record.psk_id)
    await asyncio.sleep(1)
    await server.close()

    # A fresh server process in all but name: same identity, same records, a new dial.
    seen["added"] = asyncio.Event()
    server = await start(identity, store, args.port + 1, seen)
    await asyncio.wait_for(server.connect_to_client_and_wait(args.client_url), 20)
    await asyncio.sleep(args.hold)
    emit(event="redialled", credential_mismatch=seen["mismatch"])
    await server.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--client-url", required=True)
    parser.add_argument("--token", help="the player's pairing token (--method psk)")
    parser.add_argument("--method", choices=("psk", "static"), default="psk")
    parser.add_argument("--port", type=int, required=True, help="the first server's port; the second uses PORT+1")
    parser.add_argument("--hold", type=float, default=3.0, help="seconds to stay connected after the redial")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    try:
        asyncio.run(run(args))
    except Exception as error:  # noqa: BLE001 - the test wants the reason, whatever it is
        emit(event="error", message=f"{type(error).__name__}: {error}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
