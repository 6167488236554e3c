#!/usr/bin/env python3
"""Generate replay vectors for aiosendspin's reference clock filter.

Run with the project venv (aiosendspin 10.2.1):

    /work/main/.venv/bin/python scripts/vectors/make_timefilter_vectors.py

Writes Tests/SendspinTests/Fixtures/timefilter-vectors.json (pretty-printed, deterministic).

The filter is aiosendspin.client.time_sync.SendspinTimeFilter. Measurements for the
main sequence are produced from synthetic NTP-style 4-tuples (T1..T4) by the real
client code path, aiosendspin.client.connection.SendspinConnection._handle_server_time,
whose call into SendspinTimeFilter.update is intercepted to record the exact (z, e, t)
it passes (float division by 2 followed by Python round(), i.e. round-half-to-even).
The script independently recomputes z/e with integer arithmetic and asserts agreement.

After every update the script records every observable of the filter (public
properties and the private state the conversions use), plus compute_server_time /
compute_client_time for fixed probe inputs. Floats are recorded both as JSON numbers
(shortest round-trip repr) and as IEEE-754 big-endian hex bit patterns.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import random
import struct
import sys
from fractions import Fraction
from pathlib import Path

from aiosendspin.client import time_sync
from aiosendspin.client.connection import SendspinConnection
from aiosendspin.client.time_sync import SendspinTimeFilter
from aiosendspin.models.core import ServerTimePayload

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "Tests" / "SendspinTests" / "Fixtures" / "timefilter-vectors.json"

SEED = 20261119


# --------------------------------------------------------------------------- helpers


def fbits(x: float) -> str:
    return struct.pack(">d", x).hex()


def fnum(x: float) -> float | str:
    """JSON-safe float (inf/nan become strings)."""
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if math.isnan(x):
        return "nan"
    return x


def _safe_int(fn) -> int | None:
    try:
        return fn()
    except (OverflowError, ValueError):
        return None


def round_half_even_div2(n: int) -> int:
    """Integer reference for Python's round(n / 2): exact, ties to even."""
    q, r = divmod(n, 2)  # floor division
    if r == 0:
        return q
    # n/2 = q + 0.5 exactly; ties to even
    return q if q % 2 == 0 else q + 1


def snapshot(f: SendspinTimeFilter) -> dict:
    el = f._current_time_element  # noqa: SLF001
    assert (el.last_update, fbits(el.offset), fbits(el.drift)) == (
        f._last_update, fbits(f._offset), fbits(f._drift))  # noqa: SLF001
    return {
        "count": f.count,
        "last_update": f._last_update,  # noqa: SLF001
        "offset": fnum(f.offset),
        "offset_bits": fbits(f.offset),
        "drift": fnum(f._drift),  # noqa: SLF001
        "drift_bits": fbits(f._drift),  # noqa: SLF001
        "offset_covariance": fnum(f._offset_covariance),  # noqa: SLF001
        "offset_covariance_bits": fbits(f._offset_covariance),  # noqa: SLF001
        "offset_drift_covariance": fnum(f._offset_drift_covariance),  # noqa: SLF001
        "offset_drift_covariance_bits": fbits(f._offset_drift_covariance),  # noqa: SLF001
        "drift_covariance": fnum(f._drift_covariance),  # noqa: SLF001
        "drift_covariance_bits": fbits(f._drift_covariance),  # noqa: SLF001
        "error": _safe_int(lambda: f.error),
        "covariance": _safe_int(lambda: f.covariance),
        "is_synchronized": f.is_synchronized,
        # The conversion snapshot (_current_time_element) always equals (last_update, offset,
        # drift) above after update()/reset(); only its use_drift flag adds information.
        "use_drift": el.use_drift,
    }


def probes(f: SendspinTimeFilter, client_times: list[int], server_times: list[int]) -> dict:
    return {
        "compute_server_time": [[x, f.compute_server_time(x)] for x in client_times],
        "compute_client_time": [[y, f.compute_client_time(y)] for y in server_times],
    }


class RecordingFilter(SendspinTimeFilter):
    """SendspinTimeFilter that remembers the arguments of its last update()."""

    last_args: tuple[int, int, int] | None = None

    def update(self, measurement: int, max_error: int, time_added: int) -> None:
        self.last_args = (measurement, max_error, time_added)
        super().update(measurement, max_error, time_added)


def make_connection(flt: SendspinTimeFilter) -> SendspinConnection:
    """A bare client connection sufficient for _handle_server_time (no roles, no I/O)."""
    conn = SendspinConnection.__new__(SendspinConnection)
    conn._time_filter = flt  # noqa: SLF001
    conn._pending_state = {}  # noqa: SLF001
    conn._active_roles = []  # noqa: SLF001
    return conn


# --------------------------------------------------------------------------- synthetic clocks

C0 = 5_000_123_456  # client CLOCK_MONOTONIC_RAW at start (us)
TRUE_OFFSET = 1_234_567_891  # server - client at C0 (us)
TRUE_DRIFT = 42e-6  # server runs 42 ppm fast
STEP_AT = 300  # server clock step (simulated adjustment) from this sample on
STEP_US = 40_000


def true_server(c: int, step: int, drift: float = TRUE_DRIFT) -> int:
    return c + TRUE_OFFSET + round(drift * (c - C0)) + step


def make_quiet_exchanges(rng: random.Random, n: int = 150) -> list[dict]:
    """Loopback-like exchanges: zero drift, small symmetric jitter, no outliers."""
    out: list[dict] = []
    c = C0
    for i in range(n):
        c += (200_000 if i < 10 else 3_000_000) + rng.randint(0, 500)
        up = 40 + rng.randint(0, 30)
        down = 40 + rng.randint(0, 30)
        proc = rng.randint(15, 40)
        t1 = c
        t2 = true_server(t1 + up, 0, 0.0)
        t3 = t2 + proc
        t4 = t1 + up + proc + down
        out.append({"index": i, "kind": "normal", "T1": t1, "T2": t2, "T3": t3, "T4": t4})
        c = t4
    return out


def make_exchanges(rng: random.Random) -> list[dict]:
    """About 400 NTP-style exchanges with noise, outliers, duplicates and ties."""
    out: list[dict] = []
    c = C0
    for i in range(400):
        # Cadence like the reference client: 0.2 s until ~sample 20, then 1 s, later 3 s.
        if i < 20:
            gap = 200_000
        elif i < 150:
            gap = 1_000_000
        else:
            gap = 3_000_000
        c += gap + rng.randint(0, 2_000)
        step = STEP_US if i >= STEP_AT else 0
        up = 120 + int(rng.expovariate(1 / 60))
        down = 120 + int(rng.expovariate(1 / 60))
        proc = rng.randint(20, 90)
        kind = "normal"
        if i in (130, 131, 205, 260):
            up += 25_000  # congested uplink: biased z, large e
            kind = "outlier_slow_uplink"
        elif i in (150, 277):
            down += 60_000  # congested downlink
            kind = "outlier_slow_downlink"
        t1 = c
        t2 = true_server(t1 + up, step)
        t3 = t2 + proc
        t4 = t1 + up + proc + down
        if i == 180:
            # Server clock glitch: claims to have held the request longer than the round trip,
            # so e < 0 (aiosendspin does not guard against it).
            t3 = t2 + (t4 - t1) + 500
            kind = "outlier_negative_max_error"
        if i in (222, 223):
            # Spike with a small reported error: |residual| >> 3e, triggers adaptive forgetting.
            t2 += 8_000
            t3 += 8_000
            kind = "outlier_spike_small_error"
        if i >= STEP_AT and i < STEP_AT + 1:
            kind = "server_clock_step"
        out.append({"index": i, "kind": kind, "T1": t1, "T2": t2, "T3": t3, "T4": t4})
        c = t4

    # Duplicate t (same T4 as the previous exchange) and an out-of-order t (earlier T4).
    dup_after = 60
    prev = out[dup_after]
    dup = dict(prev)
    dup.update(kind="duplicate_t", T2=prev["T2"] + 7, T3=prev["T3"] + 7)
    out.insert(dup_after + 1, dup)
    ooo_after = 241
    prev = out[ooo_after]
    ooo = {"kind": "out_of_order_t", "T1": prev["T1"] - 900_000,
           "T2": prev["T2"] - 900_000, "T3": prev["T3"] - 900_000, "T4": prev["T4"] - 899_000}
    out.insert(ooo_after + 1, ooo)
    dup2 = dict(out[-1])
    dup2.update(kind="duplicate_t_at_end", T2=dup2["T2"] + 3, T3=dup2["T3"] + 3)
    out.append(dup2)

    # Exact-half rounding cases: make the (T2-T1)+(T3-T4) and (T4-T1)-(T3-T2) sums odd with
    # chosen signs, so round-half-to-even differs from round-half-away-from-zero.
    for j, idx in enumerate((30, 90, 110, 170, 250, 320, 380)):
        ex = out[idx]
        ex["kind"] = f"half_rounding_case_{j}" if ex["kind"] == "normal" else ex["kind"]
        # force both sums odd: nudge T3 by one us if needed
        zs = (ex["T2"] - ex["T1"]) + (ex["T3"] - ex["T4"])
        if zs % 2 == 0:
            ex["T3"] += 1
    for k, ex in enumerate(out):
        ex["index"] = k
    return out


async def run_main_sequence(exchanges: list[dict], drift: float = TRUE_DRIFT,
                            step_at: int = STEP_AT) -> tuple[list[dict], dict]:
    flt = RecordingFilter()
    conn = make_connection(flt)
    steps = []
    initial = {"state": snapshot(flt),
               **probes(flt, [C0, C0 + 1_000_000], [true_server(C0, 0, drift) + 250_000])}
    halves = {"z": 0, "e": 0, "z_half_where_even_rounding_differs_from_away": 0,
              "e_half_where_even_rounding_differs_from_away": 0}
    for ex in exchanges:
        t1, t2, t3, t4 = ex["T1"], ex["T2"], ex["T3"], ex["T4"]
        before_last = flt._last_update  # noqa: SLF001
        flt.last_args = None
        payload = ServerTimePayload(client_transmitted=t1, server_received=t2, server_transmitted=t3)
        await conn._handle_server_time(payload, t4)  # noqa: SLF001 - the real client code path
        z_sum = (t2 - t1) + (t3 - t4)
        e_sum = (t4 - t1) - (t3 - t2)
        z_ref = round_half_even_div2(z_sum)
        e_ref = round_half_even_div2(e_sum)
        assert flt.last_args == (z_ref, e_ref, t4), (flt.last_args, z_ref, e_ref, t4)
        z_half = z_sum % 2 != 0
        e_half = e_sum % 2 != 0
        halves["z"] += z_half
        halves["e"] += e_half
        z_away = int(math.copysign(math.floor(abs(Fraction(z_sum, 2)) + Fraction(1, 2)), z_sum))
        e_away = int(math.copysign(math.floor(abs(Fraction(e_sum, 2)) + Fraction(1, 2)), e_sum))
        halves["z_half_where_even_rounding_differs_from_away"] += z_away != z_ref
        halves["e_half_where_even_rounding_differs_from_away"] += e_away != e_ref
        accepted = t4 > before_last
        step_true = true_server(t4, STEP_US if ex.get("index", 0) >= step_at else 0, drift)
        steps.append({
            "index": ex["index"],
            "kind": ex["kind"],
            "T1": t1, "T2": t2, "T3": t3, "T4": t4,
            "z_numerator": z_sum, "e_numerator": e_sum,
            "z": z_ref, "e": e_ref, "t": t4,
            "z_is_exact_half": z_half, "e_is_exact_half": e_half,
            "z_if_rounded_half_away_from_zero": z_away,
            "e_if_rounded_half_away_from_zero": e_away,
            "accepted": accepted,
            "state": snapshot(flt),
            **probes(flt,
                     [t4, t4 + 1_000_000, t4 + 30_000_000],
                     [step_true + 250_000, step_true + 5_000_000, step_true - 1_000_000]),
        })
    return steps, {"initial": initial, "half_counts": halves}


def run_direct_sequence(name: str, flt: SendspinTimeFilter, items: list[tuple],
                        description: str, ctor: dict) -> dict:
    """Feed (z, e, t) directly (and 'reset' markers); record after each call."""
    out = []
    out_initial = {"state": snapshot(flt), **probes(flt, [1_000_000], [2_000_000])}
    for item in items:
        if item == "reset":
            flt.reset()
            out.append({"op": "reset", "state": snapshot(flt),
                        **probes(flt, [1_000_000], [2_000_000])})
            continue
        z, e, t, note = item
        before_last = flt._last_update  # noqa: SLF001
        flt.update(z, e, t)
        out.append({"op": "update", "z": z, "e": e, "t": t, "note": note,
                    "accepted": t > before_last, "state": snapshot(flt),
                    **probes(flt, [t, t + 1_000_000, t + 10_000_000],
                             [t + 1_000, t + 5_000_000])})
    return {"name": name, "description": description, "constructor": ctor,
            "initial": out_initial, "steps": out}


def edge_items(rng: random.Random) -> list:
    items: list = [
        (5_000, 100, 0, "t == 0 is not > last_update (0): ignored"),
        (5_000, 100, -10, "negative t: ignored"),
        (5_000, 0, 1_000_000, "first sample with e == 0: Poo = 0"),
        (5_003, 0, 1_200_000, "second sample with e == 0: Pdd = 0"),
        (5_004, 0, 1_400_000, "Kalman step with Poo+R == 0: denominator floored at 1e-9"),
        (5_010, 10, 1_400_000, "duplicate t: ignored"),
        (5_010, 10, 1_300_000, "earlier t: ignored"),
        (-7, 3, 1_600_000, "negative offset measurement"),
    ]
    t = 1_600_000
    z = 5_000
    for k in range(110):  # push count past 100 to reach adaptive forgetting
        t += 500_000
        z += rng.randint(-3, 3)
        items.append((z, 40 + rng.randint(0, 20), t, f"filler {k}"))
    t += 500_000
    items.append((z + 10_000, 50, t, "residual > 3e with count == 100: forgetting (x4)"))
    t += 500_000
    items.append((z + 10_000, -20, t, "negative e: cutoff negative, forgetting always applies"))
    t += 500_000
    items.append((z + 10_000, 1_000_000, t, "huge e: measurement nearly ignored"))
    items.append("reset")
    items.append((123, 45, 10_000_000, "first sample after reset"))
    items.append((131, 45, 10_100_000, "second sample after reset (drift = 8/1e5)"))
    items.append((140, 45, 10_200_000, "third sample after reset"))
    return items


def sync_error_items(rng: random.Random) -> list:
    """Inputs like sendspin's AudioPlayer._smooth_sync_error: e fixed at 5000 us."""
    items = []
    t = 7_000_000_000
    err = 3_000.0
    for k in range(150):
        t += 46_000 + rng.randint(-500, 500)
        err *= 0.985
        z = round(err + rng.gauss(0, 400))
        if k == 120:
            z += 30_000
        items.append((z, 5_000, t, "sync error sample" if k != 120 else "spike"))
    return items


def ctor_defaults() -> dict:
    sig = inspect.signature(SendspinTimeFilter.__init__)
    return {
        "constructor_defaults": {
            n: p.default for n, p in sig.parameters.items() if n != "self"
        },
        "module_constants": {
            "ADAPTIVE_FORGETTING_CUTOFF": time_sync.ADAPTIVE_FORGETTING_CUTOFF,
            "MAX_ERROR_SCALE": time_sync.MAX_ERROR_SCALE,
            "DRIFT_SIGNIFICANCE_THRESHOLD_SQUARED": time_sync.DRIFT_SIGNIFICANCE_THRESHOLD_SQUARED,
            "adaptive_forgetting_min_count": 100,
            "innovation_denominator_floor": 1e-9,
        },
        "derived": {
            "process_variance": 0.0 * 0.0,
            "drift_process_variance": 1e-11 * 1e-11,
            "drift_process_variance_bits": fbits(1e-11 * 1e-11),
            "note_1e-22_literal_bits": fbits(1e-22),
            "forget_variance_factor": 2.0 * 2.0,
        },
    }


ALGORITHM_NOTES = [
    "Source: aiosendspin/client/time_sync.py (10.2.1). Replays must follow the exact IEEE-754 "
    "operation order below to match bit for bit.",
    "update(z, e, t): if t <= last_update: return (nothing changes). dt = float(t - last_update); "
    "last_update = t. std = float(e) * 0.5; R = std * std.",
    "count <= 0: count += 1; offset = float(z); Poo = R; drift = 0.0; element = (t, offset, drift, "
    "use_drift=false); return.",
    "count == 1: count += 1; drift = (float(z) - offset) / dt; offset = float(z); "
    "Pdd = (Poo + R) / (dt * dt); Poo = R; element = (t, offset, drift, use_drift=false); return.",
    "else: o_pred = offset + drift * dt; dt2 = dt * dt; Qd = dt * drift_process_variance "
    "(drift_process_variance = 1e-11 * 1e-11 computed in double, not the literal 1e-22); "
    "Pdd_p = Pdd + Qd; Pod_p = (Pod + Pdd * dt) + 0.0; "
    "Poo_p = ((Poo + (2 * Pod) * dt) + Pdd * dt2) + dt * process_variance.",
    "r = float(z) - o_pred; cutoff = float(e) * 3.0. If count < 100: count += 1; else if |r| > "
    "cutoff: Pdd_p *= 4.0; Pod_p *= 4.0; Poo_p *= 4.0 (forget_factor squared). Note: with e < 0 "
    "the cutoff is negative, so forgetting always applies.",
    "u = 1.0 / max(Poo_p + R, 1e-9); Ko = Poo_p * u; Kd = Pod_p * u (multiplication by the "
    "reciprocal, NOT a division by S). offset = o_pred + Ko * r; drift = drift + Kd * r; "
    "Pdd = Pdd_p - Kd * Pod_p; Pod = Pod_p - Kd * Poo_p; Poo = Poo_p - Ko * Poo_p.",
    "use_drift = drift * drift > 4.0 * Pdd; element = (t, offset, drift, use_drift).",
    "compute_server_time(c): d = element.use_drift ? element.drift : 0.0; "
    "return c + round_half_even(element.offset + d * float(c - element.last_update)).",
    "compute_client_time(s): d as above; return round_half_even((float(s) - element.offset + "
    "d * float(element.last_update)) / (1.0 + d)), evaluated left to right: "
    "((float(s) - offset) + d * lu) / (1.0 + d).",
    "error = round_half_even(sqrt(Poo)) (undefined/overflow while Poo is inf -> null here); "
    "covariance = round_half_even(Poo); is_synchronized = count >= 2 and Poo is finite; "
    "offset property = filter offset (not the element copy).",
    "reset(): count = 0; last_update = 0; offset = drift = 0.0; Poo = inf; Pod = Pdd = 0.0; "
    "element = (0, 0.0, 0.0, false).",
    "Client measurement (aiosendspin/client/connection.py _handle_server_time): "
    "z = round(((T2 - T1) + (T3 - T4)) / 2), e = round(((T4 - T1) - (T3 - T2)) / 2), t = T4, "
    "with Python true division then round() = ties-to-even; T4 is the CLOCK_MONOTONIC_RAW "
    "time (us) at which the last WebSocket frame of server/time was received, taken BEFORE "
    "Noise decryption (EncryptedWebSocket.receive_timed).",
]


def main() -> int:
    rng = random.Random(SEED)
    exchanges = make_exchanges(rng)
    steps, extra = asyncio.run(run_main_sequence(exchanges))
    quiet_steps, quiet_extra = asyncio.run(run_main_sequence(
        make_quiet_exchanges(random.Random(SEED + 3)), drift=0.0, step_at=10**9))
    edge = run_direct_sequence(
        "edge_cases_direct", SendspinTimeFilter(), edge_items(random.Random(SEED + 1)),
        "Direct (z, e, t) inputs exercising ignored samples, e == 0, the 1e-9 floor, "
        "forgetting after count reaches 100, negative e, huge e and reset().",
        {"process_std_dev": 0.0, "forget_factor": 2.0, "drift_process_std_dev": 1e-11},
    )
    sync = run_direct_sequence(
        "player_sync_error_filter", SendspinTimeFilter(process_std_dev=0.01, forget_factor=1.001),
        sync_error_items(random.Random(SEED + 2)),
        "sendspin 9.0.0 AudioPlayer smooths its DAC sync error with "
        "SendspinTimeFilter(process_std_dev=0.01, forget_factor=1.001), e fixed at 5000 us "
        "(sendspin/audio.py _smooth_sync_error). Exercises a non-zero process variance.",
        {"process_std_dev": 0.01, "forget_factor": 1.001, "drift_process_std_dev": 1e-11},
    )
    accepted = sum(1 for s in steps if s["accepted"])
    use_drift_true = sum(1 for s in steps if s["state"]["use_drift"])
    doc = {
        "generator": "scripts/vectors/make_timefilter_vectors.py",
        "versions": {"aiosendspin": _dist_version("aiosendspin"), "python": sys.version.split()[0]},
        "filter_class": "aiosendspin.client.time_sync.SendspinTimeFilter",
        "filter": ctor_defaults(),
        "algorithm_notes": ALGORITHM_NOTES,
        "float_encoding": "Each float appears as a JSON number (Python repr, round-trip exact) and "
                          "as *_bits = IEEE-754 binary64 big-endian hex. inf is the string 'inf'.",
        "sequences": [
            {
                "name": "main_from_ntp_exchanges",
                "description": (
                    f"Seeded (random.Random({SEED})) synthetic exchanges: client clock starts at "
                    f"{C0} us, true server offset {TRUE_OFFSET} us, true drift {TRUE_DRIFT} "
                    "(server fast), exponential network jitter, cadence 0.2 s / 1 s / 3 s, "
                    "outliers after sample 100 (slow uplink/downlink, negative e, small-e spikes), "
                    f"a {STEP_US} us server clock step from exchange {STEP_AT}, one duplicate T4, "
                    "one out-of-order T4, a duplicate T4 at the end, and forced exact-half z cases. "
                    "z/e/t are the exact arguments aiosendspin's client passed to update()."),
                "constructor": {"process_std_dev": 0.0, "forget_factor": 2.0,
                                "drift_process_std_dev": 1e-11},
                "stats": {"exchanges": len(steps), "accepted": accepted,
                          "steps_with_use_drift": use_drift_true, **extra["half_counts"]},
                "initial": extra["initial"],
                "steps": steps,
            },
            {
                "name": "quiet_zero_drift_from_ntp_exchanges",
                "description": (
                    f"Seeded (random.Random({SEED + 3})) loopback-like exchanges: zero drift, "
                    "40-70 us one-way delays, cadence 0.2 s then 3 s, no outliers. Same code path "
                    "and recording as the main sequence."),
                "constructor": {"process_std_dev": 0.0, "forget_factor": 2.0,
                                "drift_process_std_dev": 1e-11},
                "stats": {"exchanges": len(quiet_steps),
                          "steps_with_use_drift": sum(1 for s in quiet_steps
                                                      if s["state"]["use_drift"]),
                          **quiet_extra["half_counts"]},
                "initial": quiet_extra["initial"],
                "steps": quiet_steps,
            },
            edge,
            sync,
        ],
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT}: {len(steps)} exchanges, {accepted} accepted, "
          f"use_drift true in {use_drift_true}, halves {extra['half_counts']}")
    return 0


def _dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


if __name__ == "__main__":
    raise SystemExit(main())
