#!/usr/bin/env bash
# The desktop sample's end-to-end test: builds the app and the CLI, starts Xvfb, a window manager
# (metacity, compositing, so GTK draws the window's rounded frame and shadow) and a private D-Bus
# session (GTK starts the AT-SPI bus in it), and runs Tests/desktop_test.py, which drives the real
# GTK 4 / libadwaita app through the accessibility tree against the local identity provider and its
# Graph stand-in, with headless Chromium as the browser. The framed window's screenshot goes to $1
# (default: the build directory), for CI's artefacts; --update-screenshot writes it to
# screenshot.png, the one the READMEs show.
#   Examples/DesktopApp/test-desktop.sh [SCREENSHOT.png | --update-screenshot]
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd ../.. && pwd)
case "${1:-}" in
    --update-screenshot) SCREENSHOT="$PWD/screenshot.png" ;;
    *) SCREENSHOT="$(realpath -m "${1:-.build/desktop-app.png}")" ;;
esac
swift build --package-path "$ROOT" --product tokencache
swift build
BIN=$(swift build --package-path "$ROOT" --show-bin-path)

WORK=$(mktemp -d)
XVFB=
cleanup() {
    status=$?
    if [ "$status" != 0 ]; then
        sed 's/^/Xvfb: /' "$WORK/xvfb.log" >&2 || true
        [ ! -s "$WORK/wm.log" ] || sed 's/^/metacity: /' "$WORK/wm.log" >&2 || true
    fi
    [ -n "$XVFB" ] && kill "$XVFB" 2>/dev/null
    wait 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
# -displayfd: Xvfb picks a free display and writes its number once it accepts connections. -noreset:
# the AT-SPI bus launcher connects and leaves first, and a server reset then would refuse the app.
Xvfb -displayfd 3 -screen 0 1280x1100x24 -nolisten tcp -noreset 3>"$WORK/display" 2>"$WORK/xvfb.log" &
XVFB=$!
for _ in $(seq 100); do [ -s "$WORK/display" ] && break; sleep 0.1; done
[ -s "$WORK/display" ] || { echo "test-desktop: Xvfb did not start: $(cat "$WORK/xvfb.log")" >&2; exit 1; }
export DISPLAY=":$(head -1 "$WORK/display")"
unset DBUS_SESSION_BUS_ADDRESS AT_SPI_BUS_ADDRESS GNOME_KEYRING_CONTROL
# A home of the test's own: the session's gnome-keyring (started by D-Bus activation with the
# bus's environment, and no login keyring: no 'default' collection) keeps its keyrings there.
mkdir -p "$WORK/home/.local/share" "$WORK/run"
chmod 700 "$WORK/run"
export HOME="$WORK/home" XDG_DATA_HOME="$WORK/home/.local/share" XDG_CONFIG_HOME="$WORK/home/.config" \
    XDG_CACHE_HOME="$WORK/home/.cache" XDG_RUNTIME_DIR="$WORK/run"
# A desktop behind the window: ImageMagick's display sets the root window's background and exits
# (with status 1 though it did, so the screen is checked instead).
convert -size 1280x1100 gradient:'#c0d4ec-#8aa4c8' "$WORK/background.png"
display -window root "$WORK/background.png" || true
# In the session: metacity (its compositor draws GTK's translucent shadow; it ends with the X
# server), then the test, with Debian's python3, which has pyatspi (not a venv's).
# GCR_PERSIST (read by gcr-prompter, which the bus starts with its environment): the prompter
# quits 10 s after its last prompt, and gnome-keyring dismisses a prompt sent as it quits; the
# test's second keyring prompt comes a few seconds after the first, close to that on a busy machine.
export WORK GCR_PERSIST=1
dbus-run-session -- sh -c 'metacity --sm-disable --compositor=xrender >"$WORK/wm.log" 2>&1 & exec "$@"' sh \
    /usr/bin/python3 Tests/desktop_test.py --app "$PWD/.build/debug/DesktopApp" --tokencache "$BIN/tokencache" \
    --idp "$ROOT/Tests/TokenCacheTestIdentityProvider/Fixtures/fake_idp.py" --screenshot "$SCREENSHOT" \
    --answer-keyring-prompt "$ROOT/scripts/lib/answer-keyring-prompt.py" 2> >(grep -v "^dbus-daemon\|fd limit" >&2)
echo "test-desktop: screenshot at $SCREENSHOT"
