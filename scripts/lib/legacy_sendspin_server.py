#!/usr/bin/env python3
"""Legacy-wire (pre-encryption) Sendspin test server for Farcast's integration tests.

Runs aiosendspin 5.3.0's SendspinServer (plain JSON text frames, no Noise) on 0.0.0.0:PORT,
path /sendspin (fixed by aiosendspin). Every player that connects gets its own group and a
continuous 440 Hz sine (s16, 48 kHz, stereo), pushed through aiosendspin's PushStream, which
encodes it for the player's negotiated format and timestamps it on the server's clock.

    .venv-legacy/bin/python scripts/lib/legacy_sendspin_server.py --port 8927 \
        [--name NAME] [--codec auto|pcm|flac|opus] [--seconds S] [--max-ahead-ms MS] \
        [--client ws://HOST:PORT/PATH] [--debug]

stdout: a single line "ready" once the listener is bound. stderr: connects, disconnects,
goodbye reasons, protocol errors (aiosendspin's warnings and errors). SIGTERM/SIGINT: exit 0.
--seconds S ends each player's stream (stream/end) after S seconds of audio; default: endless.
--client URL also dials a listening player at URL once ready (server-initiated mode).
The 0.0.0.0 bind means tests must run it inside a network namespace (unshare -n).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import uuid
from contextlib import suppress

import numpy as np
from aiohttp import web
from aiosendspin.models.types import AudioCodec
from aiosendspin.server import (
    AudioFormat,
    ClientAddedEvent,
    ClientRemovedEvent,
    SendspinEvent,
    SendspinServer,
)

log = logging.getLogger("legacy_sendspin_server")

RATE = 48_000
CHANNELS = 2
FREQ = 440
AMPLITUDE = 0.25
CHUNK_FRAMES = 960  # 20 ms per commit
PCM_FORMAT = AudioFormat(sample_rate=RATE, bit_depth=16, channels=CHANNELS)

# aiosendspin logs goodbye reasons and clean closes at DEBUG; let those few through.
_INTERESTING_DEBUG = ("client/goodbye", "WebSocket closed", "Incoming client connection")


class _StderrFilter(logging.Filter):
    def __init__(self, debug: bool) -> None:
        super().__init__()
        self._debug = debug

    def filter(self, record: logging.LogRecord) -> bool:
        if self._debug or record.levelno >= logging.INFO:
            return True
        msg = record.getMessage()
        return any(s in msg for s in _INTERESTING_DEBUG)


def _one_second_of_sine() -> bytes:
    """48,000 interleaved stereo s16le frames; 440 Hz fits a second exactly, so it loops seamlessly."""
    t = np.arange(RATE, dtype=np.float64) / RATE
    mono = np.round(np.sin(2 * np.pi * FREQ * t) * AMPLITUDE * 32767).astype("<i2")
    return np.repeat(mono, CHANNELS).tobytes()


class LegacyServer(SendspinServer):
    """SendspinServer that logs each WebSocket's lifetime (remote address and close code)."""

    async def on_client_connect(self, request: web.Request) -> web.StreamResponse:
        log.info("connect from %s", request.remote)
        try:
            resp = await super().on_client_connect(request)
        except Exception:
            log.exception("connection from %s failed", request.remote)
            raise
        code = getattr(resp, "close_code", None)
        log.info("disconnect from %s (close code %s)", request.remote, code)
        return resp


class App:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.sine = _one_second_of_sine()
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.server: LegacyServer | None = None

    def on_event(self, server: SendspinServer, event: SendspinEvent) -> None:
        if isinstance(event, ClientAddedEvent):
            client = server.get_client(event.client_id)
            if client is None:
                return
            roles = client.negotiated_roles
            log.info("client %s (%r) ready, roles %s", client.client_id, client.name, roles)
            if not any(r.startswith("player@") for r in roles):
                return
            old = self.tasks.pop(client.client_id, None)
            if old is not None:
                old.cancel()
            self.tasks[client.client_id] = asyncio.get_running_loop().create_task(
                self.stream_to(client.client_id)
            )
        elif isinstance(event, ClientRemovedEvent):
            log.info("client %s removed", event.client_id)
            task = self.tasks.pop(event.client_id, None)
            if task is not None:
                task.cancel()

    def _apply_codec(self, client) -> None:  # noqa: ANN001
        if self.args.codec == "auto":
            return
        for role in client.roles_by_family("player"):
            setter = getattr(role, "set_preferred_format", None)
            if setter is None or not setter(None, codec=AudioCodec(self.args.codec)):
                log.warning(
                    "client %s: cannot use codec %s; keeping the client's preference",
                    client.client_id,
                    self.args.codec,
                )

    async def stream_to(self, client_id: str) -> None:
        assert self.server is not None
        client = self.server.get_client(client_id)
        if client is None:
            return
        self._apply_codec(client)
        group = client.group
        stream = group.start_stream()
        max_ahead_us = self.args.max_ahead_ms * 1000
        total = None if self.args.seconds is None else int(self.args.seconds * RATE)
        frame_bytes = 2 * CHANNELS
        pos = 0  # frames sent so far
        end_us = 0  # play time of the end of the last committed chunk
        log.info("streaming 440 Hz to %s", client_id)
        try:
            while total is None or pos < total:
                n = CHUNK_FRAMES if total is None else min(CHUNK_FRAMES, total - pos)
                start = (pos % RATE) * frame_bytes
                chunk = self.sine[start : start + n * frame_bytes]
                if len(chunk) < n * frame_bytes:  # wrap around the one-second table
                    chunk += self.sine[: n * frame_bytes - len(chunk)]
                stream.prepare_audio(chunk, PCM_FORMAT)
                first_start = None
                if pos == 0 and self.args.start_delay_ms:
                    first_start = stream.now_us() + self.args.start_delay_ms * 1000
                start_us = await stream.commit_audio(play_start_us=first_start)
                end_us = start_us + n * 1_000_000 // RATE
                pos += n
                await asyncio.sleep(0)  # let the connection writer send while we fill ahead
                await stream.sleep_to_limit_buffer(max_buffer_us=max_ahead_us)
            # stream/end drops audio still queued for the player, so wait until the tail has played.
            await asyncio.sleep(max(0, end_us - stream.now_us()) / 1_000_000)
            log.info("%s: %.1f s sent, ending stream", client_id, pos / RATE)
            await group.stop()
        except asyncio.CancelledError:
            stream.stop()
            raise
        except Exception:
            log.exception("streaming to %s failed", client_id)
            stream.stop()


async def main(args: argparse.Namespace) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    app = App(args)
    server = LegacyServer(
        loop=loop, server_id=f"farcast-legacy-{uuid.uuid4().hex[:8]}", server_name=args.name
    )
    app.server = server
    server.add_event_listener(app.on_event)
    # Serve the WebSocket endpoint ourselves instead of start_server(): 5.3.0's start_server()
    # always opens a zeroconf socket, which fails (ENODEV) in a namespace with only lo. No mDNS.
    web_app = web.Application()
    web_app.router.add_get(SendspinServer.API_PATH, server.on_client_connect)
    runner = web.AppRunner(web_app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host="0.0.0.0", port=args.port).start()
    log.info("listening on 0.0.0.0:%d%s", args.port, SendspinServer.API_PATH)
    print("ready", flush=True)
    if args.client:
        from aiosendspin.models.types import ConnectionReason

        log.info("dialing %s", args.client)
        server.connect_to_client(args.client, connection_reason=ConnectionReason.PLAYBACK)
    await stop.wait()
    log.info("shutting down")
    for task in list(app.tasks.values()):
        task.cancel()
    for task in list(app.tasks.values()):
        with suppress(asyncio.CancelledError, Exception):
            await task
    with suppress(Exception):
        await asyncio.wait_for(server.close(), timeout=5)
    with suppress(Exception):
        await asyncio.wait_for(runner.cleanup(), timeout=5)
    return 0


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Legacy-wire Sendspin test server (aiosendspin 5.3.0)")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--name", default="farcast-legacy-test")
    p.add_argument("--codec", choices=["auto", "pcm", "flac", "opus"], default="auto",
                   help="force this codec if the player lists it (default: player's first choice)")
    p.add_argument("--seconds", type=float, default=None,
                   help="audio per player before stream/end (default: endless)")
    p.add_argument("--max-ahead-ms", type=int, default=5000,
                   help="how far ahead of now audio is produced (default 5000, as sendspin serve)")
    p.add_argument("--start-delay-ms", type=int, default=0,
                   help="timestamp of the first chunk, ms after the first commit (default: "
                   "aiosendspin's 250 ms, which with its 200 ms post-stream/start send block "
                   "makes the first few chunks arrive slightly late)")
    p.add_argument("--client", default=None, metavar="URL",
                   help="dial a listening player at this ws:// URL once ready (server-initiated mode)")
    p.add_argument("--debug", action="store_true", help="all aiosendspin debug logs to stderr")
    return p.parse_args(argv)


if __name__ == "__main__":
    ns = parse_args(sys.argv[1:])
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_StderrFilter(ns.debug))
    logging.basicConfig(level=logging.DEBUG if ns.debug else logging.INFO, handlers=[handler])
    if not ns.debug:  # goodbye reasons and close codes are DEBUG records in these two modules
        logging.getLogger("aiosendspin.server.connection").setLevel(logging.DEBUG)
        logging.getLogger("aiosendspin.server.server").setLevel(logging.DEBUG)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    logging.getLogger("zeroconf").setLevel(logging.WARNING)
    sys.exit(asyncio.run(main(ns)))
