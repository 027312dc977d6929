#!/usr/bin/env bash
# The token keeper benchmark (#62): a token from the keeper against a cold local lookup from the
# encrypted file, whole `tokencache token` processes in alternating pairs (Benchmarks/scripts/
# bench_keeper.py); writes Benchmarks/results/KEEPER.md and keeper.json. Needs root (useradd,
# setpriv, the keeper run as root).
#   scripts/bench-keeper.sh [--pairs N]     default 40 pairs after 3 warm-up runs of each side
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench-keeper.sh: run as root (useradd, setpriv, the keeper)" >&2; exit 1; }
echo "Building (release)" >&2
scripts/build-release.sh tokencache
exec python3 Benchmarks/scripts/bench_keeper.py --binary "$(scripts/build-release.sh --show-bin-path)/tokencache" "$@"
