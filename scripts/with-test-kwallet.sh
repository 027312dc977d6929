#!/usr/bin/env bash
# Runs a command inside a private D-Bus session where a headless kwalletd5, with a throw-away wallet
# and a temporary HOME, is the only org.freedesktop.secrets owner, so the Secret Service tests can run
# against KWallet without touching a real wallet.
#   scripts/with-test-kwallet.sh swift test --skip-build
# Needs kwalletd5 (libkf5wallet-bin), QCA's OpenSSL plugin (libqca-qt5-2-plugins: without it every
# Secret Service session fails with "createDLGroup failed"), python3 and dbus; scripts/install-deps.sh
# installs them.
#
# kwalletd5 is started as pam_kwallet starts it at login, so no password dialog ever opens: with
# PAM_KWALLET5_LOGIN set, `kwalletd5 --pam-login PIPE_FD SOCKET_FD` reads a 56-byte key from the pipe,
# accepts one connection on the listening socket and reads the session environment from it, then opens
# (creating it if missing) the default wallet with that key (KWalletD::pamOpen). The key here is fixed,
# not derived from a password. A wallet created that way is not yet a Secret Service collection (the
# collections are listed once, at start-up), so kwalletd5 is started twice: the first run creates
# kdewallet.kwl, the second lists it and opens it.
#
# The wallet is open, yet its collection reports Locked=true until a client calls Unlock, which returns
# a prompt that completes without a dialog once Prompt is called on it (libsecret does this; secret-tool
# works as is). TOKENCACHE_TEST_KWALLET_UNLOCK=1 does that before running the command, for testing
# everything else with the collection unlocked.
#
# The bus has no service directories, so nothing (gnome-keyring, a second kwalletd5) can be
# D-Bus-activated as org.freedesktop.secrets behind the daemon's back.
set -euo pipefail
TEST_ROOT="$(mktemp -d /tmp/tokencache-kwallet.XXXXXX)"
trap 'rm -rf "$TEST_ROOT"' EXIT
mkdir -p "$TEST_ROOT/home/.config" "$TEST_ROOT/home/.local/share" "$TEST_ROOT/run" "$TEST_ROOT/dbus-services"
chmod 700 "$TEST_ROOT/run"
export TOKENCACHE_REAL_HOME="$HOME"
export HOME="$TEST_ROOT/home"
export XDG_DATA_HOME="$HOME/.local/share" XDG_CONFIG_HOME="$HOME/.config" XDG_CACHE_HOME="$HOME/.cache"
export XDG_RUNTIME_DIR="$TEST_ROOT/run"
# SwiftPM and the toolchain keep their caches under the real HOME.
export SWIFTPM_CACHE_PATH="${SWIFTPM_CACHE_PATH:-$TOKENCACHE_REAL_HOME/.cache/org.swift.swiftpm}"
unset DBUS_SESSION_BUS_ADDRESS GNOME_KEYRING_CONTROL DISPLAY WAYLAND_DISPLAY PAM_KWALLET5_LOGIN
export QT_QPA_PLATFORM=offscreen
export TOKENCACHE_TEST_KEYRING=1 TOKENCACHE_TEST_PROVIDER=kwallet
export KWALLET_TEST_ROOT="$TEST_ROOT" KWALLET_TEST_LOG="$TEST_ROOT/kwalletd.log"

# KWallet 5's keys (kwalletd.cpp, kwalletfreedesktopservice.cpp): the Secret Service API on, one
# wallet, never closed behind the tests' back, no first-use wizard.
cat >"$HOME/.config/kwalletrc" <<'EOF'
[Wallet]
Enabled=true
First Use=false
Default Wallet=kdewallet
Local Wallet=kdewallet
Use One Wallet=true
Close When Idle=false
Close on Screensaver=false
Leave Open=true
Prompt on Open=false
Launch Manager=false

[org.freedesktop.secrets]
apiEnabled=true
EOF

. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/private-bus.sh"
write_private_bus_config "$TEST_ROOT"

# What pam_kwallet does: a pipe carrying the key, a listening socket for the environment.
# Prints kwalletd5's pid.
cat >"$TEST_ROOT/pam-login.py" <<'EOF'
import os, socket, subprocess
path = os.path.join(os.environ["XDG_RUNTIME_DIR"], "kwallet5.socket")
if os.path.exists(path):
    os.unlink(path)
read_end, write_end = os.pipe()
os.write(write_end, b"tokencache-test-wallet-key".ljust(56, b"."))
os.close(write_end)
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(path)
listener.listen(1)
os.environ["PAM_KWALLET5_LOGIN"] = path
log = open(os.environ["KWALLET_TEST_LOG"], "ab")
daemon = subprocess.Popen(["kwalletd5", "--pam-login", str(read_end), str(listener.fileno())],
                          pass_fds=(read_end, listener.fileno()), stdin=subprocess.DEVNULL,
                          stdout=log, stderr=log, start_new_session=True)
os.close(read_end)
listener.close()
client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    client.connect(path)
except OSError as error:
    raise SystemExit("kwalletd5 (pid %d, exit status %s) did not accept the environment: %s"
                     % (daemon.pid, daemon.poll(), error))
client.sendall("".join("%s=%s\n" % item for item in os.environ.items()
                       if item[0] != "PAM_KWALLET5_LOGIN").encode())
client.close()
print(daemon.pid)
EOF

status=0
dbus-run-session --config-file="$TEST_ROOT/session.conf" -- bash -c '
    set -euo pipefail
    daemon=""
    stop() {
        [ -n "$daemon" ] || return 0
        kill "$daemon" 2>/dev/null || return 0
        for _ in $(seq 50); do kill -0 "$daemon" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$daemon" 2>/dev/null || true
        for _ in $(seq 20); do kill -0 "$daemon" 2>/dev/null || break; sleep 0.1; done
        daemon=""
    }
    trap stop EXIT
    fail() {
        echo "with-test-kwallet: $1; kwalletd5 log:" >&2
        cat "$KWALLET_TEST_LOG" >&2
        exit 1
    }
    has_owner() {
        dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
            org.freedesktop.DBus.NameHasOwner "string:$1" 2>/dev/null | grep -q "boolean true"
    }
    wallet="$XDG_DATA_HOME/kwalletd/kdewallet.kwl"
    # First run: creates the wallet.
    daemon="$(python3 "$KWALLET_TEST_ROOT/pam-login.py")" || fail "kwalletd5 --pam-login did not start"
    for _ in $(seq 200); do
        [ -s "$wallet" ] && break
        kill -0 "$daemon" 2>/dev/null || fail "kwalletd5 exited before creating $wallet"
        sleep 0.1
    done
    [ -s "$wallet" ] || fail "kwalletd5 did not create $wallet within 20 s"
    stop
    for _ in $(seq 50); do has_owner org.kde.kwalletd5 || break; sleep 0.1; done
    # Second run: lists the wallet as a collection and opens it.
    daemon="$(python3 "$KWALLET_TEST_ROOT/pam-login.py")" || fail "kwalletd5 --pam-login did not start"
    collection_listed() {
        dbus-send --session --print-reply --dest=org.freedesktop.secrets /org/freedesktop/secrets \
            org.freedesktop.DBus.Properties.Get string:org.freedesktop.Secret.Service string:Collections \
            2>/dev/null | grep -q "object path"
    }
    for _ in $(seq 200); do
        has_owner org.freedesktop.secrets && collection_listed && break
        kill -0 "$daemon" 2>/dev/null || break
        sleep 0.1
    done
    has_owner org.freedesktop.secrets || fail "kwalletd5 did not take org.freedesktop.secrets within 20 s"
    collection_listed || fail "kwalletd5 lists no Secret Service collection"
    if [ "${TOKENCACHE_TEST_KWALLET_UNLOCK:-0}" = 1 ]; then
        collection=/org/freedesktop/secrets/collection/kdewallet
        prompt="$(dbus-send --session --print-reply --dest=org.freedesktop.secrets /org/freedesktop/secrets \
            org.freedesktop.Secret.Service.Unlock "array:objpath:$collection" |
            sed -n "s/.*object path \"\(.*\)\"/\1/p" | tail -n 1)"
        if [ -n "$prompt" ] && [ "$prompt" != / ]; then
            dbus-send --session --print-reply --dest=org.freedesktop.secrets "$prompt" \
                org.freedesktop.Secret.Prompt.Prompt string: >/dev/null
        fi
        for _ in $(seq 50); do
            dbus-send --session --print-reply --dest=org.freedesktop.secrets "$collection" \
                org.freedesktop.DBus.Properties.Get string:org.freedesktop.Secret.Collection string:Locked |
                grep -q "boolean false" && break
            sleep 0.1
        done
    fi
    "$@"
' with-test-kwallet "$@" || status=$?
exit "$status"
