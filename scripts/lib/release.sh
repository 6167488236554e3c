# Sourced by scripts that build release products (scripts/build-release, scripts/bench,
# scripts/gen/link-order.sh). Every release build uses the same flags, so switching products
# relinks instead of recompiling.
#
# Why these flags (docs/architecture.md, "The release binary"): a whole `farcast vnc watch`
# process is measured against libvncclient's, peak RSS included, and on Linux most of a Swift
# binary's resident memory is file pages it touches once at start-up, scattered over a 35 MB
# text segment (the kernel maps at least 64 KiB around every page fault). The flags link one
# static image whose start-up and decode code sits together at the front of .text:
#   --static-swift-stdlib          the Swift runtime and Foundation in the image, where they can
#                                  be ordered too (and no libswiftCore.so to install)
#   -function-sections (Swift, C)  one section per function, so the linker can move them
#   lld, --symbol-ordering-file    scripts/release/farcast.order: the functions a VNC session
#                                  runs, first (made by scripts/gen/link-order.sh)
#   -T unnamed-first.ld            functions with no symbol name (tiny witness thunks, one per
#                                  file) cannot be named in the order file; grouped before .text
#   -z pack-relative-relocs        DT_RELR: 150,000 relative relocations in 30 KB, not 3.6 MB
#   --no-export-dynamic            the static stdlib's link arguments export every symbol of
#                                  the executable; nothing looks them up, and the 6 MB of
#                                  symbol tables was read by the dynamic loader at every start
#   static libstdc++               its start-up (locale, iostreams) then joins the ordered code
#                                  instead of touching 1.5 MB of libstdc++.so
# The binary stays position-independent (ASLR); non-PIE would save another 1.4 MB of relocated
# data, not worth the hardening it gives up.
RELEASE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# A directory whose libstdc++.so is a linker script naming the static archive, searched before
# the system's: `-lstdc++` comes from the toolchain's own link arguments and cannot be removed.
release_static_cxx_dir() {
  local archive dir="$RELEASE_ROOT/.build/ordered/static-libstdc++"
  archive=$(gcc -print-file-name=libstdc++.a)
  [ -f "$archive" ] || { echo "release build: libstdc++.a not found (apt-get install libstdc++-12-dev)" >&2; return 1; }
  mkdir -p "$dir"
  printf 'INPUT(%s)\n' "$archive" > "$dir/libstdc++.so.tmp" && mv "$dir/libstdc++.so.tmp" "$dir/libstdc++.so"
  echo "$dir"
}

# release_flags [extra linker flags…] -> RELEASE_FLAGS array
release_flags() {
  local cxx
  cxx=$(release_static_cxx_dir)
  RELEASE_FLAGS=(
    # Its own build folder: the compiler's incremental build does not recompile for changed
    # -Xfrontend flags, so objects left in .build/release by a plain build would stay unsplit.
    --scratch-path "$RELEASE_ROOT/.build/ordered"
    -c release --static-swift-stdlib
    -Xswiftc -Xfrontend -Xswiftc -function-sections -Xcc -ffunction-sections
    -Xswiftc -use-ld=lld
    -Xlinker -L"$cxx"
    -Xlinker -z -Xlinker pack-relative-relocs
    -Xlinker --no-export-dynamic
    -Xlinker --symbol-ordering-file="$RELEASE_ROOT/scripts/release/farcast.order"
    -Xlinker --no-warn-symbol-ordering
    -Xlinker -T"$RELEASE_ROOT/scripts/release/unnamed-first.ld"
  )
  local extra
  for extra in "$@"; do RELEASE_FLAGS+=(-Xlinker "$extra"); done
}

# release_build PRODUCT [extra linker flags…]: builds PRODUCT with the release flags (output on
# stderr) and sets RELEASE_BIN to the binary folder.
release_build() {
  local product=$1; shift
  release_flags "$@"
  (cd "$RELEASE_ROOT" && swift build "${RELEASE_FLAGS[@]}" --product "$product" >&2)
  RELEASE_BIN=$(cd "$RELEASE_ROOT" && swift build "${RELEASE_FLAGS[@]}" --show-bin-path)
}
