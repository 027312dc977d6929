# Sourced by scripts/with-test-keyring.sh (and, inside the private bus, by the shell it starts):
# the parts every test keyring provider shares.

# enter_test_home: a temporary root (/tmp/tokencache-test.XXXXXX, removed on exit; HarnessTests
# checks the name) with a HOME, XDG directories and an XDG_RUNTIME_DIR of its own; nothing of the
# real session is inherited.
enter_test_home() {
    export TEST_ROOT; TEST_ROOT="$(mktemp -d /tmp/tokencache-test.XXXXXX)"
    trap remove_test_root EXIT
    mkdir -p "$TEST_ROOT/home" "$TEST_ROOT/run"
    chmod 700 "$TEST_ROOT/run"
    export TOKENCACHE_REAL_HOME="$HOME"
    export HOME="$TEST_ROOT/home"
    export XDG_DATA_HOME="$HOME/.local/share" XDG_CONFIG_HOME="$HOME/.config" XDG_CACHE_HOME="$HOME/.cache"
    export XDG_RUNTIME_DIR="$TEST_ROOT/run"
    # SwiftPM and the toolchain keep their caches under the real HOME.
    export SWIFTPM_CACHE_PATH="${SWIFTPM_CACHE_PATH:-$TOKENCACHE_REAL_HOME/.cache/org.swift.swiftpm}"
    unset DBUS_SESSION_BUS_ADDRESS GNOME_KEYRING_CONTROL DISPLAY WAYLAND_DISPLAY XDG_SESSION_ID PAM_KWALLET5_LOGIN
    # Nor the user's token agent or an installed keeper this user enrolled with: tests name their own.
    unset TOKENCACHE_AGENT_SOCK TOKENCACHE_AGENT_UID TOKENCACHE_AGENT_PID
    export TOKENCACHE_KEEPER=off
    export TOKENCACHE_TEST_KEYRING=1
}

# remove_test_root: removes TEST_ROOT without changing the exit status. A service the bus
# activated (xdg-document-portal makes run/doc) can outlive the bus for a moment and write into
# the root while rm walks it: a few tries, then a warning, never a failed run.
remove_test_root() {
    local try
    for try in 1 2 3 4 5; do
        rm -rf "$TEST_ROOT" 2>/dev/null && return 0
        sleep 0.2
    done
    echo "warning: could not remove $TEST_ROOT" >&2
    return 0
}

# write_unlocked_keyring_activation: gnome-keyring 42 has died mid-run (a GLib trap in the
# kernel log); the bus then activates a new daemon whose login keyring is locked, and a peer's
# libsecret write waits for an unlock prompt nobody can answer (a hang, not a failure). The
# session's own service files (XDG_DATA_HOME/dbus-1/services, ahead of the system's) start it
# unlocked with the test password instead, and say so on stderr.
write_unlocked_keyring_activation() {
    local services="$XDG_DATA_HOME/dbus-1/services" start="$TEST_ROOT/start-unlocked-keyring"
    mkdir -p "$services"
    cat >"$start" <<'START'
#!/bin/sh
echo "with-test-keyring: gnome-keyring was started again by D-Bus activation (the first daemon is gone); unlocked with the test password" >&2
printf test-password | exec gnome-keyring-daemon --foreground --unlock --components=secrets
START
    chmod 755 "$start"
    local name
    for name in org.freedesktop.secrets org.gnome.keyring org.freedesktop.impl.portal.Secret; do
        printf '[D-BUS Service]\nName=%s\nExec=%s\n' "$name" "$start" >"$services/$name.service"
    done
}

# wait_for_bus_name NAME: until NAME has an owner on the session bus (gnome-keyring-daemon
# --unlock returns before its daemon owns org.freedesktop.secrets; a call in that gap would
# activate a second daemon). Up to 120 s (a seeded keyring of 30,000 items loads for a while
# before the daemon takes its name), then fails. With PID, fails at once when that process (the
# owner to be) has exited, rather than waiting out the 120 s.
wait_for_bus_name() {
    local try
    for try in $(seq 1200); do
        has_owner "$1" && return 0
        if [ -n "${2:-}" ] && ! kill -0 "$2" 2>/dev/null; then
            echo "${0##*/}: the process that was to own $1 on the test bus exited before it did" >&2
            return 1
        fi
        sleep 0.1
    done
    echo "${0##*/}: $1 has no owner on the test bus after 120 s" >&2
    return 1
}

# write_private_bus_config DIR: writes DIR/session.conf, a session bus on which nothing can be
# started by activation (an empty service directory, DIR/dbus-services), so the provider under test
# is the only org.freedesktop.secrets owner: a call made before it appears must not start
# gnome-keyring instead.
write_private_bus_config() {
    mkdir -p "$1/dbus-services"
    cat >"$1/session.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <keep_umask/>
  <listen>unix:tmpdir=/tmp</listen>
  <auth>EXTERNAL</auth>
  <servicedir>$1/dbus-services</servicedir>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
CONF
}

# Inside the bus. has_owner NAME: whether NAME is owned on the session bus.
has_owner() {
    dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus.NameHasOwner "string:$1" 2>/dev/null | grep "boolean true" >/dev/null
}

# secrets_property PATH INTERFACE PROPERTY: a Secret Service property, as dbus-send prints it.
secrets_property() {
    dbus-send --session --print-reply --dest=org.freedesktop.secrets "$1" \
        org.freedesktop.DBus.Properties.Get "string:$2" "string:$3" 2>/dev/null
}

# stop_daemon PID: SIGTERM, then SIGKILL after 5 s (a daemon stuck in a dialog ignores SIGTERM),
# and waits until it is gone.
stop_daemon() {
    kill "$1" 2>/dev/null || return 0
    for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true  # reaps it where it is this shell's child
    for _ in $(seq 20); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
}

# provider_failed MESSAGE LOG: MESSAGE and the daemon's LOG on stderr, then exit 1.
provider_failed() {
    echo "with-test-keyring ($TOKENCACHE_TEST_PROVIDER): $1; its log:" >&2
    cat "$2" >&2
    exit 1
}
