#!/usr/bin/env bash
# The desktop sample's end-to-end test: builds the app and the CLI, starts Xvfb and a private D-Bus
# session (GTK starts the AT-SPI bus in it), and runs Tests/desktop_test.py, which drives the real
# GTK 4 app through the accessibility tree against the local identity provider and its Graph
# stand-in, with headless Chromium as the browser. The screenshot goes to $1 (default: the build
# directory), for CI's artefacts.
#   Examples/DesktopApp/test-desktop.sh [SCREENSHOT.png]
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd ../.. && pwd)
SCREENSHOT="$(realpath -m "${1:-.build/desktop-app.png}")"
swift build --package-path "$ROOT" --product tokencache
swift build
BIN=$(swift build --package-path "$ROOT" --show-bin-path)

WORK=$(mktemp -d)
XVFB=
cleanup() {
    status=$?
    [ "$status" = 0 ] || sed 's/^/Xvfb: /' "$WORK/xvfb.log" >&2
    [ -n "$XVFB" ] && kill "$XVFB" 2>/dev/null
    wait 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
# -displayfd: Xvfb picks a free display and writes its number once it accepts connections. -noreset:
# the AT-SPI bus launcher connects and leaves first, and a server reset then would refuse the app.
Xvfb -displayfd 3 -screen 0 1024x768x24 -nolisten tcp -noreset 3>"$WORK/display" 2>"$WORK/xvfb.log" &
XVFB=$!
for _ in $(seq 100); do [ -s "$WORK/display" ] && break; sleep 0.1; done
[ -s "$WORK/display" ] || { echo "test-desktop: Xvfb did not start: $(cat "$WORK/xvfb.log")" >&2; exit 1; }
export DISPLAY=":$(head -1 "$WORK/display")"
unset DBUS_SESSION_BUS_ADDRESS AT_SPI_BUS_ADDRESS
# Debian's python3, which has pyatspi (not a venv's).
dbus-run-session -- /usr/bin/python3 Tests/desktop_test.py --app "$PWD/.build/debug/DesktopApp" --tokencache "$BIN/tokencache" \
    --idp "$ROOT/Tests/TokenCacheTestIdentityProvider/Fixtures/fake_idp.py" --screenshot "$SCREENSHOT" 2> >(grep -v "^dbus-daemon\|fd limit" >&2)
echo "test-desktop: screenshot at $SCREENSHOT"
