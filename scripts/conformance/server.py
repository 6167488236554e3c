#!/usr/bin/env python3
"""Farcast conformance harness: `server` role, driven by aiosendspin 10.2.1 (encrypted wire;
with --legacy also the older unencrypted one, as aiosendspin's transition mode serves it).

Implements the server side of the Sendspin conformance adapter contract (same CLI flags,
registry.json, ready file and summary JSON as the upstream harness) on top of the current
aiosendspin SendspinServer API. The audio fixture is generated in-process (see
common.generate_fixture); the summary records what actually left the server, observed at
the connection's binary send (after any format conversion / encoding, before encryption).

Run only on loopback inside a network namespace; it binds 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import logging
import sys
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

LOG = logging.getLogger("conformance.server")
IMPLEMENTATION = "aiosendspin"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = common.contract_parser(__doc__.splitlines()[0], server_name="Sendspin Conformance Server",
                               server_id="conformance-server", port=18927)
    p.add_argument("--fixture", default=None, help="ignored: the fixture is generated in-process")
    p.add_argument("--clip-seconds", type=float, default=common.FIXTURE_SECONDS)
    p.add_argument("--metadata-title", default="Almost Silent")
    p.add_argument("--metadata-artist", default="Sendspin Conformance")
    p.add_argument("--metadata-album-artist", default="Sendspin")
    p.add_argument("--metadata-album", default="Protocol Fixtures")
    p.add_argument("--metadata-artwork-url", default="https://example.invalid/almost-silent.jpg")
    p.add_argument("--metadata-year", type=int, default=2026)
    p.add_argument("--metadata-track", type=int, default=1)
    p.add_argument("--metadata-repeat", default="all")
    p.add_argument("--metadata-shuffle", default="false")
    p.add_argument("--metadata-track-progress", type=int, default=12_000)
    p.add_argument("--metadata-track-duration", type=int, default=180_000)
    p.add_argument("--metadata-playback-speed", type=int, default=1_000)
    p.add_argument("--artwork-format", default="jpeg")
    p.add_argument("--artwork-width", type=int, default=256)
    p.add_argument("--artwork-height", type=int, default=256)
    p.add_argument("--legacy", action="store_true",
                   help="serve the older unencrypted wire too (aiosendspin's allow_unencrypted mode)")
    return common.finish_contract_args(p, argv)


# ------------------------------------------------------------------ send observation


class SendRecorder:
    """Records stream/start and audio chunk payloads as they are written to the socket."""

    def __init__(self, pcm_dump: Path) -> None:
        self.stream_starts: list[dict[str, Any]] = []
        self.stream_end_count = 0
        self.encoded = hashlib.sha256()
        self.chunk_count = 0
        self.byte_count = 0
        self.pcm = common.CanonicalPcmHasher()
        self.pcm_dump_path = pcm_dump
        self._pcm_dump = None
        self.first_timestamp_us: int | None = None
        self.last_timestamp_us: int | None = None

    @property
    def current(self) -> dict[str, Any] | None:
        return self.stream_starts[-1] if self.stream_starts else None

    def on_message(self, message: Any) -> None:
        from aiosendspin.models.core import StreamEndMessage, StreamStartMessage

        if isinstance(message, StreamStartMessage):
            player = message.payload.player
            if player is None:
                return
            info: dict[str, Any] = {
                "codec": player.codec.value,
                "sample_rate": player.sample_rate,
                "channels": player.channels,
                "bit_depth": player.bit_depth,
                "codec_header": player.codec_header,
                "codec_header_sha256": None,
            }
            if player.codec_header:
                info["codec_header_sha256"] = hashlib.sha256(
                    base64.b64decode(player.codec_header)
                ).hexdigest()
            self.stream_starts.append(info)
        elif isinstance(message, StreamEndMessage):
            self.stream_end_count += 1

    def on_audio(self, payload: bytes, timestamp_us: int) -> None:
        self.encoded.update(payload)
        self.chunk_count += 1
        self.byte_count += len(payload)
        if self.first_timestamp_us is None:
            self.first_timestamp_us = timestamp_us
        self.last_timestamp_us = timestamp_us
        cur = self.current
        if cur is not None and cur["codec"] == "pcm":
            f32 = self.pcm.update_pcm(payload, cur["bit_depth"])
            if self._pcm_dump is None:
                self._pcm_dump = open(self.pcm_dump_path, "wb")  # noqa: SIM115
            self._pcm_dump.write(f32)

    def close(self) -> None:
        if self._pcm_dump is not None:
            self._pcm_dump.close()
            self._pcm_dump = None


def install_send_hooks(recorder: SendRecorder) -> None:
    """Wrap SendspinConnection's per-frame socket writers (class level, this process only)."""
    from aiosendspin.models import BINARY_HEADER_SIZE
    from aiosendspin.models.player import PLAYER_AUDIO_HEADER_SIZE
    from aiosendspin.models.types import BinaryMessageType
    from aiosendspin.server.connection import SendspinConnection

    orig_send_message = SendspinConnection._send_message
    orig_send_binary = SendspinConnection._send_binary_data
    audio_type = BinaryMessageType.AUDIO_CHUNK.value

    async def send_message(self: Any, wsock: Any, message: Any) -> None:
        await orig_send_message(self, wsock, message)
        recorder.on_message(message)

    async def send_binary(self: Any, wsock: Any, role: str, entry: Any, tracker: Any) -> None:
        await orig_send_binary(self, wsock, role, entry, tracker)
        binary = entry.binary
        if binary is None or binary.message_type != audio_type:
            return
        data = bytes(binary.data)
        if not binary.player_audio_header:
            legacy = bool(getattr(self, "uses_pre_spec_177_wire", False))
            data = data[BINARY_HEADER_SIZE if legacy else PLAYER_AUDIO_HEADER_SIZE :]
        recorder.on_audio(data, entry.timestamp_us)

    SendspinConnection._send_message = send_message  # type: ignore[method-assign]
    SendspinConnection._send_binary_data = send_binary  # type: ignore[method-assign]


# ------------------------------------------------------------------ helpers


def _bool(raw: str) -> bool:
    return str(raw).strip().lower() in {"1", "true", "yes", "on"}


def make_pairing_store(legacy: bool = False) -> Any:
    from aiosendspin.noise import InMemoryServerPairingStore, TrustedUnpairedClient

    if legacy:
        # aiosendspin refuses a legacy hello from a client id the store knows (downgrade
        # protection), and the open door below knows every id: legacy runs use the plain store.
        return InMemoryServerPairingStore()

    class OpenDoorPairingStore(InMemoryServerPairingStore):
        """Approves every client for unpaired playback (what `sendspin serve` does)."""

        async def trusted_unpaired(self, client_id: str) -> TrustedUnpairedClient | None:
            return await super().trusted_unpaired(client_id) or TrustedUnpairedClient(client_id)

    return OpenDoorPairingStore()


def find_client(server: Any, name: str) -> Any | None:
    for client in server.connected_clients:
        try:
            if client.name == name:
                return client
        except Exception:  # noqa: BLE001 - hello not yet parsed
            continue
    return None


async def wait_for_client(server: Any, args: argparse.Namespace, deadline: float) -> tuple[Any, str, str | None]:
    from aiosendspin.models.types import ConnectionReason

    loop = asyncio.get_running_loop()
    dialed_url: str | None = None
    method = "incoming" if args.initiator_role == "client" else "registry"
    while loop.time() < deadline:
        client = find_client(server, args.client_name)
        if client is not None:
            return client, method, dialed_url
        if args.initiator_role == "server" and dialed_url is None:
            url = common.registry_lookup(args.registry, args.client_name)
            if url is not None:
                LOG.info("dialing %s at %s", args.client_name, url)
                try:
                    await asyncio.wait_for(
                        server.connect_to_client_and_wait(url, connection_reason=ConnectionReason.PLAYBACK),
                        timeout=max(0.5, deadline - loop.time()),
                    )
                    dialed_url = url
                except (TimeoutError, asyncio.TimeoutError):
                    raise
                except Exception as err:  # noqa: BLE001
                    LOG.warning("dial to %s failed (%s); retrying", url, err)
                    server.disconnect_from_client(url)
                    await asyncio.sleep(0.3)
                continue
        await asyncio.sleep(0.1)
    raise TimeoutError(f"timed out waiting for client {args.client_name!r} to connect")


def role_ready(client: Any, family: str) -> bool:
    if not client.is_connected:
        return False
    if not client.roles_by_family(family):
        return False
    if family == "player" and not client.available:
        return False
    try:
        if client.awaits_role_state(family):
            return False
    except Exception:  # noqa: BLE001
        pass
    return True


async def wait_role_ready(client: Any, family: str, deadline: float) -> None:
    loop = asyncio.get_running_loop()
    while loop.time() < deadline:
        if role_ready(client, family):
            return
        if not client.is_connected:
            raise RuntimeError("client disconnected before its roles were activated")
        await asyncio.sleep(0.05)
    raise TimeoutError(
        f"client never activated the {family!r} role (active roles: {client.active_role_ids})"
    )


async def disconnect(server: Any, client: Any, dialed_url: str | None) -> None:
    if dialed_url is not None:
        server.disconnect_from_client(dialed_url)
    conn = client.connection
    if conn is not None:
        await conn.disconnect(retry_connection=False)


# ------------------------------------------------------------------ scenarios


async def run_audio(args: argparse.Namespace, server: Any, client: Any, recorder: SendRecorder,
                    deadline: float) -> dict[str, Any]:
    from aiosendspin.server.audio import AudioFormat

    await wait_role_ready(client, "player", deadline)
    await asyncio.sleep(0.2)  # let the activation/state exchange settle

    fixture = common.generate_fixture(args.clip_seconds)
    sr, ch, bd = common.FIXTURE_SAMPLE_RATE, common.FIXTURE_CHANNELS, common.FIXTURE_BIT_DEPTH
    source = common.CanonicalPcmHasher()
    source.update_pcm(fixture, bd)
    fmt = AudioFormat(sample_rate=sr, bit_depth=bd, channels=ch)

    frame_bytes = ch * bd // 8
    block_frames = sr // 10  # 100 ms blocks
    block_bytes = block_frames * frame_bytes

    stream = client.group.start_stream()
    start_us = server.clock.now_us() + 600_000  # first sample plays 0.6 s in the future
    end_us = start_us
    first = True
    for off in range(0, len(fixture), block_bytes):
        block = fixture[off : off + block_bytes]
        stream.prepare_audio(block, fmt)
        ts = await stream.commit_audio(play_start_us=start_us if first else None)
        first = False
        end_us = ts + (len(block) // frame_bytes) * 1_000_000 // sr
        await stream.sleep_to_limit_buffer(max_buffer_us=2_000_000)

    loop = asyncio.get_running_loop()
    # let everything play out, then make sure the send queue is empty
    remaining_s = (end_us - server.clock.now_us()) / 1e6
    await asyncio.sleep(max(0.0, remaining_s) + 0.5)
    try:
        await asyncio.wait_for(client.wait_role_drained("player"), timeout=max(1.0, deadline - loop.time()))
    except (TimeoutError, asyncio.TimeoutError):
        LOG.warning("player send queue did not drain")
    await client.group.stop()
    await asyncio.sleep(0.5)

    recorder.close()
    cur = recorder.current or {}
    codec = cur.get("codec")
    audio: dict[str, Any] = {
        "fixture": common.FIXTURE_NAME,
        "clip_seconds": args.clip_seconds,
        "sample_rate": sr,
        "channels": ch,
        "bit_depth": bd,
        "frame_count": len(fixture) // frame_bytes,
        "source_pcm_sha256": source.hexdigest(),
        "source_sample_count": source.sample_count,
        "sent_audio_chunk_count": recorder.chunk_count,
        "sent_encoded_byte_count": recorder.byte_count,
        "sent_encoded_sha256": recorder.encoded.hexdigest() if recorder.chunk_count else None,
        "sent_codec_header_sha256": cur.get("codec_header_sha256"),
        "first_chunk_timestamp_us": recorder.first_timestamp_us,
        "last_chunk_timestamp_us": recorder.last_timestamp_us,
        "stream_start_count": len(recorder.stream_starts),
        "stream_end_count": recorder.stream_end_count,
    }
    if codec == "pcm":
        audio["sent_pcm_sha256"] = recorder.pcm.hexdigest()
        audio["sent_sample_count"] = recorder.pcm.sample_count
        audio["sent_pcm_f32_path"] = str(recorder.pcm_dump_path)
        audio["sent_matches_source"] = recorder.pcm.hexdigest() == source.hexdigest()
    if recorder.chunk_count == 0:
        raise RuntimeError("no audio chunk was sent to the client")
    if len({(s["codec"], s["sample_rate"], s["channels"], s["bit_depth"]) for s in recorder.stream_starts}) > 1:
        LOG.warning("stream format changed mid-stream: %s", recorder.stream_starts)
    return {"stream": recorder.current, "stream_starts": recorder.stream_starts, "audio": audio}


def expected_metadata(args: argparse.Namespace) -> dict[str, Any]:
    # Normalised snapshot. repeat/shuffle are NOT part of metadata on the current wire
    # (they moved to controller state), so they are not compared.
    return {
        "title": args.metadata_title,
        "artist": args.metadata_artist,
        "album_artist": args.metadata_album_artist,
        "album": args.metadata_album,
        "artwork_url": args.metadata_artwork_url,
        "year": args.metadata_year,
        "track": args.metadata_track,
        "progress": {
            "track_progress": args.metadata_track_progress,
            "track_duration": args.metadata_track_duration,
            "playback_speed": args.metadata_playback_speed,
        },
    }


async def run_metadata(args: argparse.Namespace, server: Any, client: Any, deadline: float) -> dict[str, Any]:
    from aiosendspin.server.roles.metadata import MetadataGroupRole

    await wait_role_ready(client, "metadata", deadline)
    role = client.group.group_role("metadata")
    if not isinstance(role, MetadataGroupRole):
        raise RuntimeError("metadata group role is not active")
    role.update(
        title=args.metadata_title,
        artist=args.metadata_artist,
        album_artist=args.metadata_album_artist,
        album=args.metadata_album,
        artwork_url=args.metadata_artwork_url,
        year=args.metadata_year,
        track=args.metadata_track,
        track_progress=args.metadata_track_progress,
        track_duration=args.metadata_track_duration,
        playback_speed=args.metadata_playback_speed,
    )
    await asyncio.sleep(0.75)
    return {
        "metadata": {
            "expected": expected_metadata(args),
            "not_compared": {"repeat": args.metadata_repeat, "shuffle": _bool(args.metadata_shuffle)},
        }
    }


def _event_to_command(event: Any) -> dict[str, Any] | None:
    name = type(event).__name__
    simple = {
        "ControllerPlayEvent": "play",
        "ControllerPauseEvent": "pause",
        "ControllerStopEvent": "stop",
        "ControllerNextEvent": "next",
        "ControllerPreviousEvent": "previous",
        "ControllerSwitchEvent": "switch",
    }
    if name in simple:
        return {"command": simple[name]}
    if name == "ControllerVolumeEvent":
        return {"command": "volume", "volume": int(event.volume)}
    if name == "ControllerMuteEvent":
        return {"command": "mute", "mute": bool(event.muted)}
    if name == "ControllerRepeatEvent":
        return {"command": f"repeat_{event.mode.value}"}
    if name == "ControllerShuffleEvent":
        return {"command": "shuffle" if event.shuffle else "unshuffle"}
    if name == "ControllerSeekEvent":
        return {"command": "seek", "position_ms": int(event.position_ms)}
    return None


async def run_controller(args: argparse.Namespace, server: Any, client: Any, deadline: float) -> dict[str, Any]:
    from aiosendspin.models.types import MediaCommand
    from aiosendspin.server.roles.controller import ControllerGroupRole

    await wait_role_ready(client, "controller", deadline)
    role = client.group.group_role("controller")
    if not isinstance(role, ControllerGroupRole):
        raise RuntimeError("controller group role is not active")
    loop = asyncio.get_running_loop()
    got: asyncio.Future[dict[str, Any]] = loop.create_future()
    all_events: list[dict[str, Any]] = []

    def on_event(_group: Any, event: Any) -> None:
        cmd = _event_to_command(event)
        if cmd is None:
            return
        all_events.append(cmd)
        if not got.done():
            got.set_result(cmd)

    remove = client.group.add_event_listener(on_event)
    try:
        role.set_supported_commands([MediaCommand(args.controller_command)])
        received = await asyncio.wait_for(got, timeout=max(1.0, deadline - loop.time()))
    finally:
        remove()
    await asyncio.sleep(0.3)
    return {
        "controller": {
            "expected_command": {"command": args.controller_command},
            "received_command": received,
            "all_received_commands": all_events,
            "volume": role.volume,
            "muted": role.muted,
        }
    }


def reference_artwork() -> Any:
    """A 320x200 picture of coloured bands (the server scales and letterboxes it per channel)."""
    from PIL import Image

    image = Image.new("RGB", (320, 200))
    image.putdata([((x * 3) % 256, (y * 5) % 256, 120 if (x // 40 + y // 40) % 2 else 30)
                   for y in range(200) for x in range(320)])
    return image


async def run_artwork(args: argparse.Namespace, server: Any, client: Any, deadline: float) -> dict[str, Any]:
    from aiosendspin.server.roles.artwork.v1 import ArtworkV1Role

    await wait_role_ready(client, "artwork", deadline)
    await asyncio.sleep(1.0)  # time sync: the picture is due when it is handed over
    sent: list[tuple[int, bytes]] = []
    original = ArtworkV1Role.send_artwork

    def send_artwork(self: Any, channel: int, image_data: bytes, timestamp_us: int) -> None:
        if image_data:
            sent.append((channel, bytes(image_data)))
        original(self, channel, image_data, timestamp_us)

    ArtworkV1Role.send_artwork = send_artwork  # type: ignore[method-assign]
    try:
        await client.group.group_role("artwork").set_album_artwork(reference_artwork())
        await asyncio.sleep(1.0)
    finally:
        ArtworkV1Role.send_artwork = original  # type: ignore[method-assign]
    if not sent:
        raise RuntimeError("the server sent no artwork to the client")
    channel, data = sent[-1]
    return {"artwork": {"channel": channel, "source": "album", "format": args.artwork_format,
                        "width": args.artwork_width, "height": args.artwork_height,
                        "encoded_sha256": hashlib.sha256(data).hexdigest(), "byte_count": len(data),
                        "sent_count": len(sent)}}


# ------------------------------------------------------------------ main


async def run(args: argparse.Namespace) -> int:
    from importlib.metadata import version as pkg_version

    from aiosendspin.noise import Identity
    from aiosendspin.server import SendspinServer

    summary_path = Path(args.summary)
    base: dict[str, Any] = {
        "implementation": IMPLEMENTATION,
        "implementation_version": pkg_version("aiosendspin"),
        "role": "server",
        "scenario_id": args.scenario_id,
        "initiator_role": args.initiator_role,
        "preferred_codec": args.preferred_codec,
        "server_id": args.server_id,
        "server_name": args.server_name,
    }
    if args.scenario_id not in common.SCENARIOS:
        common.write_json_atomic(args.ready, {"status": "ready", "scenario_id": args.scenario_id})
        common.write_json_atomic(summary_path, {
            **base, "status": "error",
            "reason": f"scenario {args.scenario_id!r} is not supported by this server adapter",
        })
        return 2

    recorder = SendRecorder(summary_path.with_name(summary_path.stem + "-sent-pcm.f32"))
    install_send_hooks(recorder)
    loop = asyncio.get_running_loop()
    server = SendspinServer(loop, Identity.generate(), args.server_name, pairing_store=make_pairing_store(args.legacy),
                            allow_unencrypted=args.legacy)
    base["wire"] = "legacy" if args.legacy else "encrypted"
    base["server_peer_id"] = server.id
    dialed_url: str | None = None
    client = None
    try:
        await server.start_server(port=args.port, host="127.0.0.1", advertise_addresses=[],
                                  discover_clients=False)
        url = f"ws://127.0.0.1:{args.port}{server.API_PATH}"
        if args.initiator_role == "client":
            common.registry_register(args.registry, args.server_name, url)
        common.write_json_atomic(args.ready, {
            "status": "ready", "scenario_id": args.scenario_id,
            "initiator_role": args.initiator_role, "server_id": args.server_id,
            "server_name": args.server_name, "url": url,
        })
        deadline = loop.time() + args.timeout_seconds
        client, method, dialed_url = await wait_for_client(server, args, deadline)
        LOG.info("client %s connected (%s)", args.client_name, method)
        verify = common.SCENARIOS[args.scenario_id]["verify"]
        if verify in ("audio-pcm", "audio-encoded"):
            payload = await run_audio(args, server, client, recorder, deadline)
        elif verify == "metadata":
            payload = await run_metadata(args, server, client, deadline)
        elif verify == "controller":
            payload = await run_controller(args, server, client, deadline)
        elif verify == "artwork":
            payload = await run_artwork(args, server, client, deadline)
        else:  # pragma: no cover
            raise RuntimeError(f"no handler for {verify}")
        info = client.info_or_none
        summary = {
            **base,
            "status": "ok",
            "discovery_method": method,
            "peer_hello": {"type": "client/hello", "payload": info.to_dict() if info else None},
            "client": {
                "client_id": client.client_id,
                "name": client.name,
                "active_roles": list(client.active_role_ids),
                "paired": bool(getattr(client, "is_paired", False)),
            },
            **payload,
        }
        await disconnect(server, client, dialed_url)
        await asyncio.sleep(0.2)
        common.write_json_atomic(summary_path, summary)
        return 0
    except Exception as err:  # noqa: BLE001
        LOG.error("scenario failed: %s\n%s", err, traceback.format_exc())
        common.write_json_atomic(summary_path, {**base, "status": "error", "reason": f"{type(err).__name__}: {err}"})
        if client is not None:
            try:
                await disconnect(server, client, dialed_url)
            except Exception:  # noqa: BLE001
                pass
        return 1
    finally:
        recorder.close()
        try:
            await asyncio.wait_for(server.close(), timeout=5)
        except Exception:  # noqa: BLE001
            pass


def main() -> int:
    args = parse_args()
    logging.basicConfig(level=getattr(logging, args.log_level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.unknown:
        LOG.info("ignoring unknown arguments: %s", args.unknown)
    return asyncio.run(run(args))


if __name__ == "__main__":
    raise SystemExit(main())
