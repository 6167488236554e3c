"""Which integration suite runs where, read from the suites' own Swift Testing tags.

    python3 scripts/lib/integration_groups.py EVENTS.jsonl

EVENTS.jsonl is the test binary's listing as an event stream:

    FarcastPackageTests.xctest --testing-library swift-testing --list-tests \
        --event-stream-output-path EVENTS.jsonl --experimental-event-stream-version 99

(Swift Testing 6.3 puts a test's tags in the stream only in its experimental schema, as `_tags`;
6.4's stable schema calls them `tags`, and both are read.) Prints one line per placement tag of
Tests/IntegrationTests/Support/Tags.swift, `TAG Suite1|Suite2|...`, in the order groupA, groupB,
groupC, timing. Exits non-zero when a suite carries two placement tags or a placement tag holds
no suite: either means the tags and this phase have drifted apart.
"""
import json
import sys

PLACEMENTS = ["groupA", "groupB", "groupC", "timing"]


def main(path: str) -> int:
    placed: dict[str, list[str]] = {tag: [] for tag in PLACEMENTS}
    problems = []
    with open(path, encoding="utf-8") as events:
        for line in events:
            record = json.loads(line)
            test = record.get("payload", {})
            if record.get("kind") != "test" or test.get("kind") != "suite":
                continue
            module, _, suite = test["id"].partition(".")
            if module != "IntegrationTests" or "." in suite or "/" in suite:
                continue  # only the integration target's top-level suites are placed
            tags = [t.lstrip(".") for t in (test.get("tags") or test.get("_tags") or [])]
            mine = [t for t in tags if t in placed]
            if len(mine) > 1:
                problems.append(f"{suite} has more than one placement tag: {', '.join(mine)}")
            for tag in mine[:1]:
                placed[tag].append(suite)
    for tag, suites in placed.items():
        if not suites:
            problems.append(f"no integration suite is tagged .{tag}")
    if problems:
        for problem in problems:
            print(f"integration groups: {problem}", file=sys.stderr)
        return 1
    for tag in PLACEMENTS:
        print(tag, "|".join(sorted(placed[tag])))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
