#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer) of the parsers that read untrusted input, each for a
# bounded time (FUZZ_SECONDS, default 60). Starts from the committed seed corpus in
# Fuzz/Corpus/<target>; fails on any crash, leaving the crashing input in Fuzz/crashes/.
#   scripts/fuzz.sh                 # every target
#   FUZZ_SECONDS=600 scripts/fuzz.sh msal-json
set -euo pipefail
cd "$(dirname "$0")/../Fuzz"
SECONDS_PER_TARGET="${FUZZ_SECONDS:-60}"
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=(msal-json token-response jwt encrypted-file http-request-head broker-request json-split)

swift build -Xswiftc -sanitize=fuzzer -Xswiftc -enable-testing
BINARY="$(swift build -Xswiftc -sanitize=fuzzer -Xswiftc -enable-testing --show-bin-path)/TokenCacheFuzz"
mkdir -p crashes
for target in "${TARGETS[@]}"; do
    work="$(mktemp -d)"
    cp -r "Corpus/$target/." "$work/"
    echo "fuzzing $target for ${SECONDS_PER_TARGET}s"
    scratch="$(mktemp -d)"  # the encrypted-file target writes its cache file here
    if ! TMPDIR="$scratch" TOKENCACHE_FUZZ_TARGET="$target" "$BINARY" -max_total_time="$SECONDS_PER_TARGET" -max_len=65536 \
            -rss_limit_mb=4096 -artifact_prefix="crashes/$target-" -print_final_stats=1 "$work" > "fuzz-$target.log" 2>&1; then
        tail -40 "fuzz-$target.log"
        echo "FAILED: $target crashed; input saved under Fuzz/crashes/" >&2
        exit 1
    fi
    grep -E "stat::number_of_executed_units|stat::new_units_added" "fuzz-$target.log" | sed "s/^/$target: /"
    rm -rf "$work" "$scratch"
done
