#!/usr/bin/env bash
# scripts/with-test-keyring.sh --provider keepassxc (kept for the callers of this name).
exec "$(dirname "$0")/with-test-keyring.sh" --provider keepassxc "$@"
