#!/usr/bin/env bash
# The integration phase of scripts/test, runnable alone after a debug build:
#   scripts/lib/integration.sh "$(swift build --show-bin-path)"
# FARCAST_BIN set beforehand points the tests that run the command at another farcast, such as
# the release binary of scripts/build-release:
#   FARCAST_BIN=.build/ordered/release/farcast scripts/lib/integration.sh "$(swift build --show-bin-path)"
# Every integration suite runs inside a network namespace of its own (only loopback exists
# there, so no server a test starts can reach beyond this machine).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=$1
export FARCAST_BIN="${FARCAST_BIN:-$BIN/farcast}"
export FARCAST_VENV="$PWD/.venv"
SECONDS=${FARCAST_TEST_SECONDS:-0}   # scripts/test passes its clock, so the times below continue it
say() { printf '==> [%d:%02d] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*" >&2; }

say "integration tests (in private network namespaces)"
if [ "$(id -u)" -eq 0 ]; then
  UNSHARE=(unshare -n)
else
  UNSHARE=(unshare -rn)   # unprivileged user namespace, where the kernel allows it
fi
# Most integration time is spent waiting on real servers (a full serial run keeps the two cores
# about a quarter busy), so the suites run as test processes side by side, then the suites that
# judge timing alone, one at a time. Which suite runs where is a Swift Testing tag on the suite
# (Tests/IntegrationTests/Support/Tags.swift says how the groups are chosen): .groupA, .groupB
# and .groupC, and a last group that takes every suite without a tag, so a new suite always runs;
# .timing suites run after them. Each group is one test process in a network namespace of its
# own, with its own range of X display numbers (X keeps its locks in the shared /tmp) and its own
# state folders. Within a group one suite at a time: many tests wait synchronously on real
# servers, and Swift Testing runs those on the cooperative thread pool (two threads on a two-core
# machine), where they would starve the async tests' timers. The test binary is run directly:
# `swift test` holds a lock on .build.
TESTS="$BIN/FarcastPackageTests.xctest"
RUNS="$(mktemp -d)"
group() {  # group NAME DISPLAY_BASE SELECTION...: runs the selected integration suites, output in $RUNS/NAME.log
  local name=$1 base=$2; shift 2
  local state="$RUNS/$name"
  mkdir -p "$state"
  "${UNSHARE[@]}" env FARCAST_REQUIRE_NETNS=1 FARCAST_DISPLAY_BASE="$base" XDG_STATE_HOME="$state/state" \
    XDG_DATA_HOME="$state/data" XDG_CONFIG_HOME="$state/config" XDG_CACHE_HOME="$state/cache" \
    bash -c 'ip link set lo up && exec "$@"' group "$TESTS" --testing-library swift-testing --no-parallel "$@" \
    > "$RUNS/$name.log" 2>&1
}
FAILED=()
report() {  # report NAME STATUS: the group's whole output, then its verdict
  sed 's/^/['"$1"'] /' "$RUNS/$1.log" >&2
  if [ "$2" -ne 0 ]; then FAILED+=("$1"); say "integration group $1 FAILED (exit $2)"; else say "integration group $1 passed"; fi
}
# The tags, read from the test binary's own listing (the tests are not run by it).
"$TESTS" --testing-library swift-testing --list-tests --event-stream-output-path "$RUNS/tests.jsonl" \
  --experimental-event-stream-version 99 > /dev/null
declare -A PLACED=()
while read -r tag suites; do PLACED[$tag]=$suites; done \
  < <(python3 scripts/lib/integration_groups.py "$RUNS/tests.jsonl")
[ ${#PLACED[@]} -eq 4 ] || { say "integration: could not read the suites' placement tags"; exit 1; }
SUITE_GROUPS=("${PLACED[groupA]}" "${PLACED[groupB]}" "${PLACED[groupC]}")
QUIET=${PLACED[timing]}
say "integration: $((${#SUITE_GROUPS[@]} + 1)) groups of suites at once"
PIDS=()
named=""
for i in "${!SUITE_GROUPS[@]}"; do
  group "group$((i + 1))" $((20 + 150 * i)) --filter "IntegrationTests\.(${SUITE_GROUPS[$i]})\b" & PIDS+=($!)
  named="$named|${SUITE_GROUPS[$i]}"
done
last=$((${#SUITE_GROUPS[@]} + 1))
group "group$last" $((20 + 150 * ${#SUITE_GROUPS[@]})) --filter IntegrationTests --skip "IntegrationTests\.(${named#|}|$QUIET)\b" & PIDS+=($!)
for i in "${!PIDS[@]}"; do
  status=0; wait "${PIDS[$i]}" || status=$?
  report "group$((i + 1))" $status
done
say "integration: clock-sensitive suites alone"
status=0; group quiet 800 --filter "IntegrationTests\.($QUIET)\b" || status=$?
report quiet $status
# A test that failed is run once more, alone (no other group beside it), before the phase
# fails: on this 2-core machine a timing test can lose to a neighbour's load or the host's, and
# one such loss must not discard a session's work. Both outcomes stay in the log: a test that
# passes the second time is listed as FLAKY at the end, for the next session to look at; one
# that fails again fails the phase. A group that crashed (no failed test named) is not retried.
failed_tests() {  # failed_tests LOG: the filter matching each test the log says failed, or nothing
  local suites tests
  suites=$(grep -oE '✘ Suite [A-Za-z0-9_]+ failed' "$1" | awk '{print $3}' | sort -u | paste -sd'|' -)
  tests=$(grep -oE '✘ Test [A-Za-z0-9_]+\(' "$1" | sed 's/^✘ Test //; s/($//' | sort -u | paste -sd'|' -)
  [ -n "$suites" ] && [ -n "$tests" ] && ! grep -q 'Fatal error' "$1" && echo "IntegrationTests\.($suites)/($tests)\("
}
FLAKY=()
STILL_FAILED=()
for name in "${FAILED[@]}"; do
  selection=$(failed_tests "$RUNS/$name.log" || true)
  if [ -z "$selection" ]; then STILL_FAILED+=("$name"); continue; fi
  say "integration: running what failed in group $name once more, alone"
  status=0; group "$name-again" 900 --filter "$selection" || status=$?
  sed 's/^/['"$name"'-again] /' "$RUNS/$name-again.log" >&2
  if [ "$status" -eq 0 ]; then FLAKY+=("$name"); else STILL_FAILED+=("$name"); fi
done
if [ ${#FAILED[@]} -ne 0 ]; then
  # CI keeps only the tail of a long log: repeat what failed, group by group, last.
  for name in "${FAILED[@]}"; do
    say "what failed in group $name:"
    grep -E -A2 '✘|Fatal error' "$RUNS/$name.log" | head -60 | sed 's/^/['"$name"'] /' >&2 || true
  done
fi
if [ ${#FLAKY[@]} -ne 0 ]; then
  say "FLAKY: these groups had tests that failed and then passed when run again alone: ${FLAKY[*]} (their failures are above)"
fi
if [ ${#STILL_FAILED[@]} -ne 0 ]; then
  say "integration groups that failed: ${STILL_FAILED[*]}"
  exit 1
fi
