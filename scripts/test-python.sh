#!/usr/bin/env bash
# The Python binding (python/, #30): installed with pip into a throw-away directory, then its
# tests and the Python example run with the venv's Python against libtokencache and a real,
# isolated gnome-keyring (scripts/with-test-keyring.sh).
#   scripts/test-python.sh               library from TOKENCACHE_C_LIBRARY (default: built by
#                                        scripts/build-c-library.sh), CLI from the debug build
#   scripts/test-python.sh --installed   the Debian package's binding, library and CLI, with the
#                                        system's /usr/bin/python3 (no pip, no venv)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${TOKENCACHE_TEST_PYTHON:-$PWD/.venv/bin/python}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
if [ "${1:-}" = "--installed" ]; then
    unset TOKENCACHE_LIBRARY PYTHONPATH LD_LIBRARY_PATH
    export TOKENCACHE_CLI=/usr/bin/tokencache
    PYTHON=/usr/bin/python3
    site=/usr/lib/python3/dist-packages/tokencache
else
    lib="${TOKENCACHE_C_LIBRARY:-$WORK/lib}"
    [ -n "${TOKENCACHE_C_LIBRARY:-}" ] || scripts/build-c-library.sh "$lib" >&2
    export TOKENCACHE_LIBRARY="$(realpath "$lib")/lib/libtokencache.so.0"
    # The CLI from the debug build unless TOKENCACHE_CLI names one.
    [ -n "${TOKENCACHE_CLI:-}" ] || { swift build --product tokencache >&2; TOKENCACHE_CLI="$(swift build --show-bin-path)/tokencache"; }
    export TOKENCACHE_CLI
fi
if [ -z "${site:-}" ]; then
    # Installed as a user would (no network: the venv's setuptools builds it), from a copy:
    # setuptools writes build/ and egg-info beside the sources.
    cp -R python "$WORK/source"
    "$PYTHON" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps --target "$WORK/site" "$WORK/source"
    export PYTHONPATH="$WORK/site"
    site="$WORK/site"
fi
cat > "$WORK/run.sh" <<'SH'
set -euo pipefail
"$PYTHON" -c 'import tokencache, sys; sys.exit(0 if tokencache.__file__.startswith(sys.argv[1]) else "not the installed package")' "$SITE"
"$PYTHON" python/tests/test_tokencache.py
# The example, on the default group, after the CLI saved a sign-in there.
client=aaaaaaaa-0000-0000-0000-0000000e0a1e
"$TOKENCACHE_CLI" save --client "$client" --authority https://login.microsoftonline.com/11111111-1111-1111-1111-111111111111 --scopes User.Read \
    --response Examples/example-response.json >/dev/null
output="$("$PYTHON" Examples/python/example.py "$client" User.Read)"
echo "$output"
grep -q "access token: Bearer, expires" <<< "$output" || { echo "FAIL: the Python example found no token" >&2; exit 1; }
SH
WORK="$WORK" PYTHON="$PYTHON" SITE="$site" scripts/with-test-keyring.sh bash "$WORK/run.sh"
