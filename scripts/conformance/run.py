#!/usr/bin/env python3
"""Farcast conformance runner: runs the Sendspin conformance client scenarios against our
aiosendspin 10.2.1 server adapter (scripts/conformance/server.py) and a client adapter.

    run.py --client-cmd "<command prefix of the client adapter>" [--scenario ID ...] [--out DIR]
           [--wire encrypted|legacy]

--wire legacy serves the older unencrypted wire (aiosendspin's allow_unencrypted mode, what the
upstream harness's aiosendspin 5.x speaks) and hands `--legacy` to both adapters.

Each scenario gets its own directory (registry.json, {server,client}-{ready,summary}.json,
{server,client}.log, result.json). Loopback only: run it inside `unshare -n`.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import shlex
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import common  # noqa: E402

REPO = HERE.parent.parent
DEFAULT_SERVER_CMD = f"{sys.executable} {HERE / 'server.py'}"
READY_TIMEOUT_S = 30.0  # a cold Python start on a loaded two-core machine can take over 10 s
CLIENT_EXIT_GRACE_S = 10.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def flags(pairs: list[tuple[str, str]]) -> list[str]:
    out: list[str] = []
    for key, value in pairs:
        out += [f"--{key}", value]
    return out


async def wait_file(path: Path, timeout_s: float, proc: asyncio.subprocess.Process) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists():
            return
        if proc.returncode is not None:
            raise RuntimeError(f"{path.name} never appeared: process exited {proc.returncode}")
        await asyncio.sleep(0.05)
    raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {path.name}")


async def spawn(cmd: list[str], log: Path) -> asyncio.subprocess.Process:
    handle = log.open("w", encoding="utf-8")
    handle.write("$ " + shlex.join(cmd) + "\n")
    handle.flush()
    proc = await asyncio.create_subprocess_exec(*cmd, cwd=str(REPO), stdout=handle,
                                                stderr=asyncio.subprocess.STDOUT,
                                                env={**__import__("os").environ, "PYTHONUNBUFFERED": "1"})
    proc._log_handle = handle  # type: ignore[attr-defined]
    return proc


async def reap(proc: asyncio.subprocess.Process | None, timeout_s: float) -> int | None:
    if proc is None:
        return None
    try:
        await asyncio.wait_for(proc.wait(), timeout=timeout_s)
    except (TimeoutError, asyncio.TimeoutError):
        proc.kill()
        await proc.wait()
    proc._log_handle.close()  # type: ignore[attr-defined]
    return proc.returncode


# ---------------------------------------------------------------- verification


def _status_ok(server: dict[str, Any], client: dict[str, Any]) -> str | None:
    if server.get("status") != "ok":
        return f"server status {server.get('status')!r}: {server.get('reason')}"
    if client.get("status") != "ok":
        return f"client status {client.get('status')!r}: {client.get('reason')}"
    return None


def verify_pcm(server: dict[str, Any], client: dict[str, Any], case_dir: Path) -> tuple[bool, str]:
    s_audio, c_audio = server.get("audio") or {}, client.get("audio") or {}
    if (server.get("stream") or {}).get("codec") != "pcm":
        return False, f"server did not stream PCM (stream={server.get('stream')})"
    c_codec = (client.get("stream") or {}).get("codec")
    if c_codec is not None and c_codec != "pcm":
        return False, f"client observed codec {c_codec!r}"
    if not int(c_audio.get("audio_chunk_count") or 0):
        return False, "client received zero audio chunks"
    sent = s_audio.get("sent_pcm_sha256") or s_audio.get("source_pcm_sha256")
    got = c_audio.get("received_pcm_sha256")
    note = "" if s_audio.get("sent_matches_source", True) else " [note: server converted the fixture]"
    if got == sent:
        return True, f"PCM hashes match exactly ({s_audio.get('sent_sample_count')} samples){note}"
    n = int(c_audio.get("received_sample_count") or 0)
    total = int(s_audio.get("sent_sample_count") or 0)
    dump = s_audio.get("sent_pcm_f32_path")
    if dump and Path(dump).exists() and 0 < n < total:
        prefix = Path(dump).read_bytes()[: n * 4]
        if hashlib.sha256(prefix).hexdigest() == got:
            return True, f"PCM prefix matches ({n}/{total} samples; {total - n} trailing samples missing){note}"
    return False, (f"PCM hash mismatch: sent={sent} ({total} samples) "
                   f"received={got} ({n} samples){note}")


def verify_encoded(server: dict[str, Any], client: dict[str, Any], codec: str) -> tuple[bool, str]:
    label = codec.upper()
    s_stream, c_stream = server.get("stream") or {}, client.get("stream") or {}
    s_audio, c_audio = server.get("audio") or {}, client.get("audio") or {}
    if s_stream.get("codec") != codec:
        return False, f"server did not negotiate {label} (codec={s_stream.get('codec')!r})"
    if c_stream.get("codec") not in (None, codec):
        return False, f"client observed codec {c_stream.get('codec')!r}"
    if not int(s_audio.get("sent_audio_chunk_count") or 0):
        return False, f"server sent zero {label} chunks"
    if not int(c_audio.get("audio_chunk_count") or 0):
        return False, f"client received zero {label} chunks"
    sent, got = s_audio.get("sent_encoded_sha256"), c_audio.get("received_encoded_sha256")
    if not sent or not got:
        return False, f"missing {label} chunk hash (server={sent!r} client={got!r})"
    if sent != got:
        return False, (f"{label} chunk hash mismatch: server={sent} ({s_audio.get('sent_audio_chunk_count')} chunks)"
                       f" client={got} ({c_audio.get('audio_chunk_count')} chunks)")
    s_hdr = s_audio.get("sent_codec_header_sha256") or s_stream.get("codec_header_sha256")
    c_hdr = c_stream.get("codec_header_sha256")
    if c_hdr is None and c_stream.get("codec_header"):
        import base64

        try:
            c_hdr = hashlib.sha256(base64.b64decode(c_stream["codec_header"])).hexdigest()
        except Exception:  # noqa: BLE001
            return False, "client codec_header is not valid base64"
    if s_hdr and c_hdr and s_hdr != c_hdr:
        return False, f"{label} codec header mismatch: server={s_hdr} client={c_hdr}"
    if s_hdr and not c_hdr:
        return False, f"server sent a {label} codec header but the client summary has none"
    what = "header and chunk bytes" if s_hdr else "chunk bytes (no codec header)"
    return True, f"{label} {what} match exactly ({s_audio.get('sent_audio_chunk_count')} chunks)"


def verify_metadata(server: dict[str, Any], client: dict[str, Any]) -> tuple[bool, str]:
    expected = (server.get("metadata") or {}).get("expected")
    md = client.get("metadata") or {}
    received = md.get("received")
    if not int(md.get("update_count") or 0):
        return False, "client recorded zero metadata updates"
    if not isinstance(expected, dict) or not isinstance(received, dict):
        return False, f"metadata snapshot missing: server={expected!r} client={received!r}"
    compared = {k: received.get(k) for k in expected}
    if compared == expected:
        extra = sorted(set(received) - set(expected))
        return True, "metadata snapshot matches" + (f" (ignored extra keys {extra})" if extra else "")
    diffs = {k: {"expected": expected[k], "received": compared[k]} for k in expected if expected[k] != compared[k]}
    return False, f"metadata mismatch: {json.dumps(diffs, sort_keys=True)}"


def verify_artwork(server: dict[str, Any], client: dict[str, Any]) -> tuple[bool, str]:
    sent, got = server.get("artwork") or {}, client.get("artwork") or {}
    if not int(got.get("received_count") or 0):
        return False, "client recorded no artwork"
    if not sent.get("encoded_sha256"):
        return False, "server summary has no artwork sent"
    if sent.get("channel") == got.get("channel") and sent.get("encoded_sha256") == got.get("received_sha256"):
        return True, f"artwork bytes match ({sent.get('byte_count')} bytes, channel {sent.get('channel')})"
    return False, (f"artwork mismatch: server channel {sent.get('channel')} {sent.get('encoded_sha256')}, "
                   f"client channel {got.get('channel')} {got.get('received_sha256')}")


def verify_controller(server: dict[str, Any], client: dict[str, Any]) -> tuple[bool, str]:
    s_ctl, c_ctl = server.get("controller") or {}, client.get("controller") or {}
    expected, received, sent = s_ctl.get("expected_command"), s_ctl.get("received_command"), c_ctl.get("sent_command")
    if received is None:
        return False, "server received no controller command"
    if sent is None:
        return False, "client summary shows no controller command sent"
    if expected == received == sent:
        return True, f"controller command matched ({expected.get('command')})"
    return False, f"controller command mismatch: expected={expected} server={received} client={sent}"


def verify(scenario: str, server: dict[str, Any], client: dict[str, Any], case_dir: Path) -> tuple[bool, str]:
    bad = _status_ok(server, client)
    if bad:
        return False, bad
    mode = common.SCENARIOS[scenario]["verify"]
    if mode == "audio-pcm":
        return verify_pcm(server, client, case_dir)
    if mode == "audio-encoded":
        return verify_encoded(server, client, common.SCENARIOS[scenario]["codec"])
    if mode == "metadata":
        return verify_metadata(server, client)
    if mode == "controller":
        return verify_controller(server, client)
    if mode == "artwork":
        return verify_artwork(server, client)
    return False, f"no verifier for {mode}"


# ---------------------------------------------------------------- one case


async def run_case(scenario: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    spec = common.SCENARIOS[scenario]
    case = out / scenario
    case.mkdir(parents=True, exist_ok=True)
    for old in case.iterdir():
        if old.is_file():
            old.unlink()
    registry = case / "registry.json"
    common.write_json_atomic(registry, {})
    server_port, client_port = free_port(), free_port()
    names = {
        "server_name": f"{args.server_impl} server",
        "server_id": f"{args.server_impl}-server",
        "client_name": f"{args.client_impl}-client",
        "client_id": f"{args.client_impl}-client-id",
    }
    common_args = [("scenario-id", scenario), ("initiator-role", spec["initiator"]),
                   ("preferred-codec", spec["codec"]), *common.SCENARIO_EXTRAS.get(scenario, []),
                   ("timeout-seconds", f"{float(args.timeout):.1f}")]
    wire = ["--legacy"] if args.wire == "legacy" else []
    server_cmd = shlex.split(args.server_cmd) + wire + flags([
        ("summary", str(case / "server-summary.json")), ("ready", str(case / "server-ready.json")),
        ("registry", str(registry)), *common_args,
        ("client-name", names["client_name"]), ("fixture", common.FIXTURE_NAME),
        ("server-id", names["server_id"]), ("server-name", names["server_name"]),
        ("port", str(server_port)),
    ])
    client_cmd = shlex.split(args.client_cmd) + wire + flags([
        ("summary", str(case / "client-summary.json")), ("ready", str(case / "client-ready.json")),
        ("registry", str(registry)), *common_args,
        ("client-name", names["client_name"]), ("client-id", names["client_id"]),
        ("server-id", names["server_id"]), ("server-name", names["server_name"]),
        ("port", str(client_port)), ("path", "/sendspin"),
    ])
    result: dict[str, Any] = {"scenario": scenario, "case_dir": str(case), "server_exit_code": None,
                              "client_exit_code": None}
    t0 = time.monotonic()
    server_proc = client_proc = None
    failure: str | None = None
    try:
        server_proc = await spawn(server_cmd, case / "server.log")
        await wait_file(case / "server-ready.json", READY_TIMEOUT_S, server_proc)
        client_proc = await spawn(client_cmd, case / "client.log")
        await wait_file(case / "client-ready.json", READY_TIMEOUT_S, client_proc)
        try:
            await asyncio.wait_for(server_proc.wait(), timeout=args.timeout + 15)
        except (TimeoutError, asyncio.TimeoutError):
            failure = f"server did not exit within {args.timeout + 15:.0f}s"
    except Exception as err:  # noqa: BLE001
        failure = f"{type(err).__name__}: {err}"
    finally:
        result["server_exit_code"] = await reap(server_proc, 0 if failure else 5)
        result["client_exit_code"] = await reap(client_proc, 2 if failure else CLIENT_EXIT_GRACE_S)
    result["duration_s"] = round(time.monotonic() - t0, 2)

    ssum, csum = case / "server-summary.json", case / "client-summary.json"
    if failure is None:
        missing = [p.name for p in (ssum, csum) if not p.exists()]
        if missing:
            failure = f"missing {', '.join(missing)} (exit codes server={result['server_exit_code']} client={result['client_exit_code']})"
    if failure is None:
        ok, reason = verify(scenario, common.read_json(ssum), common.read_json(csum), case)
        if ok and (result["server_exit_code"] != 0 or result["client_exit_code"] != 0):
            ok, reason = False, (f"adapter exited non-zero (server={result['server_exit_code']} "
                                 f"client={result['client_exit_code']}); {reason}")
    else:
        ok, reason = False, failure
        for p, who in ((ssum, "server"), (csum, "client")):
            if p.exists():
                try:
                    s = common.read_json(p)
                    if s.get("status") != "ok":
                        reason += f"; {who}: {s.get('reason')}"
                except Exception:  # noqa: BLE001
                    pass
    result.update(status="passed" if ok else "failed", reason=reason)
    common.write_json_atomic(case / "result.json", result)
    return result


async def main_async(args: argparse.Namespace) -> int:
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="sendspin-conformance-"))
    out.mkdir(parents=True, exist_ok=True)
    scenarios = args.scenario or list(common.SCENARIOS)
    unknown = [s for s in scenarios if s not in common.SCENARIOS]
    if unknown:
        print(f"unknown scenario(s): {unknown}; known: {list(common.SCENARIOS)}", file=sys.stderr)
        return 2
    results = []
    for scenario in scenarios:
        r = await run_case(scenario, args, out)
        results.append(r)
        print(f"{'PASS' if r['status'] == 'passed' else 'FAIL'} {scenario} ({r['duration_s']}s): {r['reason']}",
              flush=True)
    passed = sum(r["status"] == "passed" for r in results)
    common.write_json_atomic(out / "results.json", {
        "server": args.server_impl, "client": args.client_impl, "client_cmd": args.client_cmd, "wire": args.wire,
        "passed": passed, "total": len(results), "results": results,
    })
    print(f"{passed}/{len(results)} passed; results in {out / 'results.json'}")
    return 0 if passed == len(results) else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--client-cmd", required=True, help="command prefix of the client adapter (shell-split)")
    p.add_argument("--server-cmd", default=DEFAULT_SERVER_CMD)
    p.add_argument("--scenario", action="append", help="scenario id (repeatable); default: all")
    p.add_argument("--out", help="results directory (default: a new temp dir)")
    p.add_argument("--timeout", type=float, default=40.0, help="--timeout-seconds handed to both adapters")
    p.add_argument("--wire", choices=("encrypted", "legacy"), default="encrypted",
                   help="legacy: the older unencrypted wire on both sides (--legacy to each adapter)")
    p.add_argument("--server-impl", default="aiosendspin")
    p.add_argument("--client-impl", default="client", help="label used to build --client-name/--client-id")
    return asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
