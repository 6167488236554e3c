#!/usr/bin/env python3
"""The aiosendspin 10.2.1 reference client as a measuring probe for `scripts/bench sendspin`.

Connects to a Sendspin server as an unpaired PCM player, lets aiosendspin's own client do its
clock synchronisation, and once a second after the first 10 s samples the offset its filter
applies (compute_server_time(now) - now, on CLOCK_MONOTONIC_RAW). On one host the true offset
is zero, so the samples are the error. Prints one JSON object.

Usage: sendspin_reference_client.py URL SECONDS
"""
import asyncio
import json
import statistics
import sys

from aiosendspin.client import SendspinClient
from aiosendspin.clock import RawMonotonicClock
from aiosendspin.models.player import ClientHelloPlayerSupport, SupportedAudioFormat
from aiosendspin.models.types import AudioCodec, Roles
from aiosendspin.noise import Identity, InMemoryClientPairingStore


async def main(url: str, seconds: float) -> None:
    clock = RawMonotonicClock()
    client = SendspinClient(
        identity=Identity.generate(),
        client_name="aiosendspin-reference",
        roles=[Roles.PLAYER],
        pairing_store=InMemoryClientPairingStore(),
        player_support=ClientHelloPlayerSupport(
            supported_formats=[SupportedAudioFormat(codec=AudioCodec.PCM, channels=2, sample_rate=48000, bit_depth=16)],
            buffer_capacity=2_000_000,
        ),
        clock=clock,
    )
    await client.set_unpaired_access(enabled=True)
    chunks = 0

    def on_chunk(*_args, **_kwargs):
        nonlocal chunks
        chunks += 1

    client.add_audio_chunk_listener(on_chunk)
    await client.connect(url)
    start = clock.now_us()
    samples = []
    while clock.now_us() - start < seconds * 1e6:
        await asyncio.sleep(1)
        now = clock.now_us()
        if now - start >= 10e6 and client.is_time_synchronized():
            samples.append(client.compute_server_time(now) - now)
    await client.disconnect()
    result = {
        "implementation": "aiosendspin 10.2.1 SendspinClient",
        "offset_samples": len(samples),
        "offset_mean_us": statistics.fmean(samples) if samples else None,
        "offset_absolute_mean_us": statistics.fmean(abs(s) for s in samples) if samples else None,
        "offset_stddev_us": statistics.stdev(samples) if len(samples) > 1 else None,
        "chunks_received": chunks,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], float(sys.argv[2])))
