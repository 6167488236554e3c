"""Shared helpers for Farcast's Sendspin conformance harness (server, runner, reference client).

Contract summary (mirrors the upstream Sendspin/conformance adapter contract, re-implemented here):
  * registry.json maps a peer name to {"url": "ws://127.0.0.1:<port>/sendspin"}.
  * ready files are JSON objects with at least {"status": "ready"}; only their existence matters.
  * canonical PCM hash: every integer sample -> float32 (s16 / 32768, s24 / 8388608 sign-extended,
    s32 / 2147483648), packed little-endian, SHA-256 over all samples in arrival order.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

SCENARIOS: dict[str, dict[str, str]] = {
    "client-initiated-pcm": {"initiator": "client", "codec": "pcm", "verify": "audio-pcm"},
    "server-initiated-pcm": {"initiator": "server", "codec": "pcm", "verify": "audio-pcm"},
    "server-initiated-metadata": {"initiator": "server", "codec": "none", "verify": "metadata"},
    "server-initiated-controller": {"initiator": "server", "codec": "none", "verify": "controller"},
    "server-initiated-artwork": {"initiator": "server", "codec": "none", "verify": "artwork"},
    "server-initiated-flac": {"initiator": "server", "codec": "flac", "verify": "audio-encoded"},
    "server-initiated-opus": {"initiator": "server", "codec": "opus", "verify": "audio-encoded"},
}

# Scenario-specific extra flags handed to BOTH roles (same values as the upstream harness).
SCENARIO_EXTRAS: dict[str, list[tuple[str, str]]] = {
    "server-initiated-metadata": [
        ("metadata-title", "Almost Silent"),
        ("metadata-artist", "Sendspin Conformance"),
        ("metadata-album-artist", "Sendspin"),
        ("metadata-album", "Protocol Fixtures"),
        ("metadata-artwork-url", "https://example.invalid/almost-silent.jpg"),
        ("metadata-year", "2026"),
        ("metadata-track", "1"),
        ("metadata-repeat", "all"),
        ("metadata-shuffle", "false"),
        ("metadata-track-progress", "12000"),
        ("metadata-track-duration", "180000"),
        ("metadata-playback-speed", "1000"),
    ],
    "server-initiated-controller": [("controller-command", "next")],
    "server-initiated-artwork": [("artwork-format", "jpeg"), ("artwork-width", "256"), ("artwork-height", "256")],
}

AUDIO_SCENARIOS = {k for k, v in SCENARIOS.items() if v["codec"] in ("pcm", "flac", "opus")}


# ---------------------------------------------------------------- JSON / registry files


def write_json_atomic(path: Path | str, payload: Any) -> None:
    """Write JSON (indent 2, sorted keys) via a temp file + rename in the same directory."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=str(path.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(payload, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json(path: Path | str) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _lock_path(registry: Path) -> Path:
    return registry.with_name(registry.name + ".lock")


def registry_register(registry: Path | str, name: str, url: str) -> None:
    """Merge {name: {"url": url}} into registry.json (flock-guarded read-modify-write)."""
    import fcntl

    registry = Path(registry)
    registry.parent.mkdir(parents=True, exist_ok=True)
    with open(_lock_path(registry), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data: dict[str, Any] = {}
        if registry.exists():
            try:
                loaded = read_json(registry)
                if isinstance(loaded, dict):
                    data = loaded
            except (OSError, json.JSONDecodeError):
                data = {}
        data[name] = {"url": url}
        write_json_atomic(registry, data)


def registry_lookup(registry: Path | str, name: str) -> str | None:
    registry = Path(registry)
    try:
        data = read_json(registry)
    except (OSError, json.JSONDecodeError):
        return None
    entry = data.get(name) if isinstance(data, dict) else None
    url = entry.get("url") if isinstance(entry, dict) else None
    return url if isinstance(url, str) else None


# ---------------------------------------------------------------- canonical PCM


def pcm_to_canonical_f32(pcm: bytes, bit_depth: int) -> bytes:
    """Integer little-endian PCM -> canonical little-endian float32 bytes (one float per sample)."""
    if bit_depth == 16:
        ints = np.frombuffer(pcm[: len(pcm) - len(pcm) % 2], dtype="<i2").astype(np.float64)
        scale = 32768.0
    elif bit_depth == 24:
        raw = np.frombuffer(pcm[: len(pcm) - len(pcm) % 3], dtype=np.uint8).reshape(-1, 3)
        vals = raw[:, 0].astype(np.int32) | (raw[:, 1].astype(np.int32) << 8) | (raw[:, 2].astype(np.int32) << 16)
        vals = np.where(vals & 0x800000, vals - 0x1000000, vals)
        ints = vals.astype(np.float64)
        scale = 8388608.0
    elif bit_depth == 32:
        ints = np.frombuffer(pcm[: len(pcm) - len(pcm) % 4], dtype="<i4").astype(np.float64)
        scale = 2147483648.0
    else:
        raise ValueError(f"unsupported PCM bit depth {bit_depth}")
    # float64 division then one rounding to float32 == Float(sample) / Float(2^N) in float32
    return (ints / scale).astype("<f4").tobytes()


class CanonicalPcmHasher:
    def __init__(self) -> None:
        self._h = hashlib.sha256()
        self.sample_count = 0

    def update_pcm(self, pcm: bytes, bit_depth: int) -> bytes:
        f32 = pcm_to_canonical_f32(pcm, bit_depth)
        self._h.update(f32)
        self.sample_count += len(f32) // 4
        return f32

    def hexdigest(self) -> str:
        return self._h.hexdigest()


# ---------------------------------------------------------------- fixture

FIXTURE_SAMPLE_RATE = 48_000
FIXTURE_CHANNELS = 2
FIXTURE_BIT_DEPTH = 16
FIXTURE_SECONDS = 5.0
FIXTURE_NAME = "farcast-generated:triangle-48k-s16-stereo-5s-v1"


def generate_fixture(seconds: float = FIXTURE_SECONDS) -> bytes:
    """Deterministic quiet test signal, s16le interleaved stereo @ 48 kHz, integer-only maths.

    Left: triangle wave, period 109 samples (~440 Hz), peak 328 (~ -40 dBFS).
    Right: triangle wave, period 73 samples (~657 Hz), peak 200, plus a +/-3 LCG "dither".
    Every sample is exactly reproducible in any language.
    """
    frames = int(round(seconds * FIXTURE_SAMPLE_RATE))
    n = np.arange(frames, dtype=np.int64)

    def tri(period: int, peak: int) -> np.ndarray:
        phase = n % period
        half = period // 2
        up = phase * (2 * peak) // half - peak
        down = peak - (phase - half) * (2 * peak) // (period - half)
        return np.where(phase < half, up, down)

    left = tri(109, 328)
    # 32-bit LCG (Numerical Recipes constants), sequential -> vectorised via a python loop once.
    lcg = np.empty(frames, dtype=np.int64)
    state = 0x1234567
    for i in range(frames):
        state = (1664525 * state + 1013904223) & 0xFFFFFFFF
        lcg[i] = (state >> 24) % 7 - 3
    right = tri(73, 200) + lcg
    inter = np.empty(frames * 2, dtype="<i2")
    inter[0::2] = left
    inter[1::2] = right
    return inter.tobytes()


def now_ms() -> int:
    return int(time.time() * 1000)


def contract_parser(description: str, *, server_name: str | None, server_id: str | None, port: int) -> "argparse.ArgumentParser":
    """The flags every adapter of the contract takes; roles add their own."""
    import argparse

    p = argparse.ArgumentParser(description=description)
    p.add_argument("--summary", required=True)
    p.add_argument("--ready", required=True)
    p.add_argument("--registry", required=True)
    p.add_argument("--scenario-id", required=True)
    p.add_argument("--initiator-role", choices=("server", "client"), default=None)
    p.add_argument("--preferred-codec", default=None)
    p.add_argument("--timeout-seconds", type=float, default=40.0)
    p.add_argument("--client-name", required=True)
    p.add_argument("--client-id", default=None, help="informational: on the encrypted wire the Noise identity is the id")
    p.add_argument("--server-id", default=server_id)
    p.add_argument("--server-name", required=server_name is None, default=server_name)
    p.add_argument("--port", type=int, default=port)
    p.add_argument("--log-level", default="INFO")
    p.add_argument("--controller-command", default="next")
    return p


def finish_contract_args(p: "argparse.ArgumentParser", argv: list[str] | None) -> "argparse.Namespace":
    """Parses leniently (unknown scenario extras are kept aside) and fills the scenario's
    initiator and codec when the runner left them out."""
    args, unknown = p.parse_known_args(argv)
    args.unknown = unknown
    spec = SCENARIOS.get(args.scenario_id)
    if spec is not None:
        args.initiator_role = args.initiator_role or spec["initiator"]
        args.preferred_codec = args.preferred_codec or spec["codec"]
    return args
