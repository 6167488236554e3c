#!/usr/bin/env python3
"""Known answers for the DualSense adaptive-trigger parser (TriggerEffect.swift):

    python3 scripts/vectors/make_punktfunk_trigger_vectors.py

Blocks are built the way games build them, from the publicly documented DualSense trigger
effect layouts (the ten-zone modes 0x21 feedback, 0x22 bow, 0x23 galloping, 0x25 weapon,
0x26 vibration, 0x27 machine: zone bitmasks little-endian, 3-bit strengths per zone; the older
byte-parameter modes 0x01, 0x02, 0x06), and each is given the meaning the parser must report.
Then every one of the 256 mode bytes with fixed parameters, where every undocumented mode means
"off". Writes Tests/PunktfunkTests/Fixtures/trigger-vectors.json.
"""

import json
import random
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def block(mode, *params):
    b = [mode] + list(params)
    return (b + [0] * 11)[:11]


def zones_between(start, end):
    return (1 << start) | (1 << end)


def feedback(position, strength):             # 0x21, zones position..9 at strength 1..8
    active, force = 0, 0
    for i in range(position, 10):
        active |= 1 << i
        force |= (strength - 1) << (3 * i)
    b = block(0x21, active & 0xFF, active >> 8, *force.to_bytes(4, "little"))
    return b, {"kind": "zonedFeedback", "values": [strength / 8 if i >= position else 0 for i in range(10)]}


def zoned_feedback(strengths):                # 0x21, any strength per zone (0 = free)
    active, force = 0, 0
    for i, s in enumerate(strengths):
        if s:
            active |= 1 << i
            force |= (s - 1) << (3 * i)
    b = block(0x21, active & 0xFF, active >> 8, *force.to_bytes(4, "little"))
    kind = {"kind": "zonedFeedback", "values": [s / 8 for s in strengths]} if any(strengths) else {"kind": "off"}
    return b, kind


def weapon(start, end, strength):             # 0x25
    z = zones_between(start, end)
    return block(0x25, z & 0xFF, z >> 8, strength - 1), {"kind": "weapon", "start": start / 9, "end": end / 9, "strength": strength / 8}


def vibration(position, amplitude, frequency):  # 0x26
    active, force = 0, 0
    for i in range(position, 10):
        active |= 1 << i
        force |= (amplitude - 1) << (3 * i)
    b = block(0x26, active & 0xFF, active >> 8, *force.to_bytes(4, "little"), 0, 0, frequency)
    return b, {"kind": "zonedVibration", "values": [amplitude / 8 if i >= position else 0 for i in range(10)], "frequency": frequency}


def bow(start, end, strength, snap):          # 0x22 -> slope
    z = zones_between(start, end)
    pair = ((strength - 1) & 7) | (((snap - 1) & 7) << 3)
    return (block(0x22, z & 0xFF, z >> 8, pair & 0xFF, pair >> 8),
            {"kind": "slope", "start": start / 9, "end": end / 9, "startStrength": strength / 8, "endStrength": snap / 8})


def galloping(start, end, first, second, frequency):  # 0x23
    z = zones_between(start, end)
    ratio = (second & 7) | ((first & 7) << 3)
    return (block(0x23, z & 0xFF, z >> 8, ratio, frequency),
            {"kind": "galloping", "start": start / 9, "end": end / 9, "firstFoot": first / 7, "secondFoot": second / 7,
             "frequency": frequency})


def machine(start, end, a, b, frequency, period):   # 0x27
    z = zones_between(start, end)
    pair = (a & 7) | ((b & 7) << 3)
    return (block(0x27, z & 0xFF, z >> 8, pair, frequency, period),
            {"kind": "machine", "start": start / 9, "end": end / 9, "amplitudeA": a / 7, "amplitudeB": b / 7,
             "frequency": frequency, "period": period / 10})


def simple_feedback(position, strength):      # 0x01
    return block(0x01, position, strength), {"kind": "feedback", "start": position / 255, "strength": strength / 255}


def simple_weapon(start, end, strength):      # 0x02
    return block(0x02, start, end, strength), {"kind": "weapon", "start": start / 255, "end": end / 255, "strength": strength / 255}


def simple_vibration(frequency, amplitude, position):  # 0x06
    return (block(0x06, frequency, amplitude, position),
            {"kind": "vibration", "start": position / 255, "amplitude": amplitude / 255, "frequency": frequency})


def meaning_of_mode(mode, params):
    """The meaning of an arbitrary block, for the all-256-modes sweep (same layouts as above)."""
    b = block(mode, *params)
    z = (b[1] | b[2] << 8) & 0x3FF
    rng = (None if bin(z).count("1") < 2 else ((z & -z).bit_length() - 1, z.bit_length() - 1))
    force = int.from_bytes(bytes(b[3:7]), "little")
    per_zone = [((force >> (3 * i)) & 7) / 8 + 1 / 8 if (b[1] | b[2] << 8) & (1 << i) else 0 for i in range(10)]
    if mode == 0x01:
        return {"kind": "feedback", "start": b[1] / 255, "strength": b[2] / 255}
    if mode == 0x02:
        return {"kind": "weapon", "start": b[1] / 255, "end": b[2] / 255, "strength": b[3] / 255}
    if mode == 0x06:
        return {"kind": "vibration", "start": b[3] / 255, "amplitude": b[2] / 255, "frequency": b[1]}
    if mode == 0x21:
        return {"kind": "zonedFeedback", "values": per_zone} if any(per_zone) else {"kind": "off"}
    if mode == 0x26:
        return {"kind": "zonedVibration", "values": per_zone, "frequency": b[9]} if any(per_zone) else {"kind": "off"}
    if mode in (0x22, 0x23, 0x25, 0x27):
        if rng is None:
            return {"kind": "off"}
        s, e = rng[0] / 9, rng[1] / 9
        if mode == 0x22:
            pair = b[3] | b[4] << 8
            return {"kind": "slope", "start": s, "end": e, "startStrength": ((pair & 7) + 1) / 8, "endStrength": (((pair >> 3) & 7) + 1) / 8}
        if mode == 0x23:
            return {"kind": "galloping", "start": s, "end": e, "firstFoot": ((b[3] >> 3) & 7) / 7, "secondFoot": (b[3] & 7) / 7, "frequency": b[4]}
        if mode == 0x25:
            return {"kind": "weapon", "start": s, "end": e, "strength": ((b[3] & 7) + 1) / 8}
        return {"kind": "machine", "start": s, "end": e, "amplitudeA": (b[3] & 7) / 7, "amplitudeB": ((b[3] >> 3) & 7) / 7,
                "frequency": b[4], "period": b[5] / 10}
    return {"kind": "off"}


def main():
    rng = random.Random(5)
    cases = []
    for position in range(10):
        for strength in (1, 4, 8):
            cases.append(feedback(position, strength))
            cases.append(vibration(position, strength, rng.randrange(1, 256)))
    for _ in range(20):
        cases.append(zoned_feedback([rng.choice([0, 0, 1, 3, 8]) for _ in range(10)]))
    cases.append(zoned_feedback([0] * 10))
    for start in range(2, 8):
        for end in range(start + 1, 9):
            cases.append(weapon(start, end, rng.randrange(1, 9)))
    for start in range(0, 8):
        end = rng.randrange(start + 1, 9)
        cases.append(bow(start, end, rng.randrange(1, 9), rng.randrange(1, 9)))
        first = rng.randrange(0, 7)
        cases.append(galloping(start, end, first, rng.randrange(first + 1, 8), rng.randrange(1, 256)))
        cases.append(machine(start, end, rng.randrange(0, 8), rng.randrange(0, 8), rng.randrange(1, 256), rng.randrange(0, 3)))
    for _ in range(10):
        cases.append(simple_feedback(rng.randrange(256), rng.randrange(256)))
        cases.append(simple_weapon(rng.randrange(256), rng.randrange(256), rng.randrange(256)))
        cases.append(simple_vibration(rng.randrange(256), rng.randrange(256), rng.randrange(256)))
    out = [{"block": bytes(b).hex(), "effect": e} for b, e in cases]
    params = [0x3C, 0x01, 0x29, 0x8A, 0x55, 0x02, 0x00, 0x00, 0xA0, 0x00]
    sweep = [{"block": bytes(block(m, *params)).hex(), "effect": meaning_of_mode(m, params)} for m in range(256)]
    # Short blocks: missing parameters read as zero.
    short = [{"block": bytes([m]).hex(), "effect": meaning_of_mode(m, [])} for m in (0x01, 0x02, 0x06, 0x21, 0x25, 0x26)]
    doc = {"$comment": "Generated by scripts/vectors/make_punktfunk_trigger_vectors.py", "cases": out + short, "modes": sweep}
    path = REPO / "Tests" / "PunktfunkTests" / "Fixtures" / "trigger-vectors.json"
    path.write_text(json.dumps(doc, indent=0, sort_keys=True) + "\n")
    print(f"wrote {path.relative_to(REPO)}: {len(out) + len(short)} cases, {len(sweep)} modes")


if __name__ == "__main__":
    main()
