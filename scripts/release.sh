#!/usr/bin/env bash
# Builds the release artefacts from this checkout (#60), for people who install tokencache without
# a Swift toolchain:
#   .build/release-artefacts/tokencache-VERSION-linux-ARCH.tar.gz
#       bin/tokencache (the release build: Swift runtime inside), lib/libtokencache.so.VERSION,
#       include/tokencache.h, the pkg-config template, the man page, bash/zsh/fish completions,
#       the Python binding, the C and Python examples, and install.sh (POSIX sh: --prefix,
#       --uninstall; scripts/release-install.sh)
#   .build/release-artefacts/*.deb and the .changes file (scripts/build-deb.sh, lintian clean)
#   scripts/release.sh [OUTPUT_DIRECTORY]    prints the tarball's path, then the .changes file's
#   scripts/release.sh --tarball-only [OUTPUT_DIRECTORY]
# scripts/test-release.sh installs both where no Swift toolchain can be reached and uses them.
set -euo pipefail
cd "$(dirname "$0")/.."
debs=true
if [ "${1:-}" = --tarball-only ]; then debs=false; shift; fi
OUT="$(realpath -m "${1:-.build/release-artefacts}")"
header=Sources/CTokenCache/include/tokencache.h
version="$(awk '/#define TOKENCACHE_VERSION_(MAJOR|MINOR|PATCH)/ { v = v (v == "" ? "" : ".") $3 } END { print v }' "$header")"
arch="$(uname -m)"
name="tokencache-$version-linux-$arch"

scripts/build-release.sh tokencache >&2
bin="$(scripts/build-release.sh --show-bin-path)/tokencache"
scripts/build-c-library.sh .build/c-library >&2
DOCS="$(mktemp -d)"
STAGE="$(mktemp -d)"
trap 'rm -rf "$DOCS" "$STAGE"' EXIT
scripts/generate-docs.sh "$bin" "$DOCS" >&2

root="$STAGE/$name"
mkdir -p "$root/bin" "$root/lib" "$root/include" "$root/share/man/man1" "$root/share/tokencache" \
    "$root/share/bash-completion/completions" "$root/share/zsh/site-functions" "$root/share/fish/vendor_completions.d" \
    "$root/share/doc/tokencache/examples" "$root/python/tokencache"
install -m 0755 "$bin" "$root/bin/tokencache"
strip --strip-unneeded "$root/bin/tokencache"
install -m 0755 scripts/git-credential-tokencache "$root/bin/git-credential-tokencache"
install -m 0644 ".build/c-library/lib/libtokencache.so.$version" "$root/lib/libtokencache.so.$version"
install -m 0644 "$header" "$root/include/tokencache.h"
install -m 0644 Sources/TokenCacheC/tokencache.pc.in "$root/share/tokencache/tokencache.pc.in"
install -m 0644 "$DOCS/man/man1/tokencache.1" "$root/share/man/man1/tokencache.1"
install -m 0644 "$DOCS/completions/bash/tokencache" "$root/share/bash-completion/completions/tokencache"
install -m 0644 "$DOCS/completions/zsh/_tokencache" "$root/share/zsh/site-functions/_tokencache"
install -m 0644 "$DOCS/completions/fish/tokencache.fish" "$root/share/fish/vendor_completions.d/tokencache.fish"
install -m 0644 Examples/c/example.c Examples/python/example.py "$root/share/doc/tokencache/examples/"
install -m 0644 python/tokencache/*.py "$root/python/tokencache/"
install -m 0755 scripts/release-install.sh "$root/install.sh"
install -m 0644 LICENSE CHANGELOG.md "$root/"
echo "$version" > "$root/VERSION"
cat > "$root/README" <<EOF
tokencache $version for Linux ($arch): the shared MSAL token cache, built from commit
$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown). Needs GLib 2 and glibc $(ldd --version | awk 'NR == 1 { print $NF }') or later.

    ./install.sh                  # into /usr/local as root, ~/.local otherwise (--prefix DIR)
    ./install.sh --uninstall      # removes what it installed

Then: tokencache --help, man tokencache; C: cc app.c \$(pkg-config --cflags --libs tokencache);
Python: import tokencache. Examples in share/doc/tokencache/examples.
EOF
mkdir -p "$OUT"
# Reproducible: sorted names, no owner, the last commit's time.
mtime="$(git log -1 --format=%ct 2>/dev/null || date +%s)"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$mtime" -C "$STAGE" -czf "$OUT/$name.tar.gz" "$name"
echo "$OUT/$name.tar.gz"
if $debs; then
    scripts/build-deb.sh "$OUT"
fi
