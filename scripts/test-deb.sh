#!/usr/bin/env bash
# The Debian packages as a new user gets them (#37): built (scripts/build-deb.sh, lintian clean),
# installed for real with apt (root or sudo), then from the installed files only, with no
# LD_LIBRARY_PATH and the Swift toolchain off every path: checks nothing they load comes from a
# Swift toolchain, runs `tokencache --help`, compiles the C example with
# `pkg-config --cflags --libs tokencache` (no rpath) and runs it and the Python example (system
# python3) in the isolated keyring after a save through the CLI (the toolchain hidden in a mount namespace), runs the C tests and the Python
# tests against the installed library, and finally removes the packages and checks their files
# are gone.
#   scripts/test-deb.sh [CHANGES]      the .changes file scripts/build-deb.sh printed; default: build
# Refuses to run where one of the packages is installed already (it would remove it).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/apt.sh  # apt_get
packages=(libtokencache0 libtokencache-dev tokencache python3-tokencache)
for package in "${packages[@]}"; do
    if [ "$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)" = "install ok installed" ]; then
        echo "test-deb.sh: $package is installed already; remove it first" >&2
        exit 1
    fi
done
changes="${1:-}"
[ -n "$changes" ] || changes="$(scripts/build-deb.sh)"
changes="$(realpath "$changes")"
# From here on the Swift toolchain is out of reach, not only off PATH: the rest runs in a mount
# namespace of its own where /opt/swift is an empty directory (#60).
if [ "${TOKENCACHE_SWIFT_HIDDEN:-}" != 1 ]; then
    exec unshare --mount --propagation private env TOKENCACHE_SWIFT_HIDDEN=1 \
        bash -c 'if [ -d /opt/swift ]; then mount -t tmpfs -o mode=0755 tmpfs /opt/swift; fi; exec bash "$0" "$1"' "$0" "$changes"
fi
# The four packages the .changes file lists (not the debug symbols).
debs=()
for package in "${packages[@]}"; do
    deb="$(dirname "$changes")/$(awk -v p="$package" '/^Files:/ { files = 1; next } /^[^ ]/ { files = 0 }
        files && index($5, p "_") == 1 && $5 ~ /\.deb$/ { print $5 }' "$changes")"
    [ -f "$deb" ] || { echo "FAIL: no $package .deb beside $changes" >&2; exit 1; }
    debs+=("$deb")
done
WORK="$(mktemp -d)"
cleanup() {
    APT_ATTEMPTS=1 apt_get purge -y -qq "${packages[@]}" >/dev/null 2>&1 || true  # none may be installed
    rm -rf "$WORK"
}
trap cleanup EXIT
apt_get install -y -qq "${debs[@]}" >/dev/null
dpkg-query -W -f='${Package} ${Version} ${Status}\n' "${packages[@]}"

# The toolchain must play no part from here on.
PATH="$(tr ':' '\n' <<< "$PATH" | grep -v '^/opt/swift' | paste -sd:)"
export PATH
unset LD_LIBRARY_PATH TOKENCACHE_LIBRARY PYTHONPATH
if command -v swift swiftc >/dev/null || [ -n "$(ls -A /opt/swift 2>/dev/null)" ]; then echo "FAIL: a Swift toolchain is still in reach" >&2; exit 1; fi

lib="$(pkg-config --variable=libdir tokencache)/libtokencache.so.0"
for elf in /usr/bin/tokencache "$lib"; do
    loaded="$(ldd "$elf")"
    if grep -E 'swift|not found' <<< "$loaded"; then echo "FAIL: $elf needs the above" >&2; exit 1; fi
done
soname="$(objdump -p "$lib" | awk '/SONAME/ { print $2 }')"
[ "$soname" = libtokencache.so.0 ] || { echo "FAIL: soname $soname" >&2; exit 1; }
scripts/check-c-abi.sh "$lib"
# Captured, not piped into grep -q: grep leaving at the first match would make the CLI's second
# write die of SIGPIPE, which pipefail reports as a failure.
help_status=0; help="$(/usr/bin/tokencache --help 2>&1)" || help_status=$?
[ "$help_status" = 0 ] && grep -q "USAGE: tokencache" <<< "$help" \
    || { echo "FAIL: tokencache --help exited $help_status and printed:" >&2; echo "$help" >&2; exit 1; }
# git's name for the credential helper: a host it does not serve gets nothing (exit 0).
[ -z "$(printf 'protocol=https\nhost=github.com\n\n' | /usr/bin/git-credential-tokencache get)" ] \
    || { echo "FAIL: git-credential-tokencache answered for github.com" >&2; exit 1; }
for file in /usr/share/man/man1/tokencache.1.gz /usr/share/bash-completion/completions/tokencache /usr/share/zsh/vendor-completions/_tokencache \
    /usr/share/fish/vendor_completions.d/tokencache.fish; do
    [ -s "$file" ] || { echo "FAIL: no $file" >&2; exit 1; }
done
# The man page has no empty input line (man warns of each), the completions no hashbang.
page="$(zcat /usr/share/man/man1/tokencache.1.gz)"
if grep -n '^[[:space:]]*$' <<< "$page"; then echo "FAIL: the man page has the empty lines above" >&2; exit 1; fi
for file in /usr/share/bash-completion/completions/tokencache /usr/share/zsh/vendor-completions/_tokencache \
    /usr/share/fish/vendor_completions.d/tokencache.fish; do
    read -r first < "$file"
    [ "${first#\#!}" = "$first" ] || { echo "FAIL: $file starts with a hashbang" >&2; exit 1; }
done

# The C example, built as its header comment says, from the installed copy; no rpath needed.
example_c=/usr/share/doc/libtokencache-dev/examples/example.c
example_py=/usr/share/doc/python3-tokencache/examples/example.py
read -r -a flags <<< "$(pkg-config --cflags --libs tokencache)"
cc -o "$WORK/example" "$example_c" "${flags[@]}"
dynamic="$(objdump -p "$WORK/example")"
if grep -E 'RPATH|RUNPATH' <<< "$dynamic"; then echo "FAIL: the example has an rpath" >&2; exit 1; fi
cat > "$WORK/run.sh" <<'SH'
set -euo pipefail
client=aaaaaaaa-0000-0000-0000-0000000e0a1e
/usr/bin/tokencache save --client "$client" --authority https://login.microsoftonline.com/11111111-1111-1111-1111-111111111111 \
    --scopes User.Read --response Examples/example-response.json >/dev/null
output="$("$WORK/example" "$client" User.Read)"
echo "$output"
grep -q "access token: Bearer, expires in" <<< "$output" || { echo "FAIL: the C example found no token" >&2; exit 1; }
output="$(/usr/bin/python3 "$EXAMPLE_PY" "$client" User.Read)"
echo "$output"
grep -q "access token: Bearer, expires" <<< "$output" || { echo "FAIL: the Python example found no token" >&2; exit 1; }
SH
WORK="$WORK" EXAMPLE_PY="$example_py" scripts/with-test-keyring.sh bash "$WORK/run.sh"
/usr/bin/python3 -c 'import tokencache; print("python3: tokencache from", tokencache.__file__)'
TOKENCACHE_CLI=/usr/bin/tokencache scripts/test-c-api.sh --installed
scripts/test-python.sh --installed

apt_get purge -y -qq "${packages[@]}" >/dev/null
for path in /usr/bin/tokencache /usr/bin/git-credential-tokencache "$lib" /usr/include/tokencache.h /usr/lib/python3/dist-packages/tokencache; do
    [ ! -e "$path" ] || { echo "FAIL: $path left after removal" >&2; exit 1; }
done
echo "Debian packages ${packages[*]}: installed with apt, used from C, Python and the CLI, removed"
