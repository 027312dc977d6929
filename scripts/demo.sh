#!/usr/bin/env bash
# The main job: installs what the demo is missing (scripts/install-deps.sh --demo: GLib's
# headers, pkg-config and libcurl, named before they are installed; nothing only the test suite
# needs, and no service started), builds (release, with the Swift and C++ runtimes linked in, as
# the CLI is shipped: scripts/build-release.sh), and runs the demo of two apps sharing sign-in
# through the token cache.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --demo
scripts/build-release.sh tokencache-demo tokencache
exec "$(scripts/build-release.sh --show-bin-path)/tokencache-demo" "$@"
