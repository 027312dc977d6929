#!/usr/bin/env bash
# Runs a command inside a private D-Bus session where a headless KeePassXC, with a throw-away
# database and a temporary HOME, is the only org.freedesktop.secrets owner, so the Secret Service
# tests can run against KeePassXC without touching a real keyring or database.
#   scripts/with-test-keepassxc.sh swift test --skip-build
# Needs keepassxc (2.7; scripts/install-deps.sh installs it) and dbus.
#
# The database is written as KeePass XML and imported with keepassxc-cli, because the group exposed
# over the Secret Service is kept in the database's own custom data (FDO_SECRETS_EXPOSED_GROUP,
# a braced UUID), which keepassxc-cli cannot set and the GUI sets in Database Settings.
# The settings file turns the integration on and its notifications and confirmation dialogs off
# (KeePassXC 2.7's keys, src/core/Config.cpp): with QT_QPA_PLATFORM=offscreen nobody could answer one.
# The bus has no service directories, so nothing (gnome-keyring, kwalletd5) can be D-Bus-activated as
# org.freedesktop.secrets behind KeePassXC's back.
set -euo pipefail
TEST_ROOT="$(mktemp -d /tmp/tokencache-keepassxc.XXXXXX)"
trap 'rm -rf "$TEST_ROOT"' EXIT
mkdir -p "$TEST_ROOT/home/.config/keepassxc" "$TEST_ROOT/home/.cache" "$TEST_ROOT/run" "$TEST_ROOT/dbus-services"
chmod 700 "$TEST_ROOT/run"
export TOKENCACHE_REAL_HOME="$HOME"
export HOME="$TEST_ROOT/home"
export XDG_DATA_HOME="$HOME/.local/share" XDG_CONFIG_HOME="$HOME/.config" XDG_CACHE_HOME="$HOME/.cache"
export XDG_RUNTIME_DIR="$TEST_ROOT/run"
# SwiftPM and the toolchain keep their caches under the real HOME.
export SWIFTPM_CACHE_PATH="${SWIFTPM_CACHE_PATH:-$TOKENCACHE_REAL_HOME/.cache/org.swift.swiftpm}"
unset DBUS_SESSION_BUS_ADDRESS GNOME_KEYRING_CONTROL DISPLAY WAYLAND_DISPLAY XDG_SESSION_ID
export QT_QPA_PLATFORM=offscreen
export TOKENCACHE_TEST_KEYRING=1 TOKENCACHE_TEST_PROVIDER=keepassxc
export KEEPASSXC_TEST_DB="$TEST_ROOT/tokencache-test.kdbx" KEEPASSXC_TEST_PASSWORD="test-password"
export KEEPASSXC_TEST_LOG="$TEST_ROOT/keepassxc.log"

# AutoSaveAfterEveryChange is off: KeePassXC 2.7.4 saves the database on a pooled thread after each
# change and crashes there (SIGSEGV in QUuid::toRfc4122) under a burst of Secret Service writes (20
# saves in a row did it in most runs); with it off, no crash in any run (docs/SecretService.md).
cat >"$HOME/.config/keepassxc/keepassxc.ini" <<'EOF'
[General]
ConfigVersion=2
SingleInstance=false
RememberLastDatabases=false
RememberLastKeyFiles=false
OpenPreviousDatabasesOnStartup=false
AutoSaveAfterEveryChange=false
AutoReloadOnChange=false
UpdateCheckMessageShown=true

[GUI]
CheckForUpdates=false
ShowTrayIcon=false
MinimizeOnStartup=false

[Browser]
Enabled=false

[SSHAgent]
Enabled=false

[Security]
LockDatabaseIdle=false
LockDatabaseScreenLock=false
LockDatabaseMinimize=false

[FdoSecrets]
Enabled=true
ShowNotification=false
ConfirmAccessItem=false
ConfirmDeleteItem=false
UnlockBeforeSearch=false
EOF

# The root group ({746f6b65-6e63-6163-6865-2d7465737421}, "tokencache-test!" as bytes) is the one exposed.
cat >"$TEST_ROOT/database.xml" <<'EOF'
<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<KeePassFile>
	<Meta>
		<Generator>KeePassXC</Generator>
		<DatabaseName>tokencache-test</DatabaseName>
		<RecycleBinEnabled>False</RecycleBinEnabled>
		<CustomData>
			<Item>
				<Key>FDO_SECRETS_EXPOSED_GROUP</Key>
				<Value>{746f6b65-6e63-6163-6865-2d7465737421}</Value>
			</Item>
		</CustomData>
	</Meta>
	<Root>
		<Group>
			<UUID>dG9rZW5jYWNoZS10ZXN0IQ==</UUID>
			<Name>tokencache-test</Name>
		</Group>
	</Root>
</KeePassFile>
EOF
printf '%s\n%s\n' "$KEEPASSXC_TEST_PASSWORD" "$KEEPASSXC_TEST_PASSWORD" |
    keepassxc-cli import -q -p -t 100 "$TEST_ROOT/database.xml" "$KEEPASSXC_TEST_DB" >/dev/null 2>"$TEST_ROOT/import.log" ||
    { cat "$TEST_ROOT/import.log" >&2; exit 1; }

. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/private-bus.sh"
write_private_bus_config "$TEST_ROOT"

status=0
dbus-run-session --config-file="$TEST_ROOT/session.conf" -- bash -c '
    set -euo pipefail
    printf "%s\n" "$KEEPASSXC_TEST_PASSWORD" | keepassxc --pw-stdin "$KEEPASSXC_TEST_DB" >"$KEEPASSXC_TEST_LOG" 2>&1 &
    daemon=$!
    stop() {
        kill "$daemon" 2>/dev/null || return 0
        # A KeePassXC stuck in a dialog ignores SIGTERM.
        for _ in $(seq 50); do kill -0 "$daemon" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$daemon" 2>/dev/null || true
        wait "$daemon" 2>/dev/null || true
    }
    trap stop EXIT
    owned() {
        dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
            org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets 2>/dev/null | grep -q "boolean true"
    }
    for _ in $(seq 200); do
        owned && break
        kill -0 "$daemon" 2>/dev/null || break
        sleep 0.1
    done
    if ! owned; then
        if kill -0 "$daemon" 2>/dev/null; then
            echo "with-test-keepassxc: KeePassXC did not take org.freedesktop.secrets within 20 s; its log:" >&2
        else
            echo "with-test-keepassxc: KeePassXC exited before taking org.freedesktop.secrets; its log:" >&2
        fi
        cat "$KEEPASSXC_TEST_LOG" >&2
        exit 1
    fi
    # The name is taken before the database is unlocked; a call that reaches the collection while it
    # is still locked opens an unlock dialog nobody can answer, so wait for Locked=false as well.
    unlocked() {
        local collection
        collection="$(dbus-send --session --print-reply --dest=org.freedesktop.secrets /org/freedesktop/secrets \
            org.freedesktop.DBus.Properties.Get string:org.freedesktop.Secret.Service string:Collections \
            2>/dev/null | sed -n "s/.*object path \"\(.*\)\"/\1/p" | head -n 1)"
        [ -n "$collection" ] && dbus-send --session --print-reply --dest=org.freedesktop.secrets "$collection" \
            org.freedesktop.DBus.Properties.Get string:org.freedesktop.Secret.Collection string:Locked \
            2>/dev/null | grep -q "boolean false"
    }
    for _ in $(seq 200); do
        unlocked && break
        sleep 0.1
    done
    if ! unlocked; then
        echo "with-test-keepassxc: KeePassXC never exposed an unlocked collection within 20 s; its log:" >&2
        cat "$KEEPASSXC_TEST_LOG" >&2
        exit 1
    fi
    "$@"
' with-test-keepassxc "$@" || status=$?
exit "$status"
