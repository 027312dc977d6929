# Sourced by scripts/with-test-keyring.sh --provider kwallet: a headless kwalletd5, with a throw-away
# wallet, as the only org.freedesktop.secrets owner on a private bus.
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

# prepare_kwallet: the settings and the pam_kwallet stand-in, before the bus starts.
prepare_kwallet() {
    mkdir -p "$HOME/.config" "$HOME/.local/share"
    export QT_QPA_PLATFORM=offscreen
    export PROVIDER_LOG="$TEST_ROOT/kwalletd.log"
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
log = open(os.environ["PROVIDER_LOG"], "ab")
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
}

# start_kwallet: inside the bus, starts kwalletd5 twice (see above; stopped when the shell exits) and
# returns once it owns org.freedesktop.secrets and lists the wallet as a collection.
start_kwallet() {
    daemon=""
    trap '[ -z "$daemon" ] || stop_daemon "$daemon"' EXIT
    local wallet="$XDG_DATA_HOME/kwalletd/kdewallet.kwl"
    # First run: creates the wallet.
    daemon="$(python3 "$TEST_ROOT/pam-login.py")" || provider_failed "kwalletd5 --pam-login did not start" "$PROVIDER_LOG"
    for _ in $(seq 200); do
        [ -s "$wallet" ] && break
        kill -0 "$daemon" 2>/dev/null || provider_failed "kwalletd5 exited before creating $wallet" "$PROVIDER_LOG"
        sleep 0.1
    done
    [ -s "$wallet" ] || provider_failed "kwalletd5 did not create $wallet within 20 s" "$PROVIDER_LOG"
    stop_daemon "$daemon"
    daemon=""
    for _ in $(seq 50); do has_owner org.kde.kwalletd5 || break; sleep 0.1; done
    # Second run: lists the wallet as a collection and opens it.
    daemon="$(python3 "$TEST_ROOT/pam-login.py")" || provider_failed "kwalletd5 --pam-login did not start" "$PROVIDER_LOG"
    collection_listed() {
        secrets_property /org/freedesktop/secrets org.freedesktop.Secret.Service Collections | grep "object path" >/dev/null
    }
    for _ in $(seq 200); do
        has_owner org.freedesktop.secrets && collection_listed && break
        kill -0 "$daemon" 2>/dev/null || break
        sleep 0.1
    done
    has_owner org.freedesktop.secrets || provider_failed "kwalletd5 did not take org.freedesktop.secrets within 20 s" "$PROVIDER_LOG"
    collection_listed || provider_failed "kwalletd5 lists no Secret Service collection" "$PROVIDER_LOG"
    if [ "${TOKENCACHE_TEST_KWALLET_UNLOCK:-0}" = 1 ]; then
        local collection=/org/freedesktop/secrets/collection/kdewallet prompt
        prompt="$(dbus-send --session --print-reply --dest=org.freedesktop.secrets /org/freedesktop/secrets \
            org.freedesktop.Secret.Service.Unlock "array:objpath:$collection" |
            sed -n "s/.*object path \"\(.*\)\"/\1/p" | tail -n 1)"
        if [ -n "$prompt" ] && [ "$prompt" != / ]; then
            dbus-send --session --print-reply --dest=org.freedesktop.secrets "$prompt" \
                org.freedesktop.Secret.Prompt.Prompt string: >/dev/null
        fi
        for _ in $(seq 50); do
            secrets_property "$collection" org.freedesktop.Secret.Collection Locked | grep "boolean false" >/dev/null && break
            sleep 0.1
        done
    fi
}
