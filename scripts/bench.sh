#!/usr/bin/env bash
# The benchmark suite in one command: measures swift-tokencache against secret-tool (the C floor
# for one Secret Service round trip) and MSAL Python + msal-extensions (the reference Linux
# implementation) on the same throw-away gnome-keyring in one run, and writes
# Benchmarks/results/RESULTS.md (machine, medians, min/max, ratios, PASS/MISS per target) and
# Benchmarks/results/results.json.
#
#   scripts/bench.sh                 the full run (about 10-15 minutes on 2 cores)
#   BENCH_SMOKE=1 scripts/bench.sh   a quick run with few repetitions, to check the machinery
#                                    (written to Benchmarks/results/smoke/, which git ignores)
#
# Never touches a real keyring: every scenario runs in scripts/with-test-keyring.sh. Numbers are
# only meaningful on an otherwise idle machine; RESULTS.md records the load average.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/apt.sh  # apt_get

scripts/install-deps.sh
# Peers and tools the benchmarks need beyond the test dependencies.
missing=()
command -v hyperfine >/dev/null || missing+=(hyperfine)
[ -x /usr/bin/time ] || missing+=(time)
command -v openssl >/dev/null || missing+=(openssl)
command -v dbus-monitor >/dev/null || missing+=(dbus)
if ((${#missing[@]})); then
    echo "Installing: ${missing[*]}" >&2
    apt_get update -qq
    apt_get install -y -qq "${missing[@]}" >/dev/null
fi

echo "Building (release)" >&2
scripts/build-release.sh tokencache
# SwiftPM keeps a stale build plan for the Benchmarks package when files are added to this one
# (its path dependency): "cannot find X in scope". Re-planning is cheap; compiled objects stay.
rm -f Benchmarks/.build/release.yaml Benchmarks/.build/debug.yaml
swift build -c release --package-path Benchmarks --product bench-tool
BENCH_BIN="$(scripts/build-release.sh --show-bin-path)"
BENCH_TOOL_BIN="$(swift build -c release --package-path Benchmarks --show-bin-path)"
export BENCH_BIN BENCH_TOOL_BIN
# The ordo-one benchmark target is built here, outside the keyring session's temporary HOME.
swift package --package-path Benchmarks --disable-sandbox benchmark list >/dev/null

exec .venv/bin/python Benchmarks/scripts/bench.py "$@"
