#!/usr/bin/env bash
# Runs the whole test suite: builds, then runs `swift test` against a real, isolated
# gnome-keyring (private D-Bus session, temporary HOME), real OpenSSL and real MSAL Python,
# then builds the example package to exercise both SwiftPM plugins.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build --build-tests
export TOKENCACHE_TEST_PYTHON="$PWD/.venv/bin/python"
export TOKENCACHE_BUILD_DIR="$(swift build --show-bin-path)"
scripts/with-test-keyring.sh swift test --skip-build "$@"
# The SwiftPM plugins as an app uses them (skipped when running a filtered subset).
if [ $# -eq 0 ]; then scripts/check-example.sh; fi
