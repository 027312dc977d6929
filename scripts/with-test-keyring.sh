#!/usr/bin/env bash
# Runs a command inside a private D-Bus session with a throw-away, unlocked gnome-keyring and a
# temporary HOME, so tests never touch a real login keyring.
#   scripts/with-test-keyring.sh swift test --skip-build
# TOKENCACHE_TEST_KEYRING_SEED=DIR copies DIR's keyring files into the temporary keyrings folder
# before the daemon starts (the benchmarks seed large keyrings this way).
set -euo pipefail
TEST_ROOT="$(mktemp -d /tmp/tokencache-test.XXXXXX)"
trap 'rm -rf "$TEST_ROOT"' EXIT
mkdir -p "$TEST_ROOT/home" "$TEST_ROOT/run"
chmod 700 "$TEST_ROOT/run"
if [ -n "${TOKENCACHE_TEST_KEYRING_SEED:-}" ]; then
    mkdir -p "$TEST_ROOT/home/.local/share/keyrings"
    cp -R "$TOKENCACHE_TEST_KEYRING_SEED"/. "$TEST_ROOT/home/.local/share/keyrings/"
    chmod -R go-rwx "$TEST_ROOT/home/.local"
fi
export TOKENCACHE_REAL_HOME="$HOME"
export HOME="$TEST_ROOT/home"
export XDG_DATA_HOME="$HOME/.local/share" XDG_CONFIG_HOME="$HOME/.config" XDG_CACHE_HOME="$HOME/.cache"
export XDG_RUNTIME_DIR="$TEST_ROOT/run"
# SwiftPM and the toolchain keep their caches under the real HOME.
export SWIFTPM_CACHE_PATH="${SWIFTPM_CACHE_PATH:-$TOKENCACHE_REAL_HOME/.cache/org.swift.swiftpm}"
unset DBUS_SESSION_BUS_ADDRESS GNOME_KEYRING_CONTROL DISPLAY WAYLAND_DISPLAY
export TOKENCACHE_TEST_KEYRING=1
exec dbus-run-session -- bash -c '
    eval "$(printf "test-password" | gnome-keyring-daemon --unlock --components=secrets)"
    export GNOME_KEYRING_CONTROL
    # A D-Bus-activated xdg-desktop-portal (the sandbox tests) uses gnome-keyring for Secret (UseIn=gnome).
    dbus-update-activation-environment XDG_CURRENT_DESKTOP=GNOME
    "$@"
' with-test-keyring "$@"
