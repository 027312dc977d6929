#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs the demo of two apps sharing
# sign-in through the token cache.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build -c release --product tokencache-demo
swift build -c release --product tokencache
exec "$(swift build -c release --show-bin-path)/tokencache-demo" "$@"
