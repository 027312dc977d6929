# Sourced by scripts/with-test-keyring.sh --provider keepassxc: a headless KeePassXC (2.7), with a
# throw-away database, as the only org.freedesktop.secrets owner on a private bus.
# Needs keepassxc and dbus (scripts/install-deps.sh installs them).
#
# The database is written as KeePass XML and imported with keepassxc-cli, because the group exposed
# over the Secret Service is kept in the database's own custom data (FDO_SECRETS_EXPOSED_GROUP,
# a braced UUID), which keepassxc-cli cannot set and the GUI sets in Database Settings.
# The settings file turns the integration on and its notifications and confirmation dialogs off
# (KeePassXC 2.7's keys, src/core/Config.cpp): with QT_QPA_PLATFORM=offscreen nobody could answer one.

# prepare_keepassxc: the settings and the database, before the bus starts.
prepare_keepassxc() {
    mkdir -p "$HOME/.config/keepassxc" "$HOME/.cache"
    export QT_QPA_PLATFORM=offscreen
    export KEEPASSXC_TEST_DB="$TEST_ROOT/tokencache-test.kdbx" KEEPASSXC_TEST_PASSWORD="test-password"
    export PROVIDER_LOG="$TEST_ROOT/keepassxc.log"
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
}

# start_keepassxc: inside the bus, starts KeePassXC (stopped when the shell exits) and returns once
# it owns org.freedesktop.secrets with its collection unlocked.
start_keepassxc() {
    # Without a display, Qt's accessibility bridge (at-spi2-core, which WebKitGTK and GTK 4 bring)
    # makes KeePassXC 2.7.4 segfault at start-up most times (DESIGN.md §14).
    printf "%s\n" "$KEEPASSXC_TEST_PASSWORD" | QT_ACCESSIBILITY=0 NO_AT_BRIDGE=1 keepassxc --pw-stdin "$KEEPASSXC_TEST_DB" >"$PROVIDER_LOG" 2>&1 &
    daemon=$!
    trap 'stop_daemon "$daemon"' EXIT
    for _ in $(seq 200); do
        has_owner org.freedesktop.secrets && break
        kill -0 "$daemon" 2>/dev/null || break
        sleep 0.1
    done
    if ! has_owner org.freedesktop.secrets; then
        kill -0 "$daemon" 2>/dev/null || provider_failed "KeePassXC exited before taking org.freedesktop.secrets" "$PROVIDER_LOG"
        provider_failed "KeePassXC did not take org.freedesktop.secrets within 20 s" "$PROVIDER_LOG"
    fi
    # The name is taken before the database is unlocked; a call that reaches the collection while it
    # is still locked opens an unlock dialog nobody can answer, so wait for Locked=false as well.
    unlocked() {
        local collection
        # sed and grep read to the end (no `head`, no `grep -q`): an early exit would fail the pipe.
        collection="$(secrets_property /org/freedesktop/secrets org.freedesktop.Secret.Service Collections |
            sed -n "s/.*object path \"\(.*\)\"/\1/p")"
        collection="${collection%%$'\n'*}"
        [ -n "$collection" ] && secrets_property "$collection" org.freedesktop.Secret.Collection Locked | grep "boolean false" >/dev/null
    }
    for _ in $(seq 200); do
        unlocked && break
        sleep 0.1
    done
    unlocked || provider_failed "KeePassXC never exposed an unlocked collection within 20 s" "$PROVIDER_LOG"
}
