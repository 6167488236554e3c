#!/usr/bin/env python3
"""Writes the loaders that open heavy C libraries with dlopen on first use instead of linking
them into every farcast command:

  Sources/CSDL2Loader/loader.c     SDL2 and SDL2_ttf (the Viewer's window)       farcast_sdl_load()
  Sources/CNGTCP2Loader/loader.c   ngtcp2, its GnuTLS crypto helper and GnuTLS   farcast_quic_load()
  Sources/CDNSSDLoader/loader.c    Avahi's dns_sd compatibility library          farcast_dnssd_load()
  Sources/COpenSSLLoader/loader.c  OpenSSL 3's libssl and libcrypto              farcast_openssl_load()
  Sources/CALSALoader/loader.c     alsa-lib (Sendspin's sound output)            farcast_alsa_load()
  Sources/CFFmpegLoader/loader.c   libavcodec and libavutil (punktfunk's decoder) farcast_ffmpeg_load()

Each library function the Swift sources call — directly, or through a shim's inline function —
gets a definition here with the library's own prototype (read from the installed headers
through clang's AST, so macros that rename functions and typedef'd parameters come out right)
that calls through a pointer filled by dlsym. The load function opens the libraries and resolves
every pointer at once (through Sources/CLazyLibrary, which they all share: the generated files
hold only their tables and forwarders), so a missing library or symbol is one clear error
before first use, never a crash in the middle of a session. A call made before loading loads then (or stops with the
reason): the callers load first and report failures as typed errors; that is the safety net.

The definitions are hidden where the headers leave visibility open (SDL's declare default
visibility; SDL reaches its own functions through an internal jump table), so they never enter
the executable's dynamic symbol table, even when it is linked with -export-dynamic (as
--static-swift-stdlib does): the libraries' calls between their own functions never come
through these forwarders.

Run it after using a new function of one of these libraries in Swift (the link fails otherwise):
    python3 scripts/gen/lazy_loaders.py
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLANG = os.environ.get("CLANG", "/opt/swift/usr/bin/clang")
LIBDIRS = ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib"]

GROUPS = [
    {
        "target": "CSDL2Loader",
        "load": "farcast_sdl_load",
        "what": "SDL2",
        "why": "so the commands that never show a window do not load them and the ~50 libraries they\n"
               "// pull in (X11, Wayland, PulseAudio, D-Bus, FreeType, HarfBuzz, ...)",
        "prelude": ["#define SDL_MAIN_HANDLED 1", "#include <SDL2/SDL.h>", "#include <SDL2/SDL_ttf.h>"],
        "probe": ["#define SDL_MAIN_HANDLED 1", "#include <SDL2/SDL.h>", "#include <SDL2/SDL_ttf.h>"],
        "prefix": r"(?:SDL|TTF)_\w+",
        "libraries": ["libSDL2.so", "libSDL2_ttf.so"],
        "extra": [],
    },
    {
        "target": "CNGTCP2Loader",
        "load": "farcast_quic_load",
        "what": "ngtcp2/GnuTLS",
        "why": "so the commands that never speak QUIC do not load GnuTLS and the libraries it pulls in\n"
               "// (p11-kit, nettle, gmp, libtasn1, libidn2, ...) nor run their start-up code",
        "prelude": ['#include "../CNGTCP2/shim.h"'],
        "probe": ['#include "%s/Sources/CNGTCP2/shim.h"' % ROOT],
        "prefix": r"(?:ngtcp2|gnutls)_\w+",
        "libraries": ["libngtcp2_crypto_gnutls.so", "libngtcp2.so", "libgnutls.so"],
        # gnutls_free is a variable (a function pointer GnuTLS may set), read where it lies.
        "extra": [
            # GnuTLS's gnutls_free is a variable holding the free function: resolved as data.
            ("gnutls_free",
             "void cngtcp2_gnutls_free(void *p) {\n    if (%(slot)s == NULL) farcast_lazy_require(&group);\n"
             "    (*(gnutls_free_function *)%(slot)s)(p);\n}\n"),
        ],
    },
    {
        "target": "COpenSSLLoader",
        "load": "farcast_openssl_load",
        "what": "OpenSSL",
        "why": "so the commands that need neither anonymous TLS (RFB), SSH packet encryption (Hosts),\n"
               "// the punktfunk data plane's AEADs nor Sendspin's Noise transport do not load libssl and libcrypto",
        "prelude": ['#include "../COpenSSL/shim.h"'],
        "probe": ['#include "%s/Sources/COpenSSL/shim.h"' % ROOT],
        "prefix": r"(?:EVP|SSL|BIO|ERR|TLS|OPENSSL)_\w+",
        "libraries": ["libssl.so", "libcrypto.so"],
        "extra": [],
    },
    {
        "target": "CDNSSDLoader",
        "load": "farcast_dnssd_load",
        "what": "dns_sd",
        "why": "so the commands that never browse or advertise do not load Avahi's client library and\n"
               "// what it pulls in (D-Bus, libsystemd, libgcrypt, ...)",
        "prelude": ['#include "../CDNSSD/shim.h"'],
        "probe": ['#include "%s/Sources/CDNSSD/shim.h"' % ROOT],
        "prefix": r"(?:DNSService|TXTRecord)\w+",
        "libraries": ["libdns_sd.so"],
        "extra": [],
    },
    {
        "target": "CALSALoader",
        "load": "farcast_alsa_load",
        "what": "ALSA",
        "why": "so the commands that never play sound do not load alsa-lib nor relocate it at start",
        "prelude": ['#include "../CALSA/shim.h"'],
        "probe": ['#include "%s/Sources/CALSA/shim.h"' % ROOT],
        "prefix": r"snd_\w+",
        "libraries": ["libasound.so"],
        "extra": [],
    },
    {
        "target": "CFFmpegLoader",
        "load": "farcast_ffmpeg_load",
        "what": "FFmpeg (libavcodec)",
        "why": "so the commands that never decode video do not load libavcodec and the codec libraries\n"
               "// it pulls in (dav1d, x265, VA-API, ...)",
        "prelude": ['#include "../CFFmpeg/shim.h"'],
        "probe": ['#include "%s/Sources/CFFmpeg/shim.h"' % ROOT],
        "prefix": r"(?:avcodec|av)_\w+",
        "libraries": ["libavutil.so", "libavcodec.so"],
        "extra": [],
    },
]


def soname(devname):
    for folder in LIBDIRS:
        path = os.path.join(folder, devname)
        if os.path.exists(path):
            out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
            m = re.search(r"\(SONAME\)\s+Library soname: \[(.+?)\]", out)
            if m:
                return m.group(1)
    sys.exit("lazy_loaders.py: %s not found (install the library's -dev package)" % devname)


def ast(probe_lines):
    with tempfile.NamedTemporaryFile("w", suffix=".h", delete=False) as f:
        f.write("\n".join(probe_lines) + "\n")
        name = f.name
    try:
        out = subprocess.run([CLANG, "-x", "c", "-fsyntax-only", "-Xclang", "-ast-dump=json", name],
                             capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit("lazy_loaders.py: clang could not parse the headers:\n" + out.stderr)
        return json.loads(out.stdout)
    finally:
        os.unlink(name)


def referenced_functions(node, found):
    """Names of functions a body refers to."""
    if isinstance(node, dict):
        ref = node.get("referencedDecl")
        if node.get("kind") == "DeclRefExpr" and ref and ref.get("kind") == "FunctionDecl":
            found.add(ref["name"])
        for child in node.get("inner", []):
            referenced_functions(child, found)
    return found


def split_return(qual_type, name):
    """'int (a *, b)' -> 'int'. Functions returning function pointers are not supported."""
    if not qual_type.endswith(")"):
        sys.exit("lazy_loaders.py: cannot read the type of %s: %r" % (name, qual_type))
    depth = 0
    for i in range(len(qual_type) - 1, -1, -1):
        c = qual_type[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                ret = qual_type[:i].strip()
                if "(" in ret:
                    sys.exit("lazy_loaders.py: cannot forward %s, which returns %r" % (name, ret))
                return ret
    sys.exit("lazy_loaders.py: unbalanced type of %s: %r" % (name, qual_type))


def typed(qual_type, name):
    return ("%s %s" % (qual_type, name)) if not re.search(r"[()\[\]]", qual_type) else "__typeof__(%s) %s" % (qual_type, name)


def code_only(text):
    """Swift source without comments and string literals, keeping the code interpolated into
    strings (a name in a comment is no call; one in `"\\(f(x))"` is)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            out.append(" ")
        elif text[i] == '"':
            delimiter = '"""' if text.startswith('"""', i) else '"'
            i += len(delimiter)
            while i < n and not text.startswith(delimiter, i):
                if text.startswith("\\(", i):
                    depth, i, start = 1, i + 2, i + 2
                    while i < n and depth:
                        depth += {"(": 1, ")": -1}.get(text[i], 0)
                        i += 1
                    out.append(" %s " % text[start:i - 1])
                else:
                    i += 2 if text[i] == "\\" else 1
            i += len(delimiter)
            out.append(" ")
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def swift_tokens():
    tokens = set()
    for folder in ("Sources", "Tests"):
        for path in glob.glob(os.path.join(ROOT, folder, "**", "*.swift"), recursive=True):
            tokens.update(re.findall(r"\b\w+\b", code_only(open(path, encoding="utf-8").read())))
    return tokens


def generate(group, tokens):
    tree = ast(group["probe"])
    exported, inline = {}, {}
    for decl in tree.get("inner", []):
        if decl.get("kind") != "FunctionDecl" or "name" not in decl:
            continue
        name = decl["name"]
        has_body = any(c.get("kind") == "CompoundStmt" for c in decl.get("inner", []))
        if decl.get("storageClass") == "static" or decl.get("inline"):
            if has_body:
                inline[name] = decl
        elif name not in exported:
            exported[name] = decl
    prefix = re.compile(r"^%s$" % group["prefix"])
    used, skipped, pending, seen = set(), set(), [t for t in tokens if t in exported or t in inline], set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in inline:
            pending.extend(referenced_functions(inline[name], set()))
        elif name in exported and prefix.match(name):
            used.add(name)
        elif name in exported and name not in tokens:
            # Reached only through a shim's inline code, outside this group's names: it must
            # come from a library that stays linked (libc), or the link will fail naming it.
            skipped.add(name)
    functions = sorted(used)
    libraries = [soname(lib) for lib in group["libraries"]]
    load = group["load"]
    out = [
        "// Generated by scripts/gen/lazy_loaders.py from the installed headers: do not edit.",
        "// %s is opened with dlopen on first use (%s()),\n// %s." % (group["what"], load, group["why"]),
        "#if defined(__linux__)",
        *group["prelude"],
        '#include "lazy_library.h"',
        '#include "%s.h"' % group["target"],
        "",
        "#pragma clang diagnostic ignored \"-Wdeprecated-declarations\"",
        "",
    ]
    symbols = functions + [e[0] for e in group["extra"]]
    slot = {name: "symbols[%d]" % i for i, name in enumerate(symbols)}
    out += [
        "static const char *const library_names[%d] = {%s};" % (len(libraries), ", ".join('"%s"' % l for l in libraries)),
        "static void *libraries[%d];" % len(libraries),
        "static const char *const symbol_names[%d] = {" % len(symbols),
        *['    "%s",' % n for n in symbols],
        "};",
        "static void *symbols[%d];" % len(symbols),
        "static farcast_lazy_library group = {",
        '    .what = "%s",' % group["what"],
        "    .library_count = %d, .library_names = library_names, .libraries = libraries," % len(libraries),
        "    .symbol_count = %d, .symbol_names = symbol_names, .symbols = symbols," % len(symbols),
        "    .lock = PTHREAD_MUTEX_INITIALIZER,",
        "};",
        "",
        "const char *%s(void) { return farcast_lazy_load(&group); }" % load,
        "",
        "#pragma GCC visibility push(hidden)",
        "",
    ]
    for name in functions:
        decl = exported[name]
        if decl.get("variadic"):
            sys.exit("lazy_loaders.py: cannot forward the variadic %s" % name)
        ret = split_return(decl["type"]["qualType"], name)
        params = [c for c in decl.get("inner", []) if c.get("kind") == "ParmVarDecl"]
        formal = ", ".join(typed(p["type"]["qualType"], "a%d" % i) for i, p in enumerate(params)) or "void"
        call = "((__typeof__(&%s))%s)(%s)" % (name, slot[name], ", ".join("a%d" % i for i in range(len(params))))
        head = ("%s %s(%s)" % (ret, name, formal)) if "(" not in ret else "__typeof__(%s) %s(%s)" % (ret, name, formal)
        body = ("%s;" % call) if ret == "void" else ("return %s;" % call)
        out.append("%s {\n    if (%s == NULL) farcast_lazy_require(&group);\n    %s\n}\n" % (head, slot[name], body))
    out += [e[1] % {"slot": slot[e[0]]} for e in group["extra"]]
    out += ["#pragma GCC visibility pop", "#endif", ""]
    path = os.path.join(ROOT, "Sources", group["target"], "loader.c")
    with open(path, "w") as f:
        f.write("\n".join(out))
    print("%s: %d functions from %s" % (os.path.relpath(path, ROOT), len(functions), ", ".join(libraries)))
    if skipped:
        print("  not forwarded (reached from inline code, not named like %s): %s" % (group["prefix"], ", ".join(sorted(skipped))))


def main():
    tokens = swift_tokens()
    for group in GROUPS:
        generate(group, tokens)


if __name__ == "__main__":
    main()
