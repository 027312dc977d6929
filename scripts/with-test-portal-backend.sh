#!/usr/bin/env bash
# Runs COMMAND on a private session bus where the real xdg-desktop-portal gives the Secret
# portal through a test backend (scripts/test-secret-portal-backend.py) that answers ANSWER:
# cancel (response 1, as a backend whose dialog was dismissed), fail (2), error (the backend
# fails; the portal answers 2), short (0 with 10 bytes instead of 64) or none (no Secret
# backend: the portal has no Secret interface). The bus has nothing
# else: no gnome-keyring, no document portal, no activation. Every process started here is
# ended here, by its id. The backend logs each call's app ID to $PORTAL_BACKEND_LOG if set.
#   scripts/with-test-portal-backend.sh ANSWER scripts/with-test-flatpak.sh COMMAND...
set -euo pipefail
(($# >= 2)) || { echo "usage: $0 cancel|fail|error|short|none COMMAND..." >&2; exit 2; }
ANSWER="$1"; shift
REPO="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/tokencache-portal.XXXXXX")"
PIDS=()
cleanup() {
    # SIGKILL: a test process's children inherit a signal mask that blocks SIGTERM (measured:
    # xdg-desktop-portal run from the test binary ignored it and this wait hung).
    for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 143' TERM INT  # so that the EXIT trap ends what was started here

cat > "$WORK/bus.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=$WORK/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy>
</busconfig>
CONF
# Their output goes to files (shown on failure): no process left behind holds the caller's pipes.
# The bus is ready when dbus-daemon prints its address, after listen(): its socket file exists
# from bind() on, and a connection in between is refused (xdg-desktop-portal then exits with
# "No session bus: ... Connection refused", met once on a fresh clone).
mkfifo "$WORK/bus-ready"
exec {READY}<>"$WORK/bus-ready"
dbus-daemon --config-file="$WORK/bus.conf" --nofork --nopidfile --nosyslog --print-address="$READY" >"$WORK/log" 2>&1 &
PIDS+=($!)
read -r -t 30 -u "$READY" DBUS_SESSION_BUS_ADDRESS \
    || { echo "dbus-daemon did not start within 30 s" >&2; cat "$WORK/log" >&2; exit 1; }  # a loaded machine
export DBUS_SESSION_BUS_ADDRESS
exec {READY}<&-

. "$REPO/scripts/lib/test-session.sh"  # wait_for_bus_name
wait_for_name() { wait_for_bus_name "$1" "$2" || { cat "$WORK/log" >&2; return 1; }; }  # NAME PID
mkdir "$WORK/portals"
if [ "$ANSWER" != none ]; then
    printf '[portal]\nDBusName=org.swifttokencache.TestSecretPortal\nInterfaces=org.freedesktop.impl.portal.Secret;\nUseIn=tokencache-test\n' \
        > "$WORK/portals/tokencache-test.portal"
    /usr/bin/python3 "$REPO/scripts/test-secret-portal-backend.py" org.swifttokencache.TestSecretPortal "$ANSWER" \
        "${PORTAL_BACKEND_LOG:-/dev/null}" >>"$WORK/log" 2>&1 &
    PIDS+=($!)
    wait_for_name org.swifttokencache.TestSecretPortal $!
fi
XDG_DESKTOP_PORTAL_DIR="$WORK/portals" XDG_CURRENT_DESKTOP=tokencache-test /usr/libexec/xdg-desktop-portal --replace \
    >>"$WORK/log" 2>&1 &
PIDS+=($!)
wait_for_name org.freedesktop.portal.Desktop $!

status=0
"$@" || status=$?
exit "$status"
