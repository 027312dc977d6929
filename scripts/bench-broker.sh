#!/usr/bin/env bash
# The identity broker benchmark (#47): a broker-enabled MSAL Python app's silent token through
# `tokencache broker` against the same app's own MSAL cache and a cold `tokencache token`, in the
# broker harness (scripts/with-broker-harness.sh); writes Benchmarks/results/BROKER.md and broker.json.
#   scripts/bench-broker.sh                 the full run (about 2 minutes)
#   BENCH_SMOKE=1 scripts/bench-broker.sh   few repetitions, into Benchmarks/results/smoke/
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/apt.sh  # apt_get
scripts/install-deps.sh
if ! command -v hyperfine >/dev/null; then apt_get update -qq; apt_get install -y -qq hyperfine >/dev/null; fi
echo "Building (release)" >&2
scripts/build-release.sh tokencache
export TOKENCACHE_CLI="$(scripts/build-release.sh --show-bin-path)/tokencache"
export TOKENCACHE_TEST_PYTHON="$PWD/.venv/bin/python"
exec scripts/with-broker-harness.sh "$TOKENCACHE_TEST_PYTHON" Benchmarks/scripts/bench_broker.py
