#!/usr/bin/env bash
# Regenerates the Jellyfin module's generated layer from the pristine 10.11 spec:
#   1. scripts/gen/jellyfin/derive_spec.py derives the filtered, cleaned documents (committed in
#      scripts/gen/jellyfin/: CI has no ../shared, and they are our derived data);
#   2. swift-openapi-generator 1.14.3, built once in .build-openapi-gen/ from the local package
#      mirror (a release build takes ~4 min on 2 cores; CI never runs this script), writes
#        Sources/Jellyfin/Generated/Types*.swift, Client.swift  (package access)
#        Tests/JellyfinStandIn/Generated/Server.swift           (server stubs for the stand-in)
# Usage: scripts/gen/jellyfin-openapi.sh [SPEC]   (default ../shared/specs/jellyfin-openapi.json)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
SPEC=${1:-$ROOT/../shared/specs/jellyfin-openapi.json}
[ -f "$SPEC" ] || { echo "jellyfin-openapi.sh: no spec at $SPEC" >&2; exit 2; }
GEN_DIR=$ROOT/scripts/gen/jellyfin
VERSION=1.14.3

python3 "$GEN_DIR/derive_spec.py" "$SPEC" "$GEN_DIR"

TOOL_DIR=$ROOT/.build-openapi-gen
GENERATOR=$TOOL_DIR/swift-openapi-generator/.build/release/swift-openapi-generator
if [ ! -x "$GENERATOR" ]; then
  mkdir -p "$TOOL_DIR"
  if [ ! -d "$TOOL_DIR/swift-openapi-generator" ]; then
    git clone -q --branch "$VERSION" https://github.com/apple/swift-openapi-generator.git "$TOOL_DIR/swift-openapi-generator"
  fi
  echo "building swift-openapi-generator $VERSION (release; a few minutes)…" >&2
  swift build -c release --product swift-openapi-generator --package-path "$TOOL_DIR/swift-openapi-generator" >&2
fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$GENERATOR" generate --config "$GEN_DIR/client-config.yaml" --output-directory "$WORK/client" \
  "$GEN_DIR/jellyfin-openapi.generator.json"
"$GENERATOR" generate --config "$GEN_DIR/server-config.yaml" --output-directory "$WORK/server" \
  "$GEN_DIR/jellyfin-openapi.generator.json"

# Tidy the output so it builds without warnings: the generator writes empty namespaces (headers,
# parameters, request bodies, responses: the spec defines none) and imports Foundation's URL,
# Data and Date into every file whether it uses them or not, and OpenAPIRuntime at package level
# where Types.swift needs it only internally.
rm -f "$WORK"/client/Types+Components+{Headers,Parameters,RequestBodies,Responses}.swift
python3 - "$WORK"/client/*.swift "$WORK"/server/*.swift <<'PY'
import re, sys
for path in sys.argv[1:]:
    text = open(path).read()
    for name in ("URL", "Data", "Date"):
        line = f"package import struct Foundation.{name}\n"
        rest = text.replace(line, "")
        if line in text and not re.search(rf"\bFoundation\.{name}\b", rest):
            text = rest
    # Types.swift uses the runtime only inside function bodies; Types+Components.swift not at all.
    if path.endswith("/client/Types.swift") or path.endswith("/client/Types+Components.swift"):
        text = text.replace("@_spi(Generated) package import OpenAPIRuntime", "@_spi(Generated) internal import OpenAPIRuntime")
    open(path, "w").write(text)
PY
rm -rf Sources/Jellyfin/Generated Tests/JellyfinStandIn/Generated
mkdir -p Sources/Jellyfin/Generated Tests/JellyfinStandIn/Generated
cp "$WORK"/client/*.swift Sources/Jellyfin/Generated/
cp "$WORK/server/Server.swift" Tests/JellyfinStandIn/Generated/
wc -l Sources/Jellyfin/Generated/*.swift Tests/JellyfinStandIn/Generated/*.swift >&2
# Every operation's output told as an HTTP status (DocumentedOutput), for one error mapping.
python3 "$GEN_DIR/output_status.py" Sources/Jellyfin/Generated/Types+Operations.swift > Sources/Jellyfin/Generated/OutputStatus.swift
