#!/usr/bin/env bash
# Runs a command inside a private D-Bus session with a throw-away Secret Service provider and a
# temporary HOME, so tests never touch a real keyring, wallet or database:
#   scripts/with-test-keyring.sh [--provider gnome-keyring|keepassxc|kwallet] COMMAND...
#   scripts/with-test-keyring.sh swift test --skip-build
# gnome-keyring (the default): unlocked, on a bus that can D-Bus-activate services (the sandbox
# tests' xdg-desktop-portal). keepassxc, kwallet: headless, each the only org.freedesktop.secrets
# owner on a bus with no service directories, so nothing (gnome-keyring, kwalletd5) can be
# activated behind its back (scripts/lib/keepassxc.sh, scripts/lib/kwallet.sh say how each is run).
# The command sees TOKENCACHE_TEST_KEYRING=1 and TOKENCACHE_TEST_PROVIDER=<provider>.
# TOKENCACHE_TEST_KEYRING_SEED=DIR copies DIR's keyring files into gnome-keyring's keyrings folder
# before the daemon starts (the benchmarks seed large keyrings this way).
set -euo pipefail
LIB="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib"
export TOKENCACHE_TEST_PROVIDER=gnome-keyring
if [ "${1:-}" = --provider ]; then TOKENCACHE_TEST_PROVIDER="${2:-}"; shift 2 || shift; fi
case "$TOKENCACHE_TEST_PROVIDER" in
    gnome-keyring|keepassxc|kwallet) ;;
    *) echo "usage: $0 [--provider gnome-keyring|keepassxc|kwallet] COMMAND..." >&2; exit 2 ;;
esac
(($#)) || { echo "usage: $0 [--provider gnome-keyring|keepassxc|kwallet] COMMAND..." >&2; exit 2; }
. "$LIB/test-session.sh"
enter_test_home

status=0
if [ "$TOKENCACHE_TEST_PROVIDER" = gnome-keyring ]; then
    if [ -n "${TOKENCACHE_TEST_KEYRING_SEED:-}" ]; then
        mkdir -p "$HOME/.local/share/keyrings"
        cp -R "$TOKENCACHE_TEST_KEYRING_SEED"/. "$HOME/.local/share/keyrings/"
        chmod -R go-rwx "$HOME/.local"
    fi
    write_unlocked_keyring_activation
    TEST_LIB="$LIB" dbus-run-session -- bash -c '
        eval "$(printf "test-password" | gnome-keyring-daemon --unlock --components=secrets)"
        export GNOME_KEYRING_CONTROL
        . "$TEST_LIB/test-session.sh"
        wait_for_bus_name org.freedesktop.secrets || exit 1
        # A D-Bus-activated xdg-desktop-portal (the sandbox tests) uses gnome-keyring for Secret (UseIn=gnome).
        dbus-update-activation-environment XDG_CURRENT_DESKTOP=GNOME
        "$@"
    ' with-test-keyring "$@" || status=$?
else
    . "$LIB/$TOKENCACHE_TEST_PROVIDER.sh"
    "prepare_$TOKENCACHE_TEST_PROVIDER"
    write_private_bus_config "$TEST_ROOT"
    TEST_LIB="$LIB" dbus-run-session --config-file="$TEST_ROOT/session.conf" -- bash -c '
        set -euo pipefail
        . "$TEST_LIB/test-session.sh"
        . "$TEST_LIB/$TOKENCACHE_TEST_PROVIDER.sh"
        "start_$TOKENCACHE_TEST_PROVIDER"
        "$@"
    ' with-test-keyring "$@" || status=$?
fi
exit "$status"
