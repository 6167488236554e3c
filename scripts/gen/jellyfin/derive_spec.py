#!/usr/bin/env python3
"""Derives Farcast's two Jellyfin OpenAPI documents from the pristine 10.11 spec.

    derive_spec.py SOURCE.json OUT_DIR

Writes
  OUT_DIR/jellyfin-openapi.filtered.json   the operations Farcast uses, cleaned, enums intact:
                                           what schemathesis checks the stand-in against
  OUT_DIR/jellyfin-openapi.generator.json  the same with every string enum opened up to plain
                                           strings: what swift-openapi-generator reads

Cleaning (see ../shared/protocols/jellyfin.md §3):
  - `allowEmptyValue` is removed from response headers (OpenAPI allows it on parameters only;
    the generator refuses the document otherwise).
  - Only the operations in OPERATIONS are kept, and only the component schemas they reach.
  - Only `application/json` is kept where an operation lists JSON media types: the server
    answers PascalCase to it, and the camelCase profile must never be asked for.
  - Generator copy only: `deprecated` flags are dropped (the generated code would warn on its
    own uses of deprecated fields), and string enums lose their value lists (the component schemas and the
    inline copies Jellyfin puts beside `allOf: [$ref]`), so a value a newer server adds decodes
    instead of failing a whole page. The Swift layer above maps the strings to enums with an
    `unknown` case. `format: float` becomes `double` (a Swift Float cannot decode every number
    the schema allows).
Standard library only; deterministic output (sorted keys) so a re-run changes nothing.
"""
import copy
import json
import sys

# The operations the Jellyfin module and its stand-in use, by operationId.
OPERATIONS = [
    # server and users
    "GetPublicSystemInfo", "GetPingSystem", "GetPublicUsers", "GetCurrentUser",
    # sign-in and sign-out
    "AuthenticateUserByName", "GetQuickConnectEnabled", "InitiateQuickConnect",
    "GetQuickConnectState", "AuthenticateWithQuickConnect", "AuthorizeQuickConnect",
    "ReportSessionEnded",
    # live session
    "PostFullCapabilities", "GetSessions",
    # browse
    "GetUserViews", "GetItems", "GetItem", "GetResumeItems", "GetNextUp", "GetLatestMedia",
    "GetSeasons", "GetEpisodes", "GetSearchHints",
    # user data
    "MarkPlayedItem", "MarkUnplayedItem", "MarkFavoriteItem", "UnmarkFavoriteItem", "GetItemUserData", "UpdateItemUserData",
    # images
    "GetItemImage",
    # media segments (skip intro, credits) and lyrics
    "GetItemSegments", "GetLyrics",
    # playback: negotiation, progress reports, transcode keep-alive and stop
    "GetPostedPlaybackInfo", "ReportPlaybackStart", "ReportPlaybackProgress", "ReportPlaybackStopped",
    "PingPlaybackSession", "StopEncodingProcess",
    # live TV: channels, the guide, recordings and timers, closing a live stream
    "GetLiveTvChannels", "GetLiveTvPrograms", "GetRecordings", "GetTimers", "GetDefaultTimer", "CreateTimer", "CancelTimer",
    "CloseLiveStream",
    # SyncPlay: groups, the shared queue and playback, the server's clock
    "SyncPlayGetGroups", "SyncPlayCreateGroup", "SyncPlayJoinGroup", "SyncPlayLeaveGroup", "SyncPlaySetNewQueue",
    "SyncPlayReady", "SyncPlayBuffering", "SyncPlayPause", "SyncPlayUnpause", "SyncPlaySeek", "SyncPlayStop", "SyncPlayPing",
    "GetUtcTime",
]

JSON_TYPES = ("application/json", "text/json", "application/*+json")


def strip_response_header_flags(spec):
    removed = 0
    for path_item in spec.get("paths", {}).values():
        for op in path_item.values():
            if not isinstance(op, dict):
                continue
            for response in op.get("responses", {}).values():
                for header in response.get("headers", {}).values():
                    if "allowEmptyValue" in header:
                        del header["allowEmptyValue"]
                        removed += 1
    return removed


def keep_plain_json(content):
    """Keeps `application/json` alone when the media types are JSON variants."""
    if not content:
        return content
    if "application/json" in content and all(k.startswith(JSON_TYPES) for k in content):
        return {"application/json": content["application/json"]}
    return content


def refs_in(node, found):
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            found.add(ref.rsplit("/", 1)[1])
        for value in node.values():
            refs_in(value, found)
    elif isinstance(node, list):
        for value in node:
            refs_in(value, found)


def filtered(spec):
    out = {k: v for k, v in spec.items() if k not in ("paths", "components")}
    paths = {}
    seen = set()
    for path, item in spec["paths"].items():
        kept = {}
        for method, op in item.items():
            if isinstance(op, dict) and op.get("operationId") in OPERATIONS:
                op = copy.deepcopy(op)
                seen.add(op["operationId"])
                for response in op.get("responses", {}).values():
                    if "content" in response:
                        response["content"] = keep_plain_json(response["content"])
                if "requestBody" in op:
                    op["requestBody"]["content"] = keep_plain_json(op["requestBody"]["content"])
                kept[method] = op
            elif method == "parameters":
                kept[method] = op
        if any(isinstance(v, dict) and "operationId" in v for v in kept.values()):
            paths[path] = kept
    missing = sorted(set(OPERATIONS) - seen)
    if missing:
        sys.exit(f"derive_spec.py: operations not in the source spec: {', '.join(missing)}")
    out["paths"] = paths

    schemas = spec["components"]["schemas"]
    wanted, queue = set(), set()
    refs_in(paths, queue)
    while queue:
        name = queue.pop()
        if name in wanted:
            continue
        wanted.add(name)
        refs_in(schemas[name], queue)
    components = {"schemas": {name: schemas[name] for name in sorted(wanted)}}
    if "securitySchemes" in spec.get("components", {}):
        components["securitySchemes"] = spec["components"]["securitySchemes"]
    out["components"] = components
    return out


def each_object(node, change):
    """Calls `change` on every JSON object under `node` (itself included); returns how many
    objects it changed (`change` returns True when it changed one)."""
    count = 0
    if isinstance(node, dict):
        count += 1 if change(node) else 0
        for value in node.values():
            count += each_object(value, change)
    elif isinstance(node, list):
        for value in node:
            count += each_object(value, change)
    return count


def open_enum(node):
    """Drops a string enum's value list."""
    if isinstance(node.get("enum"), list) and (node.get("type") == "string" or "allOf" in node):
        del node["enum"]
        return True
    return False


def drop_deprecation(node):
    """Drops `deprecated: true` (generator copy only): the generated code would otherwise warn
    on every use of a deprecated field, its own uses included."""
    if node.get("deprecated") is True:
        del node["deprecated"]
        return True
    return False


def widen_float(node):
    """`format: float` becomes `double` (generator copy only): the schema bounds no such number,
    so any JSON number is valid there, and a Swift Float fails to decode one past 3.4e38 (the
    stand-in answered a fuzzed rating of 7.9e119 with a 500)."""
    if node.get("format") == "float":
        node["format"] = "double"
        return True
    return False


def write(path, document):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(document, f, indent=1, sort_keys=True, ensure_ascii=False)
        f.write("\n")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    source, out_dir = sys.argv[1], sys.argv[2]
    with open(source, encoding="utf-8") as f:
        spec = json.load(f)
    removed = strip_response_header_flags(spec)
    subset = filtered(spec)
    write(f"{out_dir}/jellyfin-openapi.filtered.json", subset)
    tolerant = copy.deepcopy(subset)
    opened = each_object(tolerant, open_enum)
    undeprecated = each_object(tolerant, drop_deprecation)
    widened = each_object(tolerant, widen_float)
    write(f"{out_dir}/jellyfin-openapi.generator.json", tolerant)
    print(f"derive_spec.py: removed {removed} allowEmptyValue flags; kept {len(OPERATIONS)} operations, "
          f"{len(subset['components']['schemas'])} schemas; opened {opened} enums; dropped {undeprecated} deprecation flags; "
          f"widened {widened} floats",
          file=sys.stderr)


if __name__ == "__main__":
    main()
