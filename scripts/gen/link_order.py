#!/usr/bin/env python3
"""Function order for lld's --symbol-ordering-file, from callgrind traces (scripts/gen/link-order.sh).

    link_order.py BINARY LINK_MAP CALLGRIND_OUT...

BINARY is the executable that ran under callgrind, LINK_MAP lld's -Map output for the same link.
Each function some traced instruction belongs to is printed once, in order of first appearance,
with every name at its address (aliases). A name is left out when it is defined more than once
(local helpers such as `block_copy_helper` exist in many files) and one of its definitions sits in
an input section over 16 KiB: lld moves every section that defines a listed name, and a large
section is an object compiled without function sections (the static Swift runtime, Foundation),
most of which never runs.
"""
import bisect
import re
import subprocess
import sys
from collections import defaultdict

LARGE_SECTION = 16 * 1024


def function_symbols(binary):
    """Sorted (address, name) of the text symbols."""
    out = subprocess.run(['nm', '-n', '--defined-only', binary], capture_output=True, text=True, check=True).stdout
    syms = []
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in 'tTwW':
            syms.append((int(f[0], 16), f[2]))
    return syms


def section_sizes_by_symbol(link_map):
    """name -> sizes of the .text input sections that define it."""
    sizes = defaultdict(list)
    in_text = False
    current = None
    line_re = re.compile(r'\s*[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+ (.*)$')
    with open(link_map) as f:
        for line in f:
            m = line_re.match(line.rstrip('\n'))
            if not m:
                continue
            rest = m.group(2)
            if not rest.startswith(' '):          # an output section
                in_text = rest.strip().startswith('.text')
                continue
            if not in_text:
                continue
            if rest.startswith(' ' * 16):          # a symbol inside the current input section
                if current is not None:
                    sizes[rest.strip()].append(current)
            else:                                  # an input section
                current = int(m.group(1), 16)
    return sizes


def executed_addresses(path, object_name):
    """Instruction addresses in OBJECT_NAME, in order of first appearance in a callgrind file
    written with --dump-instr=yes --compress-pos=no --compress-strings=no."""
    current = None
    with open(path, errors='replace') as f:
        for line in f:
            if line.startswith('ob='):
                current = line[3:].strip()
            elif line.startswith('0x') and current is not None and current.endswith(object_name):
                yield int(line.split(None, 1)[0], 16)


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    binary, link_map, traces = sys.argv[1], sys.argv[2], sys.argv[3:]
    syms = function_symbols(binary)
    starts = [a for a, _ in syms]
    sizes = section_sizes_by_symbol(link_map)
    object_name = '/' + binary.rsplit('/', 1)[-1]
    seen_functions = set()
    names = []
    for trace in traces:
        for address in executed_addresses(trace, object_name):
            i = bisect.bisect_right(starts, address) - 1
            if i < 0 or starts[i] in seen_functions:
                continue
            start = starts[i]
            seen_functions.add(start)
            j = i
            while j > 0 and starts[j - 1] == start:
                j -= 1
            while j < len(syms) and starts[j] == start:
                names.append(syms[j][1])
                j += 1
    printed = set()
    kept = 0
    for name in names:
        if name in printed:
            continue
        defs = sizes.get(name, [])
        if len(defs) > 1 and max(defs) > LARGE_SECTION:
            continue
        printed.add(name)
        kept += 1
        print(name)
    print(f'link_order: {len(seen_functions)} functions ran, {kept} names kept of {len(names)}', file=sys.stderr)


if __name__ == '__main__':
    main()
