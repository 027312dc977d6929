#!/usr/bin/env bash
# Builds the Debian packages from debian/ (debhelper) with `dpkg-buildpackage -us -uc -b` in this
# checkout, and checks them with lintian (no error, no warning):
#   libtokencache0       /usr/lib/<triplet>/libtokencache.so.0 (symbols file, static Swift runtime)
#   libtokencache-dev    tokencache.h, the .so link, tokencache.pc, the C example
#   tokencache           /usr/bin/tokencache, its man page, bash, zsh and fish completions
#   python3-tokencache   the Python binding (pure Python, ctypes), the Python example
#   tokencache-keeper    the token keeper's systemd socket and service, /etc/tokencache/apps.d
# Installs what is missing to build them (apt-get build-dep on debian/control, and lintian; root
# or sudo). The Swift builds stay in .build and .build-clib, so a rebuild only relinks.
#   scripts/build-deb.sh [OUTPUT_DIRECTORY]    default .build/deb; prints the .changes file's path
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/apt.sh  # apt_get
OUT="$(realpath -m "${1:-.build/deb}")"

if ! dpkg-checkbuilddeps 2>/dev/null || ! command -v lintian >/dev/null; then
    apt_get update -qq
    apt_get build-dep -y -qq ./ >/dev/null
    apt_get install -y -qq --no-install-recommends lintian >/dev/null
fi

dpkg-buildpackage -us -uc -b >&2
# dpkg-buildpackage writes beside the source tree: the .changes file names everything it built.
source="$(dpkg-parsechangelog -S Source)"
version="$(dpkg-parsechangelog -S Version)"
changes="../${source}_${version}_$(dpkg --print-architecture).changes"
mapfile -t files < <(awk '/^Files:/ { files = 1; next } /^[^ ]/ { files = 0 } files { print $5 }' "$changes")
mkdir -p "$OUT"
for file in "${files[@]}"; do mv -f "../$file" "$OUT/"; done
mv -f "$changes" "$OUT/"
changes="$OUT/$(basename "$changes")"

# Every package (and the build's .buildinfo), with the reason of any override shown.
lintian --fail-on error,warning --show-overrides --display-info "$changes" >&2
echo "$changes"
