#!/usr/bin/env bash
# The release build, as the CLI is shipped and benchmarked: the Swift runtime (--static-swift-stdlib)
# and the C++ runtime it needs (libstdc++) linked into the binaries, linked with the toolchain's
# lld in the order a cold run executes. GLib stays a system library; libgcrypt, OpenSSL's
# libcrypto and libcurl are loaded when first used.
#   scripts/build-release.sh [product ...]   builds the products (default: tokencache)
#   scripts/build-release.sh --show-bin-path where the binaries are
set -euo pipefail
cd "$(dirname "$0")/.."
flags=(-c release --static-swift-stdlib)
# The static Swift runtime still asks for libstdc++ as a shared library (-lstdc++). A directory
# whose libstdc++.so is the static archive makes the linker take the archive instead (the linker
# goes by a file's content, not its name): one library fewer to load and relocate at every start
# (cold `tokencache token` 14.5 -> 13.8 ms, peak RSS 1 MB less). Skipped when no libstdc++.a is found.
toolchain_clang="$(dirname "$(readlink -f "$(command -v swift)")")/clang"
archive=""
for compiler in "$toolchain_clang" c++ cc; do
    candidate="$("$compiler" -print-file-name=libstdc++.a 2>/dev/null || true)"
    if [ -f "$candidate" ]; then archive="$candidate"; break; fi
done
if [ -n "$archive" ]; then
    mkdir -p .build/static-libstdc++
    ln -sfn "$archive" .build/static-libstdc++/libstdc++.so
    flags+=(-Xlinker "-L$PWD/.build/static-libstdc++")
else
    echo "build-release.sh: no libstdc++.a found; linking libstdc++ as a shared library" >&2
fi
# With the toolchain's lld: the functions a cold run executes laid out together
# (scripts/link-order.txt, see scripts/link-order.sh: peak RSS of a cold `token` 15.6 -> 12.9 MB),
# and, where this machine's glibc is 2.36 or later, relative relocations packed (DT_RELR: 0.9 MB
# of relocation records the loader no longer reads at start; the binary then needs glibc 2.36,
# as it is built where it runs). Without lld, the default linker as before.
toolchain_lld="$(dirname "$toolchain_clang")/ld.lld"
if [ -x "$toolchain_lld" ]; then
    flags+=(-Xswiftc -use-ld=lld)
    if [ -f scripts/link-order.txt ]; then
        # The linker orders sections, not functions, and swiftc gives a section of its own only to
        # public functions: listing an internal one moved its module's whole .text, so the
        # functions a cold run needs stayed spread over 7 MB.
        flags+=(-Xswiftc -Xfrontend -Xswiftc -function-sections)
        flags+=(-Xlinker "--symbol-ordering-file=$PWD/scripts/link-order.txt" -Xlinker --no-warn-symbol-ordering)
    fi
    # swiftc exports every symbol of an executable (6,400: the package's public API and its
    # dependencies'); no library this one loads looks a name up in it, and the loader's lookups
    # from the libraries it does load fault in most of that 570 KB table at every start.
    flags+=(-Xlinker --no-export-dynamic)
    glibc="$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{ print $2 }')"
    if [ -n "$glibc" ] && printf '2.36\n%s\n' "$glibc" | sort -V -C; then
        flags+=(-Xlinker -z -Xlinker pack-relative-relocs)
    fi
fi
if [ "${1:-}" = "--show-bin-path" ]; then exec swift build "${flags[@]}" --show-bin-path; fi
bin="$(swift build "${flags[@]}" --show-bin-path)"
for product in "${@:-tokencache}"; do
    # SwiftPM does not know the order file is an input of the link: relink when it changed.
    if [ -f scripts/link-order.txt ] && [ scripts/link-order.txt -nt "$bin/$product" ]; then rm -f "$bin/$product"; fi
    swift build "${flags[@]}" --product "$product"
    # The CLI links FoundationEssentials, never the whole of Foundation: one `import Foundation`
    # in any module it links brings CoreFoundation and ICU, whose initialisers run at every start
    # (cold `token` peak RSS 15.5 -> 19.9 MB, Benchmarks/results/HISTORY.md).
    if [ "$product" = tokencache ] && nm "$bin/$product" 2>/dev/null | grep -q ' __CFInitialize$'; then
        echo "build-release.sh: $bin/$product links Foundation (CoreFoundation, ICU): import FoundationEssentials in the modules it links" >&2
        exit 1
    fi
done
