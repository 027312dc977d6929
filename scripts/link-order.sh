#!/usr/bin/env bash
# Regenerates scripts/link-order.txt: the functions a cold `tokencache` run executes, in the
# order first executed, which scripts/build-release.sh hands to the linker so that they sit
# together in the binary.
#
# Why: the kernel maps an executable's code 64 KB at a time around each page touched (fault-around),
# so code a cold run needs, spread over the 10 MB of .text (the Swift runtime, FoundationEssentials,
# this package), made 6.4 MB of it resident for a `token` lookup. Laid out together, the same run
# keeps about 2.7 MB less resident (peak RSS 15.6 -> 12.9 MB). A stale list only loses some of
# that: symbols it names that no longer exist are ignored, and new code is laid out as usual.
# The linker moves sections, not symbols: scripts/build-release.sh compiles with -function-sections
# so that each function is one (code of the toolchain's static libraries stays in the few large
# sections it was built with).
#
# Records, with callgrind, a Secret Service `token` lookup (in a throw-away keyring), then a
# `token` lookup and a `list --json` on the encrypted file (100 accounts). Needs valgrind and the interop venv
# (scripts/install-deps.sh); run it after large changes to what those commands execute.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "link-order.sh needs valgrind (apt-get install valgrind)" >&2; exit 2; }
scripts/build-release.sh >/dev/null
BUILT="$(scripts/build-release.sh --show-bin-path)/tokencache"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
# Recorded from a copy without DWARF: valgrind 3.19 cannot read the toolchain's DWARF 5 (it gives
# up on the binary); the symbol table, which is all the order needs, stays.
BIN="$WORK/tokencache"
strip --strip-debug -o "$BIN" "$BUILT"
.venv/bin/python Benchmarks/scripts/gen_msal_cache.py --accounts 3 > "$WORK/cache.json"
.venv/bin/python Benchmarks/scripts/gen_msal_cache.py --accounts 100 > "$WORK/large.json"
CLIENT=aaaaaaaa-0000-0000-0000-000000000002
ACCOUNT=user0@contoso.com
record() { valgrind --tool=callgrind --demangle=no --callgrind-out-file="$WORK/$1.out" "${@:2}" >/dev/null 2>"$WORK/$1.log" || { echo "link-order.sh: $1 failed:" >&2; cat "$WORK/$1.log" >&2; exit 1; }; }
export WORK BIN CLIENT ACCOUNT
export -f record
scripts/with-test-keyring.sh bash -c '
    "$BIN" import --backend secret-service --format msal-json "$WORK/cache.json" >/dev/null
    record 1-secret-service "$BIN" token --backend secret-service --client "$CLIENT" --scopes User.Read --account "$ACCOUNT"'
export HOME="$WORK/home"
mkdir -p "$HOME"
"$BIN" import --backend file --group org.link-order --format msal-json "$WORK/cache.json" >/dev/null
record 2-file-token "$BIN" token --backend file --group org.link-order --client "$CLIENT" --scopes User.Read --account "$ACCOUNT"
"$BIN" import --backend file --group org.link-order-large --format msal-json "$WORK/large.json" >/dev/null
record 3-file-list "$BIN" list --json --backend file --group org.link-order-large
# Function names in the order callgrind first lists them, kept when the binary defines them.
nm --defined-only "$BUILT" | awk '$2 ~ /^[tTwW]$/ { print $3 }' | sort -u > "$WORK/defined"
for out in "$WORK"/[0-9]-*.out; do sed -n 's/^c\{0,1\}fn=([0-9]*) //p' "$out"; done \
    | awk '!seen[$0]++' | grep -Fxf "$WORK/defined" > scripts/link-order.txt
echo "scripts/link-order.txt: $(wc -l < scripts/link-order.txt) functions"
