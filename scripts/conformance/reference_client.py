#!/usr/bin/env python3
"""Farcast conformance harness: reference `client` role built on aiosendspin 10.2.1's SendspinClient.

Implements the client side of the conformance adapter contract (flags, registry.json, ready file,
summary JSON). It is the reference peer for run.py and the model for the Swift client adapter.
Audio is not played; the client only records/hashes what arrives.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import dataclasses
import hashlib
import logging
import sys
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

LOG = logging.getLogger("conformance.reference_client")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = common.contract_parser(__doc__.splitlines()[0], server_name=None, server_id=None, port=19927)
    p.add_argument("--path", default="/sendspin")
    return common.finish_contract_args(p, argv)  # lenient: metadata-* extras etc. are ignored


def _enable_opus_passthrough() -> None:
    """The SDK refuses to advertise Opus because it cannot decode it; we only hash the bytes."""
    from aiosendspin.client import client as client_mod
    from aiosendspin.client import connection as conn_mod
    from aiosendspin.models.types import AudioCodec

    codecs = (AudioCodec.PCM, AudioCodec.FLAC, AudioCodec.OPUS)
    conn_mod.DECODABLE_CODECS = codecs
    client_mod.DECODABLE_CODECS = codecs


def _formats(codec_name: str) -> list[Any]:
    from aiosendspin.models.player import SupportedAudioFormat
    from aiosendspin.models.types import AudioCodec

    codec = AudioCodec(codec_name)
    if codec_name == "opus":
        shapes = [(48_000, 2, 16), (48_000, 1, 16)]
    else:
        # The harness fixture is 48 kHz / stereo / s16: list it first so the server does not convert.
        shapes = [(48_000, 2, 16), (44_100, 2, 16), (48_000, 2, 24)]
    return [SupportedAudioFormat(codec=codec, sample_rate=sr, channels=ch, bit_depth=bd) for sr, ch, bd in shapes]


def _normalize_metadata(md: Any) -> dict[str, Any] | None:
    if md is None:
        return None
    progress = getattr(md, "progress", None)
    return {
        "title": getattr(md, "title", None),
        "artist": getattr(md, "artist", None),
        "album_artist": getattr(md, "album_artist", None),
        "album": getattr(md, "album", None),
        "artwork_url": getattr(md, "artwork_url", None),
        "year": getattr(md, "year", None),
        "track": getattr(md, "track", None),
        "progress": None if progress is None else {
            "track_progress": progress.track_progress,
            "track_duration": progress.track_duration,
            "playback_speed": progress.playback_speed,
        },
    }


def _jsonable(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj):
        return {k: _jsonable(v) for k, v in dataclasses.asdict(obj).items()}
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in obj]
    if hasattr(obj, "value") and not isinstance(obj, (str, int, float, bool)):
        return obj.value
    return obj


async def run(args: argparse.Namespace) -> int:
    from aiosendspin.client import ClientListener, SendspinClient
    from aiosendspin.models.player import ClientHelloPlayerSupport
    from aiosendspin.models.types import MediaCommand, PlayerCommand, Roles
    from aiosendspin.noise import Identity, InMemoryClientPairingStore

    summary_path = Path(args.summary)
    base: dict[str, Any] = {
        "implementation": "aiosendspin",
        "role": "client",
        "client_name": args.client_name,
        "client_id": args.client_id,
        "scenario_id": args.scenario_id,
        "initiator_role": args.initiator_role,
        "preferred_codec": args.preferred_codec,
    }
    spec = common.SCENARIOS.get(args.scenario_id)
    if spec is None:
        common.write_json_atomic(args.ready, {"status": "ready", "scenario_id": args.scenario_id})
        common.write_json_atomic(summary_path, {**base, "status": "error",
                                                "reason": f"unsupported scenario {args.scenario_id!r}"})
        return 2
    verify = spec["verify"]

    identity = Identity.generate()
    base["client_peer_id"] = identity.peer_id
    store = InMemoryClientPairingStore()
    cfg = await store.get_pairing_config()
    await store.store_pairing_config(dataclasses.replace(cfg, unpaired_access_enabled=True))

    player_support = None
    if verify.startswith("audio"):
        if args.preferred_codec == "opus":
            _enable_opus_passthrough()
        roles = [Roles.PLAYER]
        player_support = ClientHelloPlayerSupport(supported_formats=_formats(args.preferred_codec),
                                                  buffer_capacity=8_000_000)
    elif verify == "metadata":
        roles = [Roles.METADATA]
    elif verify == "controller":
        roles = [Roles.CONTROLLER]
    else:  # pragma: no cover
        raise RuntimeError(verify)

    client = SendspinClient(identity, args.client_name, roles, pairing_store=store,
                            player_support=player_support,
                            state_supported_commands=[PlayerCommand.VOLUME, PlayerCommand.MUTE])

    done = asyncio.Event()
    stream_ended = asyncio.Event()
    stream: dict[str, Any] | None = None
    pcm = common.CanonicalPcmHasher()
    encoded = hashlib.sha256()
    chunk_count = 0
    byte_count = 0
    first_ts: int | None = None
    md_state: dict[str, Any] = {"received": None, "update_count": 0}
    ctl: dict[str, Any] = {"received_state": None, "sent_command": None, "error": None}

    def on_stream_start(message: Any) -> None:
        nonlocal stream
        player = message.payload.player
        if player is None:
            return
        stream = {
            "codec": player.codec.value,
            "sample_rate": player.sample_rate,
            "channels": player.channels,
            "bit_depth": player.bit_depth,
            "codec_header": player.codec_header,
        }
        if player.codec_header:
            stream["codec_header_sha256"] = hashlib.sha256(base64.b64decode(player.codec_header)).hexdigest()

    def on_audio(timestamp_us: int, payload: bytes, fmt: Any, _send_ahead: int) -> None:
        nonlocal chunk_count, byte_count, first_ts
        chunk_count += 1
        byte_count += len(payload)
        encoded.update(payload)
        if first_ts is None:
            first_ts = timestamp_us
        if fmt.codec.value == "pcm":
            pcm.update_pcm(payload, fmt.pcm_format.bit_depth)

    def on_stream_end(_roles: Any) -> None:
        stream_ended.set()

    def on_metadata(payload: Any) -> None:
        if payload is None or getattr(payload, "metadata", None) is None:
            return
        md_state["update_count"] += 1
        md_state["received"] = _normalize_metadata(payload.metadata)

    async def send_command(command: str) -> None:
        try:
            await client.send_group_command(MediaCommand(command))
        except Exception as err:  # noqa: BLE001
            ctl["error"] = f"{type(err).__name__}: {err}"
            ctl["sent_command"] = None

    def on_controller(payload: Any) -> None:
        controller = getattr(payload, "controller", None) if payload is not None else None
        if controller is None:
            return
        supported = [c.value for c in controller.supported_commands]
        ctl["received_state"] = {"supported_commands": supported, "volume": controller.volume,
                                 "muted": controller.muted}
        if ctl["sent_command"] is None and args.controller_command in supported:
            ctl["sent_command"] = {"command": args.controller_command}
            asyncio.get_running_loop().create_task(send_command(args.controller_command))

    client.add_stream_start_listener(on_stream_start)
    client.add_audio_chunk_listener(on_audio)
    client.add_stream_end_listener(on_stream_end)
    client.add_metadata_listener(on_metadata)
    client.add_controller_state_listener(on_controller)
    client.add_disconnect_listener(done.set)

    server_info: dict[str, Any] = {}

    async def watch_server_info() -> None:
        # server_info is cleared on disconnect, so snapshot it while connected
        while True:
            if client.server_info is not None and not server_info:
                server_info.update(_jsonable(client.server_info))
            await asyncio.sleep(0.05)

    watcher = asyncio.get_running_loop().create_task(watch_server_info())
    listener = None
    status_reason: str | None = None
    try:
        if args.initiator_role == "server":
            async def on_connection(ws: Any) -> None:
                await client.attach_websocket(ws)
                done.set()

            listener = ClientListener(identity.peer_id, on_connection, port=args.port, path=args.path,
                                      host="127.0.0.1", advertise_mdns=False, client_name=args.client_name)
            await listener.start()
            url = f"ws://127.0.0.1:{args.port}{args.path}"
            common.registry_register(args.registry, args.client_name, url)
            common.write_json_atomic(args.ready, {"status": "ready", "scenario_id": args.scenario_id,
                                                  "initiator_role": args.initiator_role, "url": url})
        else:
            common.write_json_atomic(args.ready, {"status": "ready", "scenario_id": args.scenario_id,
                                                  "initiator_role": args.initiator_role})
            loop = asyncio.get_running_loop()
            deadline = loop.time() + args.timeout_seconds
            url = None
            while url is None:
                url = common.registry_lookup(args.registry, args.server_name)
                if url is None:
                    if loop.time() > deadline:
                        raise TimeoutError(f"server {args.server_name!r} never appeared in the registry")
                    await asyncio.sleep(0.1)
            await client.connect(url)
        await asyncio.wait_for(done.wait(), timeout=args.timeout_seconds)
    except (TimeoutError, asyncio.TimeoutError) as err:
        status_reason = f"timed out waiting for the server to finish: {err}"
    except Exception as err:  # noqa: BLE001
        LOG.error("%s", traceback.format_exc())
        status_reason = f"{type(err).__name__}: {err}"
    finally:
        watcher.cancel()
        if listener is not None:
            await listener.stop()
        try:
            await asyncio.wait_for(client.disconnect(), timeout=3)
        except Exception:  # noqa: BLE001
            pass

    summary: dict[str, Any] = {
        **base,
        "status": "ok" if status_reason is None else "error",
        "server": server_info or None,
    }
    if status_reason is not None:
        summary["reason"] = status_reason
    if verify.startswith("audio"):
        summary["stream"] = stream
        summary["audio"] = {
            "audio_chunk_count": chunk_count,
            "received_encoded_byte_count": byte_count,
            "received_encoded_sha256": encoded.hexdigest(),
            "received_pcm_sha256": pcm.hexdigest(),
            "received_sample_count": pcm.sample_count,
            "first_chunk_timestamp_us": first_ts,
            "stream_end_received": stream_ended.is_set(),
        }
    elif verify == "metadata":
        summary["metadata"] = dict(md_state)
    elif verify == "controller":
        summary["controller"] = dict(ctl)
    common.write_json_atomic(summary_path, summary)
    return 0 if status_reason is None else 1


def main() -> int:
    args = parse_args()
    logging.basicConfig(level=getattr(logging, args.log_level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return asyncio.run(run(args))


if __name__ == "__main__":
    raise SystemExit(main())
