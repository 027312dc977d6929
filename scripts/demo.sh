#!/usr/bin/env bash
# The main job: installs what is missing, builds (release, with the Swift runtime linked in, as
# the CLI is shipped), and runs the demo of two apps sharing sign-in through the token cache.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build -c release --static-swift-stdlib --product tokencache-demo
swift build -c release --static-swift-stdlib --product tokencache
exec "$(swift build -c release --static-swift-stdlib --show-bin-path)/tokencache-demo" "$@"
