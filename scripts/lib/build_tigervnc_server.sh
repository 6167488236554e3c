#!/usr/bin/env bash
# Provides a TigerVNC >= 1.13 x0vncserver in .peers/, the real peer for the RSA-AES security types
# (RA2 5, RA2ne 6, RA2_256 129, RA2ne_256 130). Debian bookworm's TigerVNC is 1.12, which has none
# of them. Called by scripts/setup; idempotent: when .peers/tigervnc/bin/x0vncserver runs and
# reports a version >= 1.13 (and was made for the pinned version below) it returns at once.
#
# Everything comes through apt, from Debian trixie, with a private sources list and private list,
# cache and status files in a temporary directory: the system's apt configuration is not touched.
#   1. Source: `apt-get source tigervnc=PIN` (else trixie's current version, if >= 1.13), unpacked
#      by dpkg-source with Debian's patches, then only the x0vncserver target built (cmake Release,
#      no viewer, no NLS, no H.264, Nettle on for RSA-AES, GnuTLS on) against bookworm's -dev
#      packages.
#   2. Binary, when the source files cannot be downloaded (a mirror that lacks them) or the build
#      fails: trixie's tigervnc-scraping-server .deb, run through trixie's own libc6, libstdc++6
#      and libgcc-s1 (the binary needs glibc >= 2.38 and libstdc++ 14; bookworm has 2.36 and 12).
#      bin/x0vncserver is then a small wrapper that starts it with trixie's dynamic loader; every
#      other library is bookworm's.
# Result: .peers/tigervnc-<version>/bin/x0vncserver, with the symlink .peers/tigervnc pointing at
# it, and .peers/tigervnc/ORIGIN saying which way it was made. vncpasswd is bookworm's
# (tigervnc-tools 1.12): its `vncpasswd -f` file format is the one 1.13+ reads.
#
# Environment:
#   TIGERVNC_SOURCE_DIR=DIR   build this already unpacked (and patched) TigerVNC tree instead of
#                             downloading one
#   TIGERVNC_VIA=binary       skip the source build and take the binary package directly
set -euo pipefail
cd "$(dirname "$0")/../.."

say() { printf '==> %s\n' "$*" >&2; }
warn() { printf '==> warning: %s\n' "$*" >&2; }
die() { printf 'build_tigervnc_server.sh: %s\n' "$*" >&2; exit 1; }

PIN=1.15.0+dfsg-2.1~deb13u1   # the `tigervnc` source package in Debian trixie (13.x point release)
SUITE=trixie
MIN=1.13                      # RSA-AES arrived in TigerVNC 1.13
JOBS=2
PEERS=.peers
LINK=$PEERS/tigervnc
LOG=$PEERS/tigervnc-build.log

# Bookworm packages the source build needs (x0vncserver only).
BUILD_DEPS=(dpkg-dev xz-utils cmake make g++ pkg-config libx11-dev libxext-dev libxtst-dev
  libxdamage-dev libxfixes-dev libxrandr-dev libpixman-1-dev libpam0g-dev nettle-dev libgmp-dev
  libgnutls28-dev libjpeg-dev zlib1g-dev)
# Bookworm libraries trixie's x0vncserver binary loads (all but the C/C++ runtime).
RUNTIME_LIBS=(libx11-6 libxext6 libxtst6 libxdamage1 libxfixes3 libxrandr2 libpixman-1-0 libpam0g
  libnettle8 libhogweed6 libgmp10 libgnutls30 libjpeg62-turbo zlib1g libsystemd0)

# The upstream version x0vncserver reports ("TigerVNC server version 1.15.0, built ..."), or nothing.
server_version() {
  { "$@" -version 2>&1 || true; } | sed -n 's/^TigerVNC server version \([0-9][0-9.]*\).*/\1/Ip' | head -n1
}
upstream_of() { local v=${1#*:}; v=${v%%-*}; printf '%s' "${v%%[+~]*}"; }   # 1:1.15.0+dfsg-2 -> 1.15.0
new_enough() { [ -n "$1" ] && dpkg --compare-versions "$1" ge "$MIN"; }

# --- already there? ----------------------------------------------------------------------------
if [ -x "$LINK/bin/x0vncserver" ] && grep -qx "pin=$PIN" "$LINK/ORIGIN" 2>/dev/null; then
  v=$(server_version "$LINK/bin/x0vncserver")
  if new_enough "$v"; then
    say "TigerVNC x0vncserver $v: present ($(sed -n 's/^made=//p' "$LINK/ORIGIN"))"
    exit 0
  fi
  warn "$LINK/bin/x0vncserver does not run or is too old; making it again"
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
apt_updated=""
apt_install() {   # installs those of the given bookworm packages that are missing
  local p missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  say "installing Debian packages: ${missing[*]}"
  if [ -n "$SUDO" ] && ! command -v sudo >/dev/null; then die "need root or sudo to install: ${missing[*]}"; fi
  if [ -z "$apt_updated" ]; then $SUDO apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

mkdir -p "$PEERS"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/farcast-tigervnc.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
: > "$LOG"

# --- a private apt for trixie -----------------------------------------------------------------
# The archive (and security archive) the system already uses for bookworm, so no host is named here.
CODENAME=$(sed -n 's/^VERSION_CODENAME=//p' /etc/os-release)
CODENAME=${CODENAME:-bookworm}
targets=$(apt-get indextargets --no-release-info --format '$(RELEASE) $(REPO_URI)' 2>/dev/null | sort -u)
ARCHIVE=$(awk -v r="$CODENAME" '$1 == r {print $2; exit}' <<<"$targets")
SECURITY=$(awk -v r="$CODENAME-security" '$1 == r {print $2; exit}' <<<"$targets")
[ -n "$ARCHIVE" ] || die "no apt source for '$CODENAME' found (apt-get indextargets); cannot locate the Debian archive"
ARCH=$(dpkg --print-architecture)
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
[ -r "$KEYRING" ] || apt_install debian-archive-keyring

mkdir -p "$WORK/apt/lists/partial" "$WORK/apt/cache/archives/partial" "$WORK/dl" "$WORK/debs"
: > "$WORK/apt/status"
{
  echo "deb-src [signed-by=$KEYRING] $ARCHIVE $SUITE main"
  echo "deb [arch=$ARCH signed-by=$KEYRING] $ARCHIVE $SUITE main"
  if [ -n "$SECURITY" ]; then
    echo "deb-src [signed-by=$KEYRING] $SECURITY $SUITE-security main"
    echo "deb [arch=$ARCH signed-by=$KEYRING] $SECURITY $SUITE-security main"
  fi
} > "$WORK/apt/sources.list"
APT=(-o "Dir::Etc::SourceList=$WORK/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$WORK/apt/lists" -o "Dir::Cache=$WORK/apt/cache"
  -o "Dir::State::status=$WORK/apt/status" -o Dir::Etc::Preferences=/dev/null
  -o Dir::Etc::PreferencesParts=/dev/null -o "APT::Architecture=$ARCH" -o "APT::Architectures=$ARCH"
  -o Acquire::Languages=none -o APT::Sandbox::User=root)

say "TigerVNC: reading Debian $SUITE's package lists (private apt directory, system apt config untouched)"
apt-get "${APT[@]}" -qq update >>"$LOG" 2>&1 || { tail -n 20 "$LOG" >&2; die "apt-get update for $SUITE failed"; }

# Which source version: the pin, else the newest one there (it must still be >= 1.13).
mapfile -t versions < <(apt-cache "${APT[@]}" showsrc --only-source tigervnc 2>/dev/null | sed -n 's/^Version: //p' | sort -u)
VERSION=""
for v in "${versions[@]}"; do [ "$v" != "$PIN" ] || VERSION=$PIN; done
if [ -z "$VERSION" ]; then
  for v in "${versions[@]}"; do
    if [ -z "$VERSION" ] || dpkg --compare-versions "$v" gt "$VERSION"; then VERSION=$v; fi
  done
  [ -n "$VERSION" ] || die "Debian $SUITE lists no tigervnc source package"
  new_enough "$(upstream_of "$VERSION")" || die "Debian $SUITE has tigervnc $VERSION, older than $MIN"
  warn "pinned tigervnc $PIN is not in $SUITE any more; using $SUITE's current $VERSION"
fi

# Puts a finished tree in place: $1 = staged directory, $2 = how it was made.
install_tree() {
  local stage=$1 made=$2 v dest
  v=$(server_version "$stage/bin/x0vncserver")
  if ! new_enough "$v"; then
    warn "the new x0vncserver does not run or reports version '$v' (see $LOG)"
    return 1
  fi
  printf 'pin=%s\nversion=%s\nmade=%s\n' "$PIN" "$VERSION" "$made" > "$stage/ORIGIN" || return 1
  dest=$PEERS/tigervnc-$v
  rm -rf "$dest" && mv "$stage" "$dest" && ln -sfn "tigervnc-$v" "$LINK" || return 1
  say "TigerVNC x0vncserver $v ready: $LINK/bin/x0vncserver ($made)"
}

# --- 1. from source ------------------------------------------------------------------------------
# (Runs where set -e does not apply, so every step checks its own result.)
build_from_source() {
  local src=${TIGERVNC_SOURCE_DIR:-} start what
  if [ -z "$src" ]; then
    say "TigerVNC: downloading source package tigervnc $VERSION from Debian $SUITE"
    if ! (cd "$WORK/dl" && apt-get "${APT[@]}" -q --download-only source --only-source "tigervnc=$VERSION") >>"$LOG" 2>&1; then
      warn "could not download the tigervnc $VERSION source files ($(grep -m1 -o 'Failed to fetch.*' "$LOG" || echo "see $LOG"))"
      return 1
    fi
  fi
  apt_install "${BUILD_DEPS[@]}" || return 1
  if [ -z "$src" ]; then
    dpkg-source -x "$WORK"/dl/tigervnc_*.dsc "$WORK/src" >>"$LOG" 2>&1 || { warn "dpkg-source -x failed (see $LOG)"; return 1; }
    src=$WORK/src
    what="Debian $SUITE source package tigervnc $VERSION"
  else
    say "TigerVNC: building the tree in TIGERVNC_SOURCE_DIR=$src"
    VERSION=$(sed -n 's/^set(VERSION \([0-9.]*\)).*/\1/p' "$src/CMakeLists.txt")
    what="TigerVNC $VERSION tree in $src"
  fi
  start=$SECONDS
  say "TigerVNC: building x0vncserver only (cmake Release, make -j$JOBS x0vncserver)"
  cmake -S "$src" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_VIEWER=OFF -DBUILD_JAVA=OFF \
    -DENABLE_NLS=OFF -DENABLE_H264=OFF -DENABLE_NETTLE=ON -DENABLE_GNUTLS=ON \
    -DINSTALL_SYSTEMD_UNITS=OFF -DENABLE_PWQUALITY=OFF >>"$LOG" 2>&1 \
    || { warn "cmake failed (see $LOG)"; return 1; }
  make -C "$WORK/build" -j"$JOBS" x0vncserver >>"$LOG" 2>&1 || { warn "the build failed (see $LOG)"; return 1; }
  mkdir -p "$WORK/stage/bin" \
    && install -m 0755 "$WORK/build/unix/x0vncserver/x0vncserver" "$WORK/stage/bin/x0vncserver" || return 1
  say "TigerVNC: x0vncserver built in $((SECONDS - start)) s"
  install_tree "$WORK/stage" "built from $what"
}

# --- 2. trixie's binary package with trixie's C/C++ runtime ----------------------------------------
from_binary_package() {
  local stage=$WORK/stage root deb lib loader bver
  apt_install "${RUNTIME_LIBS[@]}"
  say "TigerVNC: downloading Debian $SUITE's tigervnc-scraping-server and its C/C++ runtime (libc6, libstdc++6, libgcc-s1)"
  # The binary package built from the chosen source version, else the newest one there.
  if ! (cd "$WORK/debs" && apt-get "${APT[@]}" -q download "tigervnc-scraping-server=$VERSION") >>"$LOG" 2>&1; then
    (cd "$WORK/debs" && apt-get "${APT[@]}" -q download tigervnc-scraping-server) >>"$LOG" 2>&1 \
      || die "could not download tigervnc-scraping-server from $SUITE (see $LOG)"
  fi
  (cd "$WORK/debs" && apt-get "${APT[@]}" -q download libc6 libstdc++6 libgcc-s1) >>"$LOG" 2>&1 \
    || die "could not download $SUITE's libc6/libstdc++6/libgcc-s1 (see $LOG)"
  bver=$(dpkg-deb -f "$WORK"/debs/tigervnc-scraping-server_*.deb Version)
  new_enough "$(upstream_of "$bver")" || die "$SUITE's tigervnc-scraping-server is $bver, older than $MIN"
  VERSION=$bver
  rm -rf "$stage"; mkdir -p "$stage/bin"
  root=$stage/root
  for deb in "$WORK"/debs/*.deb; do dpkg-deb -x "$deb" "$root"; done
  rm -rf "$root/usr/share" "$root/etc" "$root/usr/bin/x0tigervncserver"
  lib=$(dirname "$(find "$root" -name libc.so.6 -print -quit)")
  loader=$(find "$lib" -maxdepth 1 -name 'ld-linux*.so.*' -print -quit)
  [ -x "$root/usr/bin/X0tigervnc" ] && [ -n "$loader" ] || die "unexpected package contents in $SUITE's tigervnc-scraping-server/libc6"
  cat > "$stage/bin/x0vncserver" <<EOF
#!/bin/sh
# x0vncserver from Debian $SUITE's tigervnc-scraping-server $VERSION, run with $SUITE's own C and
# C++ runtime (it needs glibc >= 2.38; the system's is older). --library-path reaches this process
# only, not the programs it starts. Made by scripts/lib/build_tigervnc_server.sh.
root=\$(CDPATH= cd -- "\$(dirname -- "\$0")/../root" && pwd) || exit 1
lib=\$root/${lib#"$root"/}
exec "\$lib/${loader##*/}" --library-path "\$lib" --argv0 "\$0" "\$root/usr/bin/X0tigervnc" "\$@"
EOF
  chmod 0755 "$stage/bin/x0vncserver"
  # Every symbol must resolve against bookworm's other libraries.
  LD_BIND_NOW=1 "$stage/bin/x0vncserver" -version >>"$LOG" 2>&1 || die "$SUITE's x0vncserver does not start here (see $LOG)"
  install_tree "$stage" "Debian $SUITE binary package tigervnc-scraping-server $VERSION with $SUITE's libc6/libstdc++6" \
    || die "could not install $SUITE's x0vncserver (see $LOG)"
}

if [ "${TIGERVNC_VIA:-}" != binary ]; then
  build_from_source && exit 0
  warn "falling back to Debian $SUITE's binary package"
fi
from_binary_package
