#!/usr/bin/env python3
"""The aiosendspin 10.2.1 reference client as a measuring probe for `scripts/bench sendspin`.

Connects to a Sendspin server as an unpaired PCM player, lets aiosendspin's own client do its
clock synchronisation, and once a second after the first 10 s samples the offset its filter
applies (compute_server_time(now) - now, on CLOCK_MONOTONIC_RAW). On one host the true offset
is zero, so the samples are the error. Prints one JSON object.

With COUNT > 1 it runs that many clients and also samples how far apart they would play the
same server instant (the inter-player error).

Usage: sendspin_reference_client.py URL SECONDS [COUNT]
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


def make_client(clock: RawMonotonicClock, name: str) -> SendspinClient:
    return SendspinClient(
        identity=Identity.generate(),
        client_name=name,
        roles=[Roles.PLAYER],
        pairing_store=InMemoryClientPairingStore(),
        player_support=ClientHelloPlayerSupport(
            supported_formats=[SupportedAudioFormat(codec=AudioCodec.PCM, channels=2, sample_rate=48000, bit_depth=16)],
            buffer_capacity=2_000_000,
        ),
        clock=clock,
    )


async def main(url: str, seconds: float, count: int) -> None:
    clock = RawMonotonicClock()
    clients = [make_client(clock, f"aiosendspin-reference-{i + 1}") for i in range(count)]
    chunks = 0

    def on_chunk(*_args, **_kwargs):
        nonlocal chunks
        chunks += 1

    for client in clients:
        await client.set_unpaired_access(enabled=True)
    clients[0].add_audio_chunk_listener(on_chunk)
    for client in clients:
        await client.connect(url)
    start = clock.now_us()
    samples = []
    # Inter-player error: when would each client play the same server instant? Both map it with
    # their own filter (compute_play_time); the difference is how far apart two such speakers
    # would sound, leaving out any output device (these clients have none here).
    interplayer = []
    while clock.now_us() - start < seconds * 1e6:
        await asyncio.sleep(1)
        now = clock.now_us()
        if now - start < 10e6 or not all(c.is_time_synchronized() for c in clients):
            continue
        samples.append(clients[0].compute_server_time(now) - now)
        if count > 1:
            instant = clients[0].compute_server_time(now) + 500_000
            times = [c.compute_play_time(instant) for c in clients]
            interplayer.append(max(times) - min(times))
    for client in clients:
        await client.disconnect()
    result = {
        "implementation": "aiosendspin 10.2.1 SendspinClient",
        "offset_samples": len(samples),
        "offset_mean_us": statistics.fmean(samples) if samples else None,
        "offset_absolute_mean_us": statistics.fmean(abs(s) for s in samples) if samples else None,
        "offset_stddev_us": statistics.stdev(samples) if len(samples) > 1 else None,
        "chunks_received": chunks,
        "interplayer_samples": len(interplayer),
        "interplayer_error_us": statistics.fmean(interplayer) if interplayer else None,
        "interplayer_max_us": max(interplayer) if interplayer else None,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 1))
