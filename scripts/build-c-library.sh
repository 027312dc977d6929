#!/usr/bin/env bash
# Builds libtokencache.so.0, the C interface (#30), with its header and pkg-config file:
#   scripts/build-c-library.sh [OUTPUT_DIRECTORY]       default .build/c-library
# Output: lib/libtokencache.so.<header version, e.g. 0.4.0> with the links libtokencache.so.0 and libtokencache.so,
# include/tokencache.h, lib/pkgconfig/tokencache.pc (PREFIX, default /usr, says where it will be
# installed; LIBDIR defaults to $PREFIX/lib/x86_64-linux-gnu as on Debian).
#
# SwiftPM builds and links the TokenCacheC dynamic library product (release, own scratch path so
# the CLI's release flags are not thrashed), with what a shared library needs passed on the
# command line, not as unsafeFlags in Package.swift (they would stop the package being usable as
# a dependency):
#   -Xswiftc -static-stdlib   the Swift runtime and Foundation inside, so no Swift toolchain is
#                             needed where it runs (it still needs the system's libstdc++6 and
#                             GLib); compiled against the static resource directory, whose modules
#                             name every archive they need
#   --disable-local-rpath     no $ORIGIN rpath: nothing is looked for beside it
#   -soname libtokencache.so.0, and the version script that exports only tokencache_* at
#   TOKENCACHE_0.1 (the sign-ins at TOKENCACHE_0.2, the single sign-on stores at TOKENCACHE_0.3, ...)
#   -z now -z relro           full RELRO (scripts/check-hardening.sh)
#   -z defs                   a symbol left undefined is a link error rather than a load-time one
# Only the one product is linked, so these reach no other link.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="$(realpath -m "${1:-.build/c-library}")"
PREFIX="${PREFIX:-/usr}"
LIBDIR="${LIBDIR:-$PREFIX/lib/x86_64-linux-gnu}"
SCRATCH="${TOKENCACHE_C_SCRATCH:-.build-clib}"
header=Sources/CTokenCache/include/tokencache.h
version="$(awk '/#define TOKENCACHE_VERSION_(MAJOR|MINOR|PATCH)/ { v = v (v == "" ? "" : ".") $3 } END { print v }' "$header")"
major="${version%%.*}"

flags=(-c release --scratch-path "$SCRATCH" --disable-local-rpath -Xswiftc -static-stdlib
       -Xlinker "-soname=libtokencache.so.$major" -Xlinker "--version-script=$PWD/Sources/TokenCacheC/tokencache.map"
       -Xlinker -z -Xlinker now -Xlinker -z -Xlinker relro -Xlinker -z -Xlinker defs)
bin="$(swift build "${flags[@]}" --show-bin-path)"
# SwiftPM does not know the version script is an input of the link: relink when it changed.
if [ Sources/TokenCacheC/tokencache.map -nt "$bin/libTokenCacheC.so" ]; then rm -f "$bin/libTokenCacheC.so"; fi
swift build "${flags[@]}" --product TokenCacheC >&2

rm -rf "$OUT"
mkdir -p "$OUT/lib/pkgconfig" "$OUT/include"
strip --strip-unneeded -o "$OUT/lib/libtokencache.so.$version" "$bin/libTokenCacheC.so"
ln -s "libtokencache.so.$version" "$OUT/lib/libtokencache.so.$major"
ln -s "libtokencache.so.$major" "$OUT/lib/libtokencache.so"
install -m 0644 "$header" "$OUT/include/tokencache.h"
sed -e "s|@PREFIX@|$PREFIX|" -e "s|@LIBDIR@|$LIBDIR|" -e "s|@INCLUDEDIR@|$PREFIX/include|" -e "s|@VERSION@|$version|" \
    Sources/TokenCacheC/tokencache.pc.in > "$OUT/lib/pkgconfig/tokencache.pc"
echo "libtokencache $version in $OUT" >&2
