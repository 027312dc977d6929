#!/usr/bin/env bash
# The Debian package as a new user gets it (#30): builds it (scripts/build-deb.sh), installs it
# for real with apt (root or sudo), then from the installed files only, with no LD_LIBRARY_PATH
# and /opt/swift off every path: checks nothing it loads comes from a Swift toolchain, runs
# `tokencache --help`, compiles the C example with `pkg-config --cflags --libs tokencache` and
# runs it and the Python example (system python3) in the isolated keyring after a save through
# the CLI, runs the C tests and the Python tests against the installed library, and finally
# removes the package and checks its files are gone.
#   scripts/test-deb.sh [DEB]          default: build it
# Refuses to run where a tokencache package is already installed (it would remove it).
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
if dpkg-query -W -f='${Status}' tokencache 2>/dev/null | grep -q "install ok installed"; then
    echo "test-deb.sh: a tokencache package is installed already; remove it first" >&2
    exit 1
fi
deb="${1:-$(scripts/build-deb.sh)}"
deb="$(realpath "$deb")"
WORK="$(mktemp -d)"
cleanup() {
    $SUDO dpkg -r tokencache >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT
# The toolchain must play no part from here on.
export PATH="$(tr ':' '\n' <<< "$PATH" | grep -v '^/opt/swift' | paste -sd:)"
unset LD_LIBRARY_PATH TOKENCACHE_LIBRARY PYTHONPATH
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$deb" >/dev/null
dpkg-query -W -f='${Package} ${Version} ${Status}\n' tokencache

lib="$(pkg-config --variable=libdir tokencache)/libtokencache.so.0"
for elf in /usr/bin/tokencache "$lib"; do
    if ldd "$elf" | grep -E 'swift|not found'; then echo "FAIL: $elf needs the above" >&2; exit 1; fi
done
[ "$(objdump -p "$lib" | awk '/SONAME/ { print $2 }')" = libtokencache.so.0 ] || { echo "FAIL: soname" >&2; exit 1; }
scripts/check-c-abi.sh "$lib"
# Captured, not piped into grep -q: grep leaving at the first match would make the CLI's second
# write die of SIGPIPE, which pipefail reports as a failure (CI saw it once).
help_status=0; help="$(/usr/bin/tokencache --help 2>&1)" || help_status=$?
[ "$help_status" = 0 ] && grep -q "USAGE: tokencache" <<< "$help" \
    || { echo "FAIL: tokencache --help exited $help_status and printed:" >&2; echo "$help" >&2; exit 1; }
man -w tokencache >/dev/null 2>&1 || [ -f /usr/share/man/man1/tokencache.1.gz ]

# The C example, built as its header comment says.
cc -o "$WORK/example" Examples/c/example.c $(pkg-config --cflags --libs tokencache)
cat > "$WORK/run.sh" <<'SH'
set -euo pipefail
client=aaaaaaaa-0000-0000-0000-0000000e0a1e
/usr/bin/tokencache save --client "$client" --authority https://login.microsoftonline.com/11111111-1111-1111-1111-111111111111 \
    --scopes User.Read --response Examples/example-response.json >/dev/null
output="$("$WORK/example" "$client" User.Read)"
echo "$output"
grep -q "access token: Bearer, expires in" <<< "$output" || { echo "FAIL: the C example found no token" >&2; exit 1; }
output="$(/usr/bin/python3 /usr/share/doc/tokencache/examples/example.py "$client" User.Read)"
echo "$output"
grep -q "access token: Bearer, expires" <<< "$output" || { echo "FAIL: the Python example found no token" >&2; exit 1; }
SH
WORK="$WORK" scripts/with-test-keyring.sh bash "$WORK/run.sh"
TOKENCACHE_CLI=/usr/bin/tokencache scripts/test-c-api.sh --installed
scripts/test-python.sh --installed

$SUDO dpkg -r tokencache >/dev/null
for path in /usr/bin/tokencache "$lib" /usr/include/tokencache.h; do
    [ ! -e "$path" ] || { echo "FAIL: $path left after removal" >&2; exit 1; }
done
echo "Debian package $(basename "$deb"): installed, used from C, Python and the CLI, removed"
