#!/usr/bin/env bash
# Builds libtokencache.so.0, the C interface (#30), with its header and pkg-config file:
#   scripts/build-c-library.sh [OUTPUT_DIRECTORY]       default .build/c-library
# Output: lib/libtokencache.so.<header version, e.g. 0.4.0> with the links libtokencache.so.0 and libtokencache.so,
# include/tokencache.h, lib/pkgconfig/tokencache.pc (PREFIX, default /usr, says where it will be
# installed; LIBDIR defaults to $PREFIX/lib/x86_64-linux-gnu as on Debian).
#
# SwiftPM builds the TokenCacheC product's objects (release, own scratch path so the CLI's
# release flags are not thrashed); this script then links them itself, because SwiftPM links a
# dynamic library neither with a soname nor a version script nor the static Swift runtime, and
# unsafeFlags in Package.swift would stop the package being usable as a dependency. The link is
# SwiftPM's own command (read from its build manifest) plus: -static-stdlib (the Swift runtime and
# Foundation inside, so no Swift toolchain is needed where it runs; it still needs the system's
# libstdc++6 and GLib), -soname libtokencache.so.0, and the version script that exports only
# tokencache_* at TOKENCACHE_0.1 (the sign-ins at TOKENCACHE_0.2, the single sign-on stores at
# TOKENCACHE_0.3). The objects were compiled
# against the shared Foundation, whose modules do not name the two archives the static
# FoundationEssentials needs: they are added, and -z defs makes any symbol left undefined a link
# error rather than a load-time one.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="$(realpath -m "${1:-.build/c-library}")"
PREFIX="${PREFIX:-/usr}"
LIBDIR="${LIBDIR:-$PREFIX/lib/x86_64-linux-gnu}"
SCRATCH="${TOKENCACHE_C_SCRATCH:-.build-clib}"
header=Sources/CTokenCache/include/tokencache.h
version="$(awk '/#define TOKENCACHE_VERSION_(MAJOR|MINOR|PATCH)/ { v = v (v == "" ? "" : ".") $3 } END { print v }' "$header")"
major="${version%%.*}"

swift build -c release --scratch-path "$SCRATCH" --product TokenCacheC >&2
bin="$(swift build -c release --scratch-path "$SCRATCH" --show-bin-path)"

# SwiftPM's link command for the product, from its manifest.
mapfile -t args < <(python3 - "$SCRATCH/release.yaml" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
block = re.search(r'"C\.TokenCacheC-[^"]*\.dylib":\n(.*?)\n  "', text, re.S) or re.search(r'"C\.TokenCacheC-[^"]*\.dylib":\n(.*)', text, re.S)
args = json.loads(re.search(r'args: (\[.*\])', block.group(1)).group(1))
out = []
skip = False
for arg in args:
    if skip: skip = False; continue
    if arg == "-o": skip = True; continue       # our own output name
    if arg.startswith("-rpath"): out.pop(); continue  # -Xlinker -rpath=$ORIGIN: nothing to find beside it
    out.append(arg)
print("\n".join(out))
PY
)

rm -rf "$OUT"
mkdir -p "$OUT/lib/pkgconfig" "$OUT/include"
"${args[@]}" -static-stdlib -o "$OUT/lib/libtokencache.so.$version" \
    -Xlinker "-soname=libtokencache.so.$major" \
    -Xlinker "--version-script=$PWD/Sources/TokenCacheC/tokencache.map" \
    -Xlinker --gc-sections -Xlinker -z -Xlinker now -Xlinker -z -Xlinker relro -Xlinker -z -Xlinker defs \
    -l_FoundationCollections -l_FoundationCShims
strip --strip-unneeded "$OUT/lib/libtokencache.so.$version"
ln -s "libtokencache.so.$version" "$OUT/lib/libtokencache.so.$major"
ln -s "libtokencache.so.$major" "$OUT/lib/libtokencache.so"
install -m 0644 "$header" "$OUT/include/tokencache.h"
sed -e "s|@PREFIX@|$PREFIX|" -e "s|@LIBDIR@|$LIBDIR|" -e "s|@INCLUDEDIR@|$PREFIX/include|" -e "s|@VERSION@|$version|" \
    Sources/TokenCacheC/tokencache.pc.in > "$OUT/lib/pkgconfig/tokencache.pc"
echo "libtokencache $version in $OUT" >&2
