#!/usr/bin/env python3
"""docs/cli-reference.md from farcast's own parsers: every command, its arguments and options.

    python3 scripts/gen/cli_reference.py "$(swift build --show-bin-path)/farcast" > docs/cli-reference.md

It reads `farcast --experimental-dump-help` (swift-argument-parser's description of the whole
command tree), so the page says exactly what the parsers accept. CLITests regenerates it and
fails when the committed page differs: after changing a command, run the line above."""
import json
import subprocess
import sys


def names(argument):
    spelled = []
    for name in argument.get("names", []):
        prefix = "--" if name["kind"] == "long" else "-"
        spelled.append(prefix + name["name"])
    return ", ".join(spelled)


def cell(text):
    return " ".join(text.split()).replace("|", "\\|")


def row(argument):
    kind = argument["kind"]
    value = argument.get("valueName", "")
    if kind == "positional":
        shown = f"`<{value}>`" + (" …" if argument.get("isRepeating") else "")
    elif kind == "flag":
        shown = f"`{names(argument)}`"
    else:
        shown = f"`{names(argument)} <{value}>`"
    text = cell(argument.get("abstract", ""))
    extras = []
    if argument.get("defaultValue") not in (None, "") and kind != "flag":
        extras.append(f"default: `{argument['defaultValue']}`")
    if argument.get("isRepeating") and kind != "positional" and "repeatable" not in text:
        extras.append("repeatable")
    if extras:
        text += (" " if text else "") + "(" + "; ".join(extras) + ")"
    return f"| {shown.replace('|', chr(92) + '|')} | {text} |"


def command(node, path, out):
    path = path + [node["commandName"]]
    if node["commandName"] == "help" or not node.get("shouldDisplay", True):
        return
    subcommands = node.get("subcommands", [])
    out.append(f"## `{' '.join(path)}`")
    out.append("")
    if node.get("abstract"):
        out.append(node["abstract"])
        out.append("")
    if node.get("discussion"):
        out.append(node["discussion"].strip())
        out.append("")
    if subcommands:
        listed = [s for s in subcommands if s["commandName"] != "help" and s.get("shouldDisplay", True)]
        out.append("Subcommands: " + ", ".join(f"`{s['commandName']}`" for s in listed) + ".")
        out.append("")
    else:
        shown = [a for a in node.get("arguments", []) if a.get("shouldDisplay", True)
                 and not any(n["name"] in ("help", "version") for n in a.get("names", []))]
        if shown:
            out.append("| Argument | Meaning |")
            out.append("|---|---|")
            out.extend(row(a) for a in shown)
            out.append("")
    for sub in subcommands:
        command(sub, path, out)


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "farcast"
    tree = json.loads(subprocess.run([binary, "--experimental-dump-help"], check=True, capture_output=True, text=True).stdout)
    out = [
        "# `farcast` command reference",
        "",
        "Every command with its arguments and options, generated from the command parsers by",
        "`scripts/gen/cli_reference.py` (do not edit by hand: CLITests fails when this page and the",
        "commands differ). How every command behaves — exit codes, messages, `--json`, waits,",
        "signals — is in docs/cli.md.",
        "",
    ]
    root = tree["command"]
    for sub in root.get("subcommands", []):
        command(sub, [root["commandName"]], out)
    sys.stdout.write("\n".join(out).rstrip("\n") + "\n")


if __name__ == "__main__":
    main()
