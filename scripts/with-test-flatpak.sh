#!/usr/bin/env bash
# Runs COMMAND the way Flatpak runs an app: in bubblewrap, with a /.flatpak-info for a test app
# ID, the app's own XDG_DATA_HOME (~/.var/app/<id>/data, the only part of HOME it sees), and a
# session bus on which the real xdg-desktop-portal answers, with gnome-keyring as its Secret
# portal backend. As under Flatpak, the sandbox reaches the bus only through xdg-dbus-proxy
# (itself sandboxed with the same /.flatpak-info, so the portal knows the app), which lets it
# talk to org.freedesktop.portal.* only: org.freedesktop.secrets is not visible inside.
# Must run inside a D-Bus session with gnome-keyring (scripts/with-test-keyring.sh):
#   scripts/with-test-keyring.sh scripts/with-test-flatpak.sh [--app-id ID] [--talk NAME]... COMMAND...
# --talk NAME lets the sandbox talk to NAME too, as a manifest's --talk-name=NAME does (e.g.
# org.freedesktop.secrets for an app that migrates from the host keyring).
# --snap NAME runs COMMAND as snapd runs a strictly confined snap's app instead, as far as
# libsecret and we can tell: no /.flatpak-info, SNAP_NAME=NAME, HOME=SNAP_USER_DATA
# (~/snap/NAME/x1) and no XDG_*_HOME. Without snapd the portal cannot tell which snap the
# caller is (it asks `snap routine portal-info`), so it gives the secret of an unsandboxed app.
set -euo pipefail
APP_ID=org.swifttokencache.TestApp
SNAP=""
TALK=(--talk='org.freedesktop.portal.*')
while (($#)); do
    case "$1" in
        --app-id) APP_ID="$2"; shift 2 ;;
        --talk) TALK+=(--talk="$2"); shift 2 ;;
        --snap) SNAP="$2"; shift 2 ;;
        *) break ;;
    esac
done
(($#)) || { echo "usage: $0 [--app-id ID] [--talk NAME]... COMMAND..." >&2; exit 2; }
[ -n "${DBUS_SESSION_BUS_ADDRESS:-}" ] || { echo "no session bus: run inside scripts/with-test-keyring.sh" >&2; exit 2; }
REPO="$(cd "$(dirname "$0")/.." && pwd)"

# The real portal, D-Bus activated on first use, picks gnome-keyring's Secret backend
# (gnome-keyring.portal says UseIn=gnome). Idempotent, so concurrent callers agree.
dbus-update-activation-environment XDG_CURRENT_DESKTOP=GNOME
WORK="$(mktemp -d "${TMPDIR:-/tmp}/tokencache-flatpak.XXXXXX")"
WORK_INFO="$WORK/flatpak-info"
PROXY_PID=""
cleanup() {
    [ -z "$PROXY_PID" ] || kill "$PROXY_PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

if [ -n "$SNAP" ]; then
    APP_HOME="$HOME/snap/$SNAP"
    mkdir -p "$APP_HOME/x1" "$APP_HOME/common"
    chmod 700 "$HOME/snap" "$APP_HOME"
    IDENTITY=()
    APP_ENV=(--setenv SNAP_NAME "$SNAP" --setenv SNAP_INSTANCE_NAME "$SNAP" --setenv SNAP_REVISION x1
             --setenv SNAP_USER_DATA "$APP_HOME/x1" --setenv SNAP_USER_COMMON "$APP_HOME/common"
             --setenv SNAP_REAL_HOME "$HOME" --setenv HOME "$APP_HOME/x1"
             --unsetenv XDG_DATA_HOME --unsetenv XDG_CONFIG_HOME --unsetenv XDG_CACHE_HOME)
else
    APP_HOME="$HOME/.var/app/$APP_ID"
    mkdir -p "$APP_HOME/data" "$APP_HOME/config" "$APP_HOME/cache"
    chmod 700 "$HOME/.var" "$HOME/.var/app" "$APP_HOME"
    IDENTITY=(--ro-bind "$WORK_INFO" /.flatpak-info)
    APP_ENV=(--setenv FLATPAK_ID "$APP_ID" --setenv XDG_DATA_HOME "$APP_HOME/data"
             --setenv XDG_CONFIG_HOME "$APP_HOME/config" --setenv XDG_CACHE_HOME "$APP_HOME/cache")
fi
printf '[Application]\nname=%s\nruntime=runtime/org.freedesktop.Platform/x86_64/23.08\n\n[Instance]\ninstance-id=%s\n' \
    "$APP_ID" "$$" > "$WORK/flatpak-info"

# A root of its own: the host's /usr (merged /usr), /etc and /opt read-only, /tmp shared (test
# directories), the app's directory under HOME, the repository read-only (the programs under test).
SANDBOX=(--tmpfs / --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/sbin /sbin
         --symlink usr/lib /lib --symlink usr/lib64 /lib64 --ro-bind /etc /etc --ro-bind /opt /opt
         --proc /proc --dev /dev --bind /tmp /tmp --ro-bind "$REPO" "$REPO" --bind "$APP_HOME" "$APP_HOME"
         "${IDENTITY[@]}" --die-with-parent)

# The bus proxy, in a sandbox with the same /.flatpak-info (the portal reads the peer's).
# Ready when it writes to --fd, after listen(): its socket file exists from bind() on, and a
# connection in between is refused (as Flatpak does, never wait for the file).
PROXY_SOCKET="$WORK/bus"
mkfifo "$WORK/proxy-ready"
exec {READY}<>"$WORK/proxy-ready"
bwrap "${SANDBOX[@]}" --bind "$WORK" "$WORK" \
    xdg-dbus-proxy --fd="$READY" "$DBUS_SESSION_BUS_ADDRESS" "$PROXY_SOCKET" --filter "${TALK[@]}" &
PROXY_PID=$!
read -r -n 1 -t 30 -u "$READY" _ || { echo "xdg-dbus-proxy was not ready within 30 s" >&2; exit 1; }  # a loaded machine
exec {READY}<&-

status=0
bwrap "${SANDBOX[@]}" --ro-bind "$PROXY_SOCKET" /run/flatpak/bus \
    --setenv DBUS_SESSION_BUS_ADDRESS unix:path=/run/flatpak/bus "${APP_ENV[@]}" --unsetenv GNOME_KEYRING_CONTROL \
    "$@" || status=$?
exit "$status"
