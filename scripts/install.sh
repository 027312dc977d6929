#!/usr/bin/env bash
# Builds the release tokencache (scripts/build-release.sh) and installs it with its man page and
# bash, zsh and fish completions (scripts/generate-docs.sh). PREFIX (default /usr/local) and
# DESTDIR (staging root, for packages) as in make install:
#   scripts/install.sh                                  # /usr/local/bin/tokencache, ...
#   PREFIX=$HOME/.local scripts/install.sh              # no root needed
#   DESTDIR=debian/tokencache PREFIX=/usr scripts/install.sh
# TOKENCACHE_BINARY=PATH installs that binary instead of building (GENERATE_MANUAL as in
# scripts/generate-docs.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX="${PREFIX:-/usr/local}"
DESTDIR="${DESTDIR:-}"
BIN="${TOKENCACHE_BINARY:-}"
if [ -z "$BIN" ]; then
    scripts/build-release.sh tokencache
    BIN="$(scripts/build-release.sh --show-bin-path)/tokencache"
fi
DOCS="$(mktemp -d)"
trap 'rm -rf "$DOCS"' EXIT
scripts/generate-docs.sh "$BIN" "$DOCS"
ROOT="$DESTDIR$PREFIX"
install -D -m 0755 "$BIN" "$ROOT/bin/tokencache"
# git's name for the credential helper (`credential.helper = tokencache`).
install -D -m 0755 scripts/git-credential-tokencache "$ROOT/bin/git-credential-tokencache"
install -D -m 0644 "$DOCS/man/man1/tokencache.1" "$ROOT/share/man/man1/tokencache.1"
install -D -m 0644 "$DOCS/completions/bash/tokencache" "$ROOT/share/bash-completion/completions/tokencache"
install -D -m 0644 "$DOCS/completions/zsh/_tokencache" "$ROOT/share/zsh/site-functions/_tokencache"
install -D -m 0644 "$DOCS/completions/fish/tokencache.fish" "$ROOT/share/fish/vendor_completions.d/tokencache.fish"
echo "Installed tokencache, its man page and completions under $ROOT" >&2
